//! One file per export target behind one small trait ([`Writer`]): a target turns a plan's
//! budgets (or scores) at one context length into the files its reader takes, as the capability
//! table ([`super::capability`]) says that reader honours them for the plan's architecture.

mod duo;
mod headkv;
mod kvpress;
mod llamacpp;
mod lukv;
mod trtllm;
mod vllm;

use super::blocks;
use super::capability::{self, Arch, Capability, Engine};
use super::classes::{self, LayerBudgets, LayerClass, Reduction};
use super::engines::{ExportFile, Format, ReductionSummary, ScoreSet};
use crate::{Error, Method, Plan, Result, Target};
use serde::Serialize;

/// What a target is given: the plan, the method whose budgets travel, the length and target.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub plan: &'a Plan,
    pub arch: Arch,
    pub method: Method,
    pub n: usize,
    pub target: Target,
    pub scores: ScoreSet,
    /// Tokens per cache block; `None`: the engine's default.
    pub block_size: Option<usize>,
}

impl Context<'_> {
    /// The method's layer budgets at this length and target.
    pub fn layer_budgets(&self) -> Result<LayerBudgets> {
        LayerBudgets::of(self.plan, self.method, self.n, self.target)
    }
}

/// What a target wrote: its files, the notes for `kvplan-export.json`, and the layer-class
/// reduction when it writes windows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written {
    pub files: Vec<ExportFile>,
    pub notes: Vec<String>,
    pub reduction: Option<ReductionSummary>,
    pub scores: Option<&'static str>,
}

/// A target's writer (module header).
pub trait Writer: Sync {
    /// The engine entry of the capability table the files are for.
    fn engine(&self) -> Engine;
    /// The files of `cx` under the capability `cap`.
    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written>;
}

/// The writer of `format`.
pub fn writer(format: Format) -> &'static dyn Writer {
    match format {
        Format::Vllm => &vllm::Vllm,
        Format::Trtllm => &trtllm::Trtllm,
        Format::Llamacpp => &llamacpp::LlamaCpp,
        Format::Kvpress => &kvpress::Kvpress,
        Format::Lukv => &lukv::Lukv,
        Format::Duo => &duo::Duo,
        Format::Headkv => &headkv::HeadKv,
    }
}

/// The capability of `writer` for `arch`, a refusal turned into the error that names it.
pub fn capability_of(writer: &dyn Writer, arch: Arch) -> Result<Capability> {
    capability::capability(writer.engine(), arch).map_err(Error::from)
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

/// The reduction the capability's layer rule gives, and its summary in blocks.
pub fn reduce(cx: &Context<'_>, cap: &Capability) -> Result<(Reduction, ReductionSummary)> {
    let layers = cap.layers.ok_or_else(|| {
        Error::invalid(
            "capability",
            "a target that writes windows",
            cap.engine.name(),
        )
    })?;
    let r = classes::reduce(layers, &cx.layer_budgets()?)?;
    let summary = summarise(&r, cx, cap);
    Ok((r, summary))
}

/// A reduction in `kvplan-export.json`: classes, entries, and the engine's blocks.
pub fn summarise(r: &Reduction, cx: &Context<'_>, cap: &Capability) -> ReductionSummary {
    let block = cx.block_size.unwrap_or(cap.block_size);
    let slots = blocks::total_slots(cap.blocks, &r.layers, cx.n, block);
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
        block_size: block,
        block_slots: slots,
        block_bytes_error: ratio_error(slots as f64, r.plan_entries),
    }
}

/// `x / plan − 1` (0 for an empty plan).
fn ratio_error(x: f64, plan: f64) -> f64 {
    if plan > 0.0 {
        x / plan - 1.0
    } else {
        0.0
    }
}

/// The note every window export carries: classes, entries and blocks against the plan.
pub fn bytes_note(s: &ReductionSummary, n: usize) -> String {
    format!(
        "{:+.2}% of the plan's entries at {n} tokens; {:+.2}% in {}-token blocks",
        100.0 * s.bytes_error,
        100.0 * s.block_bytes_error,
        s.block_size
    )
}

/// The note on prefill the capability implies.
pub fn prefill_note(cap: &Capability) -> String {
    match cap.prefill {
        capability::Prefill::Windowed => format!(
            "{}: a windowed layer attends over its window in prefill as well; no sinks",
            cap.engine.name()
        ),
        capability::Prefill::Dense => format!(
            "{}: prefill attends over the whole prompt; only the stored cache keeps each layer's \
             window (no sinks)",
            cap.engine.name()
        ),
    }
}
