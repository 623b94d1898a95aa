//! `kvplan export`: a plan in the files serving engines and kvpress read, at one context length.
//!
//! | format | files | read by |
//! |---|---|---|
//! | `vllm` | `config_override.json`: `layer_types`, `sliding_window`, `use_sliding_window` | merged into the HF `config.json`: vLLM's model code, transformers |
//! | `trtllm` | `kv_cache_config.json`: `max_attention_window` (L entries), `sink_token_length` | TensorRT-LLM `KvCacheConfig` |
//! | `kvpress` | `compression_ratios.json`: one compression ratio per layer | kvpress `PerLayerCompressionPress(press, compression_ratios)` |
//! | `lukv` | `lukv_curve.npy`: float32 `[99, L, KV heads]`, entry `[r−1, l, h]` the prune ratio at r% | kvpress `LUKVPress` (its `_budget_curves`) |
//! | `duo` | `config.json` (`sink_size`, `recent_size`) + `full_attention_heads.tsv` | DuoAttention's `load_attn_pattern`, kvpress `DuoAttentionPress` |
//! | `headkv` | `headkv_scores.json`: one line `{"layer-head": [score]}` | HeadKV, KVCache-Factory |
//!
//! Every export also writes `kvplan-export.json` beside its files: the format, the method and
//! context length the budgets are for (budgets depend on the length), the target, and for the
//! layer-class formats what the reduction kept of the plan's bytes ([`super::classes`]).
//!
//! Budgets come from one method of the plan (`method`; default the first of `headkv-r`,
//! `pyramid`, `headkv`, `snapkv` the plan holds), averaged over each layer's KV heads where the
//! format has one value per layer. PoD is refused: it keeps every token and shares distant keys,
//! which no format expresses. Compression ratio = 1 − kept / context length, per layer (kvpress)
//! or per (layer, KV head) (LU-KV). The LU-KV curve's row r is the plan's budgets at the target
//! "keep 1 − r/100 of the context"; its mean over layers and heads is r/100 up to the flooring
//! of the per-head budget (within 1/n) and the model's own windowed layers, which hold their
//! window whatever the target.

use super::classes::{self, LayerBudgets, LayerClass, Reduction};
use super::{headkv_scores, npy, tsv};
use crate::methods::streaming::DEFAULT_SINKS;
use crate::{Error, HeadKvSection, Method, Plan, Result, StreamingSection, Target};
use serde::Serialize;

/// An export format (module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Vllm,
    Trtllm,
    Kvpress,
    Lukv,
    Duo,
    Headkv,
}

impl Format {
    /// Every format, in the order the help lists them.
    pub const ALL: [Format; 6] = [
        Format::Vllm,
        Format::Trtllm,
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
                "vLLM and transformers: merge config_override.json into the model's config.json \
                 (per-layer sliding windows)"
            }
            Format::Trtllm => {
                "TensorRT-LLM: KvCacheConfig(max_attention_window=..., sink_token_length=...)"
            }
            Format::Kvpress => "kvpress: PerLayerCompressionPress(press, compression_ratios)",
            Format::Lukv => "kvpress: LUKVPress budget curves (np.load of lukv_curve.npy)",
            Format::Duo => {
                "DuoAttention / kvpress DuoAttentionPress: config.json + full_attention_heads.tsv"
            }
            Format::Headkv => "HeadKV and KVCache-Factory head-score loaders",
        }
    }

    /// Whether the format's content depends on a method's budgets.
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

    fn method(self) -> Method {
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
}

impl ReductionSummary {
    fn of(r: &Reduction) -> Self {
        ReductionSummary {
            layers: r
                .layers
                .iter()
                .map(|c| match c {
                    LayerClass::Full => "full".to_string(),
                    LayerClass::Window(w) => w.to_string(),
                })
                .collect(),
            plan_entries: r.plan_entries,
            reduced_entries: r.reduced_entries,
            bytes_error: r.bytes_error(),
        }
    }
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

/// The layout of every JSON file kvplan writes ([`kvplan_common::fs::pretty_json`]).
fn json(value: &impl Serialize) -> Result<Vec<u8>> {
    kvplan_common::fs::pretty_json(value)
        .map(String::into_bytes)
        .map_err(|e| Error::Parse {
            what: "export",
            path: String::from("."),
            message: e.to_string(),
        })
}

fn file(name: &str, bytes: Vec<u8>) -> ExportFile {
    ExportFile {
        name: name.to_string(),
        bytes,
    }
}

/// The HeadKV scores `[layer][q_head]` of `set`, refused when all zero.
fn scores(plan: &Plan, set: ScoreSet) -> Result<&HeadKvSection> {
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

/// The export `req` asks of `plan` (module header).
pub fn export(plan: &Plan, req: &Request) -> Result<Export> {
    let n = req.context_len;
    if n == 0 {
        return Err(Error::invalid("--context-len", "at least 1 token", 0));
    }
    let target = req.target.unwrap_or(plan.target);
    target.validate("target")?;
    let g = &plan.model.geometry;
    let method = match req.format {
        Format::Headkv | Format::Duo => req.scores.method(),
        _ => match req.method {
            Some(m) => m,
            None => default_method(plan)?,
        },
    };
    if req.format.uses_budgets() {
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
    }
    let mut notes = Vec::new();
    let mut reduction = None;
    let mut score_set = None;
    let files = match req.format {
        Format::Vllm => {
            let r = classes::two_classes(&LayerBudgets::of(plan, method, n, target)?)?;
            let window = r.window();
            let layer_types: Vec<&str> = r
                .layers
                .iter()
                .map(|c| match c {
                    LayerClass::Full => "full_attention",
                    LayerClass::Window(_) => "sliding_attention",
                })
                .collect();
            notes.push(format!(
                "{} of {} layers full, the others a sliding window of {}; {:+.2}% of the \
                 plan's bytes at {n} tokens",
                r.layers.iter().filter(|c| **c == LayerClass::Full).count(),
                r.layers.len(),
                window.map_or("–".to_string(), |w| w.to_string()),
                100.0 * r.bytes_error()
            ));
            notes.push(
                "sliding layers attend over their window in prefill as well, and keep no sinks"
                    .to_string(),
            );
            let body = serde_json::json!({
                "layer_types": layer_types,
                "sliding_window": window,
                "use_sliding_window": window.is_some(),
            });
            reduction = Some(ReductionSummary::of(&r));
            vec![file("config_override.json", json(&body)?)]
        }
        Format::Trtllm => {
            let r = classes::per_layer(&LayerBudgets::of(plan, method, n, target)?)?;
            let windows: Vec<usize> = r.layers.iter().map(|c| c.held(n)).collect();
            let mut distinct = windows.clone();
            distinct.sort_unstable();
            distinct.dedup();
            notes.push(format!(
                "{} distinct windows (TensorRT-LLM keeps one pool per window); {:+.2}% of the \
                 plan's bytes at {n} tokens",
                distinct.len(),
                100.0 * r.bytes_error()
            ));
            let body = serde_json::json!({
                "max_attention_window": windows,
                "sink_token_length": 0,
            });
            reduction = Some(ReductionSummary::of(&r));
            vec![file("kv_cache_config.json", json(&body)?)]
        }
        Format::Kvpress => {
            let b = LayerBudgets::of(plan, method, n, target)?;
            let ratios: Vec<f64> = b.budgets.iter().map(|&x| 1.0 - x / n as f64).collect();
            notes.push(
                "kvpress applies the ratios by masking: the cache keeps every entry".to_string(),
            );
            let body = serde_json::json!({ "compression_ratios": ratios });
            vec![file("compression_ratios.json", json(&body)?)]
        }
        Format::Lukv => {
            let mut curve = Vec::with_capacity(99 * g.layers * g.kv_heads);
            for r in 1..=99usize {
                let keep = Target::Ratio(1.0 - r as f64 / 100.0);
                let b = plan.budgets(method, n, keep)?;
                for row in &b.per_layer_per_kv_head {
                    curve.extend(row.iter().map(|&k| (1.0 - k as f64 / n as f64) as f32));
                }
            }
            notes.push(format!(
                "row r−1 holds the prune ratios at r% compression, from the plan's budgets at \
                 {n} tokens; the target is the row's, not --budget"
            ));
            vec![file(
                "lukv_curve.npy",
                npy::write_f32(&[99, g.layers, g.kv_heads], &curve)?,
            )]
        }
        Format::Duo => {
            let section = scores(plan, req.scores)?;
            score_set = Some(req.scores.name());
            let gates = tsv::kv_head_gates(&section.scores, g, section.temperature);
            let sinks = plan
                .sections
                .get::<StreamingSection>(Method::Streaming)
                .map_or(DEFAULT_SINKS, |s| s.sinks);
            let per_head = target.per_head(n);
            let recent = per_head.saturating_sub(sinks).max(1);
            notes.push(format!(
                "gates: KV-head importance from the {} scores, the largest 1; a streaming head \
                 keeps {sinks} sinks + {recent} recent tokens (the target's {per_head} per head)",
                req.scores.name()
            ));
            let config = serde_json::json!({ "sink_size": sinks, "recent_size": recent });
            vec![
                file("config.json", json(&config)?),
                file("full_attention_heads.tsv", tsv::to_tsv(&gates).into_bytes()),
            ]
        }
        Format::Headkv => {
            let section = scores(plan, req.scores)?;
            score_set = Some(req.scores.name());
            vec![file(
                "headkv_scores.json",
                headkv_scores::to_headkv_json(&section.scores).into_bytes(),
            )]
        }
    };
    Ok(Export {
        files,
        manifest: Manifest {
            format: req.format.name(),
            read_by: req.format.reader(),
            model: plan.model.name.clone(),
            model_gguf_sha256: plan.model.gguf_sha256.clone(),
            method: method.to_string(),
            context_len: n,
            target,
            scores: score_set,
            reduction,
            notes,
        },
    })
}

/// The manifest's bytes (`kvplan-export.json`).
pub fn manifest_json(m: &Manifest) -> Result<Vec<u8>> {
    json(m)
}
