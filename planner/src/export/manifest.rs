//! What an export is: its files and `kvplan-export.json`, the manifest beside them — the
//! format, architecture, the capability entry it followed (with its sources), the method and
//! context length the budgets are for, the target, and for the window formats what the
//! reduction keeps of the plan's entries and of its bytes in the engine's blocks
//! ([`super::blocks`]).

use super::capability::Capability;
use crate::{Error, Result, Target};
use serde::Serialize;

/// One file of an export: its name inside the output folder and its bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportFile {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// An export: its files and its manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub files: Vec<ExportFile>,
    pub manifest: Manifest,
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
    /// The entry `cap` as the manifest records it.
    pub fn of(cap: &Capability) -> Self {
        use super::capability::Prefill;
        Honours {
            engine: cap.engine.name(),
            layers: cap.layers.map_or("budgets", |l| l.name()),
            prefill: cap.layers.map(|_| match cap.prefill {
                Prefill::Windowed => "windowed",
                Prefill::Unwindowed => "unwindowed",
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
    /// Token slots the engine holds over the layers in steady decode at `context_len`, per KV
    /// head and sequence ([`super::blocks`]).
    pub block_slots: usize,
    /// `block_slots / plan − 1`: the bytes the engine holds against the plan's.
    pub block_bytes_error: f64,
    /// The same when the engine admits the request (what its admission check needs free).
    pub admission_slots: usize,
    /// The most the request holds while it runs, prefill included.
    pub peak_slots: usize,
    /// Bytes per sequence (2 bytes a number) at admission, at peak and in steady decode.
    pub bytes: SlotBytes,
    /// The serving settings these figures assume (the export's notes say how to set them).
    pub serving: super::blocks::Serving,
}

/// A reduction's slots in bytes per sequence, 2 bytes a number (fp16/bf16).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlotBytes {
    pub admission: u64,
    pub peak: u64,
    pub steady: u64,
}

/// The manifest's bytes (`kvplan-export.json`).
pub fn manifest_json(m: &Manifest) -> Result<Vec<u8>> {
    json(m)
}

/// The layout of every JSON file kvplan writes ([`kvplan_common::fs::pretty_json`]).
pub fn json(value: &impl Serialize) -> Result<Vec<u8>> {
    kvplan_common::fs::pretty_json(value)
        .map(String::into_bytes)
        .map_err(|e| Error::Parse {
            what: "export",
            path: String::from("."),
            message: e.to_string(),
        })
}

/// An export file called `name`.
pub fn file(name: &str, bytes: Vec<u8>) -> ExportFile {
    ExportFile {
        name: name.to_string(),
        bytes,
    }
}
