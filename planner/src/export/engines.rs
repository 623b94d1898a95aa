//! `kvplan export`: a plan in the files serving engines and the KV-compression packages read, at
//! one context length, as the capability table says each honours it for the plan's architecture
//! ([`super::capability`]). One writer per target ([`super::targets`]):
//!
//! | format | files | read by |
//! |---|---|---|
//! | `vllm` | `config_override.json` + `hf_overrides.txt`: `layer_types`, `sliding_window`, `use_sliding_window` | vLLM `--hf-overrides`, or merged into the HF `config.json` |
//! | `trtllm` | `kv_cache_config.json` + `extra_llm_api_options.yaml`: `max_attention_window` (L entries), `sink_token_length`, `tokens_per_block` | TensorRT-LLM `KvCacheConfig`, `trtllm-serve` |
//! | `llamacpp` | `override_kv.txt`: `--override-kv <arch>.attention.sliding_window=int:W` | llama.cpp (Gemma 3) |
//! | `kvpress` | `compression_ratios[_<m>].json`: one ratio per layer, per serving length | kvpress `PerLayerCompressionPress` |
//! | `lukv` | `lukv_curve.npy`: float32 `[99, L, KV heads]` prune ratios | kvpress `LUKVPress` |
//! | `duo` | `config.json` (`sink_size`, `recent_size`, `sparsity`, `head_compression_ratio`) + `full_attention_heads.tsv` | DuoAttention `load_attn_pattern`, kvpress `DuoAttentionPress` |
//! | `headkv` | `headkv_scores.json` + `head_capacity.json` (`[layers, query heads]`) | HeadKV, KVCache-Factory |
//!
//! Every export also writes `kvplan-export.json` beside its files: the format, architecture, the
//! capability entry it followed (with its sources), the method and context length the budgets
//! are for, the target, and for the window formats what the reduction keeps of the plan's
//! entries and of its bytes in the engine's blocks ([`super::blocks`]).
//!
//! Budgets come from one method of the plan (`method`; default the first of `headkv-r`,
//! `pyramid`, `headkv`, `snapkv` the plan holds); `duo` and `headkv` use the score set's method.
//! PoD is refused: it keeps every token and shares distant keys, which no format expresses.
//! With `memory` ([`super::deploy`]) the target is the largest budget whose cache fits.

use super::capability::{Arch, Capability};
use super::deploy::{self, Memory};
use super::targets::{self, Context};
use crate::{Error, HeadKvSection, Method, Plan, Result, Target};
use serde::Serialize;

/// An export format (module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Vllm,
    Trtllm,
    Llamacpp,
    Kvpress,
    Lukv,
    Duo,
    Headkv,
}

impl Format {
    /// Every format, in the order the help lists them.
    pub const ALL: [Format; 7] = [
        Format::Vllm,
        Format::Trtllm,
        Format::Llamacpp,
        Format::Kvpress,
        Format::Lukv,
        Format::Duo,
        Format::Headkv,
    ];

    /// The format's name on the command line and in `kvplan-export.json`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Vllm => "vllm",
            Format::Trtllm => "trtllm",
            Format::Llamacpp => "llamacpp",
            Format::Kvpress => "kvpress",
            Format::Lukv => "lukv",
            Format::Duo => "duo",
            Format::Headkv => "headkv",
        }
    }

    /// What reads the format's files.
    pub fn reader(self) -> &'static str {
        match self {
            Format::Vllm => {
                "vLLM: --hf-overrides \"$(cat hf_overrides.txt)\", or config_override.json merged \
                 into the model's config.json (per-layer sliding windows)"
            }
            Format::Trtllm => {
                "TensorRT-LLM: KvCacheConfig(max_attention_window=..., sink_token_length=..., \
                 tokens_per_block=...); trtllm-serve --extra_llm_api_options"
            }
            Format::Llamacpp => "llama.cpp: --override-kv <arch>.attention.sliding_window=int:W",
            Format::Kvpress => "kvpress: PerLayerCompressionPress(press, compression_ratios)",
            Format::Lukv => "kvpress: LUKVPress budget curves (np.load of lukv_curve.npy)",
            Format::Duo => {
                "DuoAttention / kvpress DuoAttentionPress: config.json + full_attention_heads.tsv"
            }
            Format::Headkv => {
                "HeadKV and KVCache-Factory: head score file and head_capacity [layers, query heads]"
            }
        }
    }

    /// Whether the format's content depends on a method's budgets (`duo` and `headkv` use the
    /// score set's method).
    pub fn uses_budgets(self) -> bool {
        !matches!(self, Format::Headkv | Format::Duo)
    }
}

impl std::str::FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                Error::invalid("--to", format!("one of {}", names.join(", ")), s)
            })
    }
}

/// Which HeadKV score set the `headkv` and `duo` exports carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScoreSet {
    /// Retrieval heads (HeadKV-R, eq. 1): the plan's `headkv-r` section.
    #[default]
    Retrieval,
    /// Retrieval-reasoning heads (HeadKV-R2, eq. 2): the plan's `headkv` section.
    Reasoning,
}

impl ScoreSet {
    /// The names the command line uses.
    pub const NAMES: [&'static str; 2] = ["retrieval", "reasoning"];

    /// This set's name.
    pub fn name(self) -> &'static str {
        match self {
            ScoreSet::Retrieval => Self::NAMES[0],
            ScoreSet::Reasoning => Self::NAMES[1],
        }
    }

    pub(crate) fn method(self) -> Method {
        match self {
            ScoreSet::Retrieval => Method::HeadKvR,
            ScoreSet::Reasoning => Method::HeadKv,
        }
    }
}

impl std::str::FromStr for ScoreSet {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "retrieval" => Ok(ScoreSet::Retrieval),
            "reasoning" => Ok(ScoreSet::Reasoning),
            _ => Err(Error::invalid(
                "--scores",
                format!("one of {}", ScoreSet::NAMES.join(", ")),
                s,
            )),
        }
    }
}

/// What to export.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub format: Format,
    /// The method whose budgets are exported; `None`: the default (module header).
    pub method: Option<Method>,
    /// Context length the budgets are for.
    pub context_len: usize,
    /// Budget target; `None`: the plan's.
    pub target: Option<Target>,
    /// Score set of the `headkv` and `duo` exports.
    pub scores: ScoreSet,
    /// Tokens per cache block; `None`: the engine's default (16 vLLM, 32 TensorRT-LLM).
    pub block_size: Option<usize>,
    /// A deployment to fit: the target becomes the largest budget whose cache fits.
    pub memory: Option<Memory>,
}

/// One file of an export: its name inside the output folder and its bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// What `kvplan-export.json` says about an export.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Manifest {
    pub format: &'static str,
    pub read_by: &'static str,
    pub model: String,
    pub architecture: String,
    /// The capability entry followed: what the target honours and the source it was read from.
    pub honours: Honours,
    pub model_gguf_sha256: String,
    /// The method whose budgets (or scores) the files hold.
    pub method: String,
    pub context_len: usize,
    /// Entries per KV head on average, or the ratio of the context kept.
    pub target: Target,
    /// Score set (`headkv`, `duo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<&'static str>,
    /// Layer classes and the bytes they keep (`vllm`, `trtllm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reduction: Option<ReductionSummary>,
    /// What a reader should know (rounding, what the engine does differently).
    pub notes: Vec<String>,
}

/// The capability entry in `kvplan-export.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Honours {
    pub engine: &'static str,
    /// `two-classes`, `one-window`, `per-layer`, `native-window-only`, or `budgets` (the file
    /// carries budgets or scores, not windows).
    pub layers: &'static str,
    /// `windowed` or `dense` (window formats).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<&'static str>,
    pub sources: Vec<String>,
}

impl Honours {
    fn of(cap: &Capability) -> Self {
        use super::capability::{Layers, Prefill};
        Honours {
            engine: cap.engine.name(),
            layers: match cap.layers {
                Some(Layers::TwoClasses) => "two-classes",
                Some(Layers::OneWindow) => "one-window",
                Some(Layers::PerLayer) => "per-layer",
                Some(Layers::NativeWindowOnly) => "native-window-only",
                None => "budgets",
            },
            prefill: cap.layers.map(|_| match cap.prefill {
                Prefill::Windowed => "windowed",
                Prefill::Dense => "dense",
            }),
            sources: cap.sources.iter().map(ToString::to_string).collect(),
        }
    }
}

/// A layer-class reduction in `kvplan-export.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReductionSummary {
    /// `full` or the window of each layer.
    pub layers: Vec<String>,
    /// Entries per KV head over the layers: the plan's budgets.
    pub plan_entries: f64,
    /// The same under the layer classes.
    pub reduced_entries: usize,
    /// `reduced / plan − 1`.
    pub bytes_error: f64,
    /// Tokens per block of the engine.
    pub block_size: usize,
    /// Token slots the engine reserves over the layers, per KV head ([`super::blocks`]).
    pub block_slots: usize,
    /// `block_slots / plan − 1`: the bytes the engine allocates against the plan's.
    pub block_bytes_error: f64,
}

/// An export: its files and its manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub files: Vec<ExportFile>,
    pub manifest: Manifest,
}

/// The method whose budgets an export uses when none is named.
pub fn default_method(plan: &Plan) -> Result<Method> {
    let methods = plan.methods();
    [
        Method::HeadKvR,
        Method::Pyramid,
        Method::HeadKv,
        Method::SnapKv,
    ]
    .into_iter()
    .find(|m| methods.contains(m))
    .ok_or_else(|| {
        Error::invalid(
            "sections",
            "a headkv-r, pyramid, headkv or snapkv section to export budgets from",
            "none of them",
        )
    })
}

/// The HeadKV scores `[layer][q_head]` of `set`, refused when all zero.
pub(crate) fn scores(plan: &Plan, set: ScoreSet) -> Result<&HeadKvSection> {
    let method = set.method();
    let section = plan.sections.get::<HeadKvSection>(method).ok_or_else(|| {
        Error::invalid(
            format!("sections.{method}"),
            format!("the {} scores (a {method} section)", set.name()),
            "no such section",
        )
    })?;
    if section.scores.iter().flatten().all(|&s| s == 0.0) {
        return Err(Error::invalid(
            format!("sections.{method}.scores"),
            "at least one non-zero head score",
            format!(
                "all zero ({} of {} profiling trials answered)",
                section.trials_kept, section.trials_total
            ),
        ));
    }
    Ok(section)
}

/// The method whose budgets (or scores) `req` exports, refused where no budget travels.
fn method_of(plan: &Plan, req: &Request) -> Result<Method> {
    let method = match (req.format, req.method) {
        (Format::Headkv | Format::Duo, _) => return Ok(req.scores.method()),
        (_, Some(m)) => m,
        (_, None) => default_method(plan)?,
    };
    if method == Method::Pod || method == Method::Full {
        return Err(Error::invalid(
            "--method",
            "a method that keeps fewer entries per head (not pod or full)",
            method,
        ));
    }
    if !plan.methods().contains(&method) {
        return Err(Error::invalid(
            format!("sections.{method}"),
            "a section for the exported method",
            "none",
        ));
    }
    Ok(method)
}

/// The export `req` asks of `plan` (module header).
pub fn export(plan: &Plan, req: &Request) -> Result<Export> {
    let n = req.context_len;
    if n == 0 {
        return Err(Error::invalid("--context-len", "at least 1 token", 0));
    }
    let arch = Arch::of(&plan.model.architecture)?;
    let writer = targets::writer(req.format);
    let cap = targets::capability_of(writer, arch)?;
    let method = method_of(plan, req)?;
    let mut cx = Context {
        plan,
        arch,
        method,
        n,
        target: req.target.unwrap_or(plan.target),
        scores: req.scores,
        block_size: req.block_size,
    };
    let mut notes = Vec::new();
    if let Some(memory) = &req.memory {
        let (target, note) = deploy::fit(&cx, &cap, writer, memory)?;
        cx.target = target;
        notes.push(note);
    }
    cx.target.validate("target")?;
    let written = writer.write(&cx, &cap)?;
    notes.extend(written.notes);
    Ok(Export {
        files: written.files,
        manifest: Manifest {
            format: req.format.name(),
            read_by: req.format.reader(),
            model: plan.model.name.clone(),
            architecture: plan.model.architecture.clone(),
            honours: Honours::of(&cap),
            model_gguf_sha256: plan.model.gguf_sha256.clone(),
            method: method.to_string(),
            context_len: n,
            target: cx.target,
            scores: written.scores,
            reduction: written.reduction,
            notes,
        },
    })
}

/// The manifest's bytes (`kvplan-export.json`).
pub fn manifest_json(m: &Manifest) -> Result<Vec<u8>> {
    targets::json(m)
}
