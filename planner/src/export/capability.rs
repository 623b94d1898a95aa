//! The engine × architecture capability table: what each export target honours for each model
//! architecture kvplan runs, each entry with the engine source it was read from (file and
//! commit or release). `kvplan export` writes only what an entry says the engine honours, the
//! `vllm:` / `trtllm:` / `trtllm-engine:` reductions simulate it, and a pair without an entry
//! is refused with one error saying why and what the target can do instead ([`Refusal`]).
//!
//! This file holds the table's vocabulary (architectures, engines, layer rules, prefill, blocks,
//! sources) and the lookup [`capability`]; the entries themselves, with what each engine's source
//! says, live in the target file that writes for the engine ([`super::targets`]: `vllm.rs`,
//! `trtllm.rs` for both TensorRT-LLM backends, `llamacpp.rs`, `kvpress.rs`, `duo.rs`,
//! `headkv.rs`). The sources were read 2026-11: vLLM from its 0.33.0 wheel, commit `4ba787ec9`;
//! TensorRT-LLM, llama.cpp, kvpress, DuoAttention, HeadKV and KVCache-Factory at the commits
//! cited in each entry.

use std::fmt;

use crate::{Error, Result};

/// A model architecture kvplan runs (GGUF `general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Gemma3,
    Qwen3,
    Olmo2,
    Phi3,
    Gemma2,
    Smollm3,
}

impl Arch {
    /// Every architecture, in the order the help lists them.
    pub const ALL: [Arch; 8] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Gemma3,
        Arch::Qwen3,
        Arch::Olmo2,
        Arch::Phi3,
        Arch::Gemma2,
        Arch::Smollm3,
    ];

    /// The architecture named `name` in a plan's `model.architecture`.
    pub fn of(name: &str) -> Result<Arch> {
        match Self::ALL.into_iter().find(|a| a.name() == name) {
            Some(a) => Ok(a),
            None => Err(Error::invalid(
                "model.architecture",
                "llama, qwen2, gemma3, qwen3, olmo2, phi3, gemma2 or smollm3 (the capability \
                 table's architectures)",
                name,
            )),
        }
    }

    /// Its name in a plan and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
            Arch::Qwen3 => "qwen3",
            Arch::Olmo2 => "olmo2",
            Arch::Phi3 => "phi3",
            Arch::Gemma2 => "gemma2",
            Arch::Smollm3 => "smollm3",
        }
    }

    /// Whether the engines' entries for this architecture have been read from their sources
    /// (llama, qwen2, gemma3); the others are refused by every engine whose behaviour depends
    /// on the architecture ([`Refusal::unread`]) until someone reads them.
    pub fn engines_read(self) -> bool {
        matches!(self, Arch::Llama | Arch::Qwen2 | Arch::Gemma3)
    }
}

/// A target whose behaviour the table records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// vLLM (HF `config.json` `layer_types` + `sliding_window`).
    Vllm,
    /// TensorRT-LLM's PyTorch backend (`KvCacheConfig.max_attention_window`).
    Trtllm,
    /// TensorRT-LLM's legacy TensorRT engine (the same list, windowed prefill).
    TrtllmEngine,
    /// llama.cpp (`--override-kv <arch>.attention.sliding_window=int:W`).
    LlamaCpp,
    /// kvpress presses (`PerLayerCompressionPress`, `LUKVPress`, `DuoAttentionPress`).
    Kvpress,
    /// DuoAttention's own runner (`duo_attn`).
    DuoAttention,
    /// HeadKV and KVCache-Factory (`head_capacity`).
    HeadKv,
    /// SGLang (`--json-model-override-args`).
    Sglang,
}

impl Engine {
    /// Every engine the table has entries for.
    pub const ALL: [Engine; 8] = [
        Engine::Vllm,
        Engine::Trtllm,
        Engine::TrtllmEngine,
        Engine::LlamaCpp,
        Engine::Kvpress,
        Engine::DuoAttention,
        Engine::HeadKv,
        Engine::Sglang,
    ];

    /// The name reductions use (`vllm:headkv-r`) and errors print.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Trtllm => "trtllm",
            Engine::TrtllmEngine => "trtllm-engine",
            Engine::LlamaCpp => "llamacpp",
            Engine::Kvpress => "kvpress",
            Engine::DuoAttention => "duo",
            Engine::HeadKv => "headkv",
            Engine::Sglang => "sglang",
        }
    }

    /// The engines whose layer windows `kvplan eval --methods <engine>:<method>` simulates.
    pub const SIMULATED: [Engine; 3] = [Engine::Vllm, Engine::Trtllm, Engine::TrtllmEngine];

    /// The simulated engine called `name`.
    pub fn simulated(name: &str) -> Option<Engine> {
        Self::SIMULATED.into_iter().find(|e| e.name() == name)
    }
}

/// How an engine can window a model's layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layers {
    /// Full layers and one window shared by the others (`layer_types` + `sliding_window`).
    TwoClasses,
    /// One window on every layer, or none.
    OneWindow,
    /// One window per layer.
    PerLayer,
    /// The model's own windowed layers at one window of the user's choice; global layers full.
    NativeWindowOnly,
}

impl Layers {
    /// The rule's name in `kvplan-export.json` (`honours.layers`).
    pub fn name(self) -> &'static str {
        match self {
            Layers::TwoClasses => "two-classes",
            Layers::OneWindow => "one-window",
            Layers::PerLayer => "per-layer",
            Layers::NativeWindowOnly => "native-window-only",
        }
    }

    /// What the rule keeps, in words (`kvplan export --help`).
    pub fn describe(self) -> &'static str {
        match self {
            Layers::TwoClasses => "full layers and one window",
            Layers::OneWindow => "one window on every layer",
            Layers::PerLayer => "one window per layer",
            Layers::NativeWindowOnly => "the model's windowed layers at one window",
        }
    }
}

/// Whether the engine's attention kernel is given a layer's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefill {
    /// Each query sees the last `W` keys, in prefill and decode: the window applies from the
    /// first token.
    Windowed,
    /// The kernel gets no window: prefill and every decode step attend over every position the
    /// sequence's block table lists. The window only decides which blocks the block manager
    /// hands back to the pool in decode, and the kernel still reads them — their own keys and
    /// values until another request takes them, that request's after (TensorRT-LLM's PyTorch
    /// backend for Llama, Qwen2 and Gemma 3's global layers; [`super::targets::trtllm`]).
    Unwindowed,
}

/// How an engine rounds a layer's cache to its blocks ([`super::blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockRule {
    /// vLLM: `⌈n/B⌉` blocks for a full layer; a sliding one admitted with its tokens in
    /// flight, `⌈min(W − 1 + c·T, n)/B⌉ + 1`.
    Vllm,
    /// TensorRT-LLM: the whole prompt at admission; in decode the smallest window's layers keep
    /// `⌈min(n, W)/B⌉ + 1` blocks, every other layer its whole sequence.
    Trtllm,
    /// llama.cpp: cells made with the context, a sliding layer `pad₂₅₆(min(n_ctx, W + n_ubatch))`.
    LlamaCpp,
    /// One cell per entry (the Python packages' tensors).
    Entries,
}

impl BlockRule {
    /// The engine's default tokens per block (1: no blocks).
    pub const fn default_block_size(self) -> usize {
        match self {
            BlockRule::Vllm => 16,
            BlockRule::Trtllm => 32,
            BlockRule::LlamaCpp | BlockRule::Entries => 1,
        }
    }
}

/// One place in an engine's source an entry rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    /// `owner/name` of the repository, or the package and its release.
    pub repo: &'static str,
    /// Commit (or release tag) read.
    pub commit: &'static str,
    /// File and the names in it.
    pub file: &'static str,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} @ {}: {}", self.repo, self.commit, self.file)
    }
}

/// What an engine honours for one architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capability {
    pub engine: Engine,
    pub arch: Arch,
    /// How layers can be windowed (`None`: the target reads budgets or scores, not windows).
    pub layers: Option<Layers>,
    /// Prefill under a window.
    pub prefill: Prefill,
    /// Whether the target keeps attention sinks beside a window (kvplan writes none).
    pub sinks: bool,
    /// Default tokens per cache block (1: no blocks).
    pub block_size: usize,
    pub blocks: BlockRule,
    /// How a window couples with RoPE for this architecture.
    pub rope: &'static str,
    /// What to know beyond the fields (readers, architecture limits).
    pub note: &'static str,
    /// The source read.
    pub sources: &'static [Source],
}

/// A (target, architecture) pair the table refuses: why, and what the target can do instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub engine: Engine,
    pub arch: Arch,
    pub why: &'static str,
    pub instead: &'static str,
    pub sources: &'static [Source],
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} cannot run a {} plan: {} Instead: {}",
            self.engine.name(),
            self.arch.name(),
            self.why,
            self.instead,
        )?;
        if self.sources.is_empty() {
            return Ok(());
        }
        let sources: Vec<String> = self.sources.iter().map(ToString::to_string).collect();
        write!(f, " (source: {})", sources.join("; "))
    }
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::Refused(r.to_string())
    }
}

impl Capability {
    /// An entry of an engine that windows layers: `layers` and `prefill` as its source says, no
    /// sinks, RoPE untouched, blocks by `blocks` at their default size.
    pub(crate) const fn windows(
        engine: Engine,
        arch: Arch,
        layers: Layers,
        prefill: Prefill,
        blocks: BlockRule,
        sources: &'static [Source],
    ) -> Capability {
        Capability {
            engine,
            arch,
            layers: Some(layers),
            prefill,
            sinks: false,
            block_size: blocks.default_block_size(),
            blocks,
            rope: "a window leaves each layer's RoPE as it is",
            note: "",
            sources,
        }
    }

    /// An entry of a package that reads budgets or scores (no windows, no blocks).
    pub(crate) const fn package(
        engine: Engine,
        arch: Arch,
        note: &'static str,
        sources: &'static [Source],
    ) -> Capability {
        Capability {
            engine,
            arch,
            layers: None,
            prefill: Prefill::Unwindowed,
            sinks: false,
            block_size: 1,
            blocks: BlockRule::Entries,
            rope: "positions as the model's",
            note,
            sources,
        }
    }
}

impl Refusal {
    /// `engine` refuses an architecture whose entry nobody has read from the engine's source
    /// yet ([`Arch::engines_read`]): refused rather than written unread.
    pub(crate) const fn unread(engine: Engine, arch: Arch) -> Refusal {
        Refusal::new(
            engine,
            arch,
            "kvplan's capability table has no entry read from this engine's source for this \
             architecture yet, and writes nothing it has not read.",
            "--to kvpress (kvpress presses run every architecture transformers runs) or kvplan \
             generate --method M to run the plan in kvplan.",
            &[],
        )
    }

    /// `engine` refuses `arch`: `why`, what to do `instead`, and the `sources` that say so.
    pub(crate) const fn new(
        engine: Engine,
        arch: Arch,
        why: &'static str,
        instead: &'static str,
        sources: &'static [Source],
    ) -> Refusal {
        Refusal {
            engine,
            arch,
            why,
            instead,
            sources,
        }
    }
}
