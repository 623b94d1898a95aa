//! The engine × architecture capability table: what each export target honours for each model
//! architecture kvplan runs, each entry with the engine source it was read from (file and
//! commit or release). `kvplan export` writes only what an entry says the engine honours, the
//! `vllm:` / `trtllm:` / `trtllm-engine:` reductions simulate it, and a pair without an entry
//! is refused with one error saying why and what the target can do instead ([`Refusal`]).
//!
//! What the sources say (read 2026-11; vLLM from its 0.33.0 wheel, commit `4ba787ec9`;
//! TensorRT-LLM, llama.cpp, kvpress, DuoAttention, HeadKV and KVCache-Factory at the commits
//! cited in each entry):
//!
//! - **vLLM, Llama**: `LlamaAttention` passes `per_layer_sliding_window = config.sliding_window`
//!   to the layers `layer_types` marks `sliding_attention`: full layers and ONE window. The
//!   kernel windows prefill as well. No sinks. Blocks of 16 tokens (`CacheConfig.DEFAULT_BLOCK_SIZE`);
//!   a sliding layer reserves `⌈W/16⌉ + 1` blocks per request in decode
//!   (`SlidingWindowSpec.max_admission_blocks_per_request`).
//! - **vLLM, Qwen2**: `Qwen2Model` asserts `max_window_layers == num_hidden_layers` when
//!   `layer_types` mixes kinds, and `Qwen2Attention` passes no per-layer window; the model-wide
//!   window (`CacheConfig.sliding_window`) is set only when every layer is sliding
//!   (`EngineArgs.create_engine_config`). So Qwen2 runs ONE window on every layer, or none.
//! - **vLLM, Gemma 3**: `Gemma3Attention` takes the RoPE parameters of its layer type
//!   (`config.rope_parameters[layer_type]`): a global layer marked `sliding_attention` would
//!   rotate with the local base (10 000, not 1 000 000) — another model. The global layers must
//!   stay `full_attention` and the local ones already hold the model's window: nothing of a plan
//!   can be expressed. Refused.
//! - **TensorRT-LLM, PyTorch backend** (the default): `KvCacheConfig.max_attention_window` (one
//!   entry per layer, repeated if shorter) bounds what each layer's cache keeps; `QwenAttention`
//!   and `LlamaAttention` pass no `attention_window_size` to the attention kernel, so prefill is
//!   dense over the whole prompt and only the stored cache is windowed (PR #12597 fixed this for
//!   Mistral/Mixtral only; issue #11244 shows it on Llama 3.1). `Gemma3Attention` passes the
//!   model's `sliding_window` for its local layers only. Blocks of 32 tokens
//!   (`KvCacheConfig.tokens_per_block`), `⌈min(n, W)/32⌉` per layer
//!   (`calculateMaxBlockRequirementsPerBeam`, no sinks). RoPE untouched.
//! - **TensorRT-LLM, legacy TensorRT engine** (`trtllm-build`): the same `max_attention_window`
//!   list drives the GPT attention plugin's cyclic KV cache in context and generation, so prefill
//!   is windowed as well. Same blocks.
//! - **llama.cpp, Gemma 3**: the local layers are every layer but each 6th
//!   (`set_swa_pattern(6)`), their window `n_swa` read from `gemma3.attention.sliding_window`, which
//!   `--override-kv gemma3.attention.sliding_window=int:W` replaces; the global layers stay full,
//!   every layer keeps its RoPE. Other architectures have no windowed layers to override: refused.
//!
//! The Python packages' entries ([`Engine::Kvpress`], [`Engine::DuoAttention`],
//! [`Engine::HeadKv`]) say which runner reads the files for which architecture.

use std::fmt;

use crate::{Error, Result};

/// A model architecture kvplan runs (GGUF `general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Gemma3,
}

impl Arch {
    /// The architecture named `name` in a plan's `model.architecture`.
    pub fn of(name: &str) -> Result<Arch> {
        match name {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "gemma3" => Ok(Arch::Gemma3),
            _ => Err(Error::invalid(
                "model.architecture",
                "llama, qwen2 or gemma3 (the capability table's architectures)",
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
        }
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
}

impl Engine {
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

/// Whether a windowed layer attends over its window in prefill too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefill {
    /// Each prompt token sees the last `W` keys: the window applies from the first token.
    Windowed,
    /// Prefill attends over the whole prompt; only the stored cache keeps the last `W` entries.
    Dense,
}

/// How an engine rounds a layer's cache to its blocks ([`super::blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockRule {
    /// vLLM: `⌈n/B⌉` blocks for a full layer, `min(⌈n/B⌉, ⌈W/B⌉ + 1)` for a sliding one.
    Vllm,
    /// TensorRT-LLM: `⌈min(n, W)/B⌉` blocks.
    Trtllm,
    /// One cell per entry (llama.cpp's cells, the Python packages' tensors).
    Entries,
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
            "{} cannot run a {} plan: {} Instead: {} (source: {})",
            self.engine.name(),
            self.arch.name(),
            self.why,
            self.instead,
            self.sources
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )
    }
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Self {
        Error::Refused(r.to_string())
    }
}

const VLLM: &str = "vllm-project/vllm";
const VLLM_AT: &str = "v0.33.0 (4ba787ec9)";
const TRT: &str = "NVIDIA/TensorRT-LLM";

const VLLM_LLAMA: &[Source] = &[
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/model_executor/models/llama.py: LlamaAttention, per_layer_sliding_window from layer_types",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE = 16",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/v1/kv_cache_interface.py: SlidingWindowSpec.max_admission_blocks_per_request",
    },
];

const VLLM_QWEN2: &[Source] = &[
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/model_executor/models/qwen2.py: Qwen2Model asserts max_window_layers == \
               num_hidden_layers for mixed layer_types; Qwen2Attention passes no window",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/engine/arg_utils.py: CacheConfig.sliding_window only when every layer slides",
    },
];

const VLLM_GEMMA3: &[Source] = &[Source {
    repo: VLLM,
    commit: VLLM_AT,
    file: "vllm/model_executor/models/gemma3.py: Gemma3Attention, rope_parameters[layer_type]",
}];

const TRT_TORCH: &[Source] = &[
    Source {
        repo: TRT,
        commit: "87b279a9719cc257bb89d19ea794296857e2f83f",
        file: "tensorrt_llm/_torch/models/modeling_qwen.py: QwenAttention, no attention_window_size",
    },
    Source {
        repo: TRT,
        commit: "PR #12597, issue #11244",
        file: "sliding window reaches the kernel for Mistral/Mixtral only; Llama prefill stays dense",
    },
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file: "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window, tokens_per_block = 32",
    },
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file: "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: calculateMaxBlockRequirementsPerBeam",
    },
];

const TRT_GEMMA3: &[Source] = &[
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file: "tensorrt_llm/_torch/models/modeling_gemma3.py: Gemma3Attention, attention_window_size \
               = sliding_window on local layers only",
    },
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file: "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window, tokens_per_block = 32",
    },
];

const TRT_ENGINE: &[Source] = &[
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file:
            "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window (\"only the last \
               tokens will be stored\")",
    },
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file: "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: cyclic window blocks",
    },
];

const LLAMACPP: &[Source] = &[Source {
    repo: "ggml-org/llama.cpp",
    commit: "a5410f046c01d01330c8a42f13b64a211fedf2c3",
    file: "src/llama-model.cpp: LLM_ARCH_GEMMA3, set_swa_pattern(6), n_swa from \
           gemma3.attention.sliding_window",
}];

const KVPRESS: &[Source] = &[Source {
    repo: "NVIDIA/kvpress",
    commit: "8bb29b9c3078452a86d692f29123fa6c793e2b05",
    file: "kvpress/presses/per_layer_compression_press.py, scorer_press.py: ScorerPress.compress \
           prunes to int(k_len * (1 - compression_ratio)) entries",
}];

const DUO: &[Source] = &[Source {
    repo: "mit-han-lab/duo-attention",
    commit: "fe93c314ae87306ef6629dc16713250b4718ffe7",
    file: "duo_attn/utils.py: load_attn_pattern, sparsify_attention_heads (np.quantile)",
}];

const HEADKV: &[Source] = &[
    Source {
        repo: "FYYFU/HeadKV",
        commit: "0862a0955fe82e9ff611d59541918e02c5def625",
        file: "headkv/snapkv_utils.py: ReasonSnapKVCluster.head_capacity [layers, heads]; score \
               file chosen by 'llama'/'mistral' in the model name",
    },
    Source {
        repo: "Zefan-Cai/KVCache-Factory",
        commit: "c97f9d706d63d1b56e980f8b81b2a924c21162b3",
        file: "run_longbench.py: model.config.head_capacity; pyramidkv/monkeypatch.py: \
               replace_llama, replace_mistral",
    },
];

fn windows(
    engine: Engine,
    arch: Arch,
    layers: Layers,
    prefill: Prefill,
    sources: &'static [Source],
) -> Capability {
    let (block_size, blocks) = match engine {
        Engine::Vllm => (16, BlockRule::Vllm),
        Engine::Trtllm | Engine::TrtllmEngine => (32, BlockRule::Trtllm),
        _ => (1, BlockRule::Entries),
    };
    Capability {
        engine,
        arch,
        layers: Some(layers),
        prefill,
        sinks: false,
        block_size,
        blocks,
        rope: "a window leaves each layer's RoPE as it is",
        note: "",
        sources,
    }
}

fn package(
    engine: Engine,
    arch: Arch,
    note: &'static str,
    sources: &'static [Source],
) -> Capability {
    Capability {
        engine,
        arch,
        layers: None,
        prefill: Prefill::Dense,
        sinks: false,
        block_size: 1,
        blocks: BlockRule::Entries,
        rope: "positions as the model's",
        note,
        sources,
    }
}

/// What `engine` honours for `arch`, or why it is refused (module header).
pub fn capability(engine: Engine, arch: Arch) -> std::result::Result<Capability, Refusal> {
    use {Arch::*, Engine::*, Layers::*, Prefill::*};
    let refuse = |why, instead, sources| Refusal {
        engine,
        arch,
        why,
        instead,
        sources,
    };
    match (engine, arch) {
        (Vllm, Llama) => Ok(windows(engine, arch, TwoClasses, Windowed, VLLM_LLAMA)),
        (Vllm, Qwen2) => Ok(windows(engine, arch, OneWindow, Windowed, VLLM_QWEN2)),
        (Vllm, Gemma3) => Err(refuse(
            "a layer marked sliding_attention takes the local RoPE base (10 000 instead of \
             1 000 000), so a windowed global layer is another model; the global layers stay \
             full_attention and the local ones already hold the model's window, which leaves \
             nothing of the plan to express.",
            "--to trtllm (max_attention_window windows a layer's cache without touching its \
             RoPE) or --to llamacpp (the local layers' window).",
            VLLM_GEMMA3,
        )),
        (Trtllm, Llama | Qwen2) => Ok(windows(engine, arch, PerLayer, Dense, TRT_TORCH)),
        (Trtllm, Gemma3) => Ok(windows(engine, arch, PerLayer, Dense, TRT_GEMMA3)),
        (TrtllmEngine, _) => Ok(windows(engine, arch, PerLayer, Windowed, TRT_ENGINE)),
        (LlamaCpp, Gemma3) => Ok(windows(engine, arch, NativeWindowOnly, Windowed, LLAMACPP)),
        (LlamaCpp, Llama | Qwen2) => Err(refuse(
            "llama.cpp windows only the layers its architecture code marks sliding (a fixed \
             pattern per architecture); this one has none, so --override-kv changes no window.",
            "--to trtllm (one window per layer) or --to vllm.",
            LLAMACPP,
        )),
        (Kvpress, _) => Ok(package(
            engine,
            arch,
            "PerLayerCompressionPress prunes each layer to int(n·(1 − ratio)) entries of the prompt \
             it sees (flash attention only); ratios are per serving length",
            KVPRESS,
        )),
        (DuoAttention, Llama) => Ok(package(
            engine,
            arch,
            "duo_attn's runner (Llama, Mistral) and kvpress DuoAttentionPress read the pattern",
            DUO,
        )),
        (DuoAttention, Qwen2 | Gemma3) => Ok(package(
            engine,
            arch,
            "duo_attn's own runner patches Llama and Mistral only: load the pattern with kvpress \
             DuoAttentionPress",
            DUO,
        )),
        (HeadKv, Llama) => Ok(package(
            engine,
            arch,
            "HeadKV and KVCache-Factory run Llama and Mistral (monkeypatch, and the score file \
             chosen by the model path)",
            HEADKV,
        )),
        (HeadKv, Qwen2 | Gemma3) => Err(refuse(
            "HeadKV picks its score file by 'llama' or 'mistral' in the model name (ValueError \
             otherwise) and KVCache-Factory patches only LlamaAttention and MistralAttention, so \
             neither runs this architecture.",
            "kvplan generate --method headkv-r runs the plan here; --to kvpress or --to trtllm \
             for a serving engine.",
            HEADKV,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_reviewed_cases() {
        // Qwen2 on vLLM: one window for every layer (the mixed-layer assert), windowed prefill.
        let c = capability(Engine::Vllm, Arch::Qwen2).unwrap();
        assert_eq!(
            (c.layers, c.prefill),
            (Some(Layers::OneWindow), Prefill::Windowed)
        );
        // Gemma 3 on vLLM: refused, the RoPE coupling named and an alternative given.
        let e = capability(Engine::Vllm, Arch::Gemma3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("RoPE") && e.contains("--to trtllm"), "{e}");
        assert!(e.contains("gemma3.py") && e.contains("4ba787ec9"), "{e}");
        // TensorRT-LLM's PyTorch backend: dense prefill; the legacy engine: windowed.
        let t = capability(Engine::Trtllm, Arch::Llama).unwrap();
        let l = capability(Engine::TrtllmEngine, Arch::Llama).unwrap();
        assert_eq!((t.prefill, l.prefill), (Prefill::Dense, Prefill::Windowed));
        assert_eq!((t.block_size, c.block_size), (32, 16));
    }

    #[test]
    fn every_pair_has_an_answer_with_a_source() {
        let engines = [
            Engine::Vllm,
            Engine::Trtllm,
            Engine::TrtllmEngine,
            Engine::LlamaCpp,
            Engine::Kvpress,
            Engine::DuoAttention,
            Engine::HeadKv,
        ];
        for e in engines {
            for a in [Arch::Llama, Arch::Qwen2, Arch::Gemma3] {
                let sources = match capability(e, a) {
                    Ok(c) => c.sources,
                    Err(r) => r.sources,
                };
                assert!(!sources.is_empty(), "{e:?} {a:?}");
                assert!(sources
                    .iter()
                    .all(|s| !s.commit.is_empty() && !s.file.is_empty()));
            }
        }
        assert!(capability(Engine::LlamaCpp, Arch::Qwen2).is_err());
        assert!(capability(Engine::HeadKv, Arch::Gemma3).is_err());
        assert!(Arch::of("mistral").is_err());
    }
}
