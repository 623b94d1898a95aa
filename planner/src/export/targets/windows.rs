//! What the window formats (`vllm`, `trtllm`, `llamacpp`) share: the layer-class reduction their
//! capability entry names ([`super::super::classes`]), its summary in the engine's blocks
//! ([`super::super::blocks`]) for `kvplan-export.json`, and the notes on bytes and prefill.

use crate::export::blocks;
use crate::export::capability::{Capability, Prefill};
use crate::export::classes::{self, LayerClass, Reduction};
use crate::export::manifest::{ReductionSummary, SlotBytes};
use crate::export::target::Context;
use crate::{Error, Result};

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
    let serving = blocks::Serving::default();
    let slots = blocks::total_slots(cap.blocks, &r.layers, cx.n, block, &serving);
    let per_slot = blocks::slot_bytes(&cx.plan.model.geometry, 2);
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
        block_slots: slots.steady,
        block_bytes_error: ratio_error(slots.steady as f64, r.plan_entries),
        admission_slots: slots.admission,
        peak_slots: slots.peak,
        bytes: SlotBytes {
            admission: slots.admission as u64 * per_slot,
            peak: slots.peak as u64 * per_slot,
            steady: slots.steady as u64 * per_slot,
        },
        serving,
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

/// The note every window export carries: classes, entries and blocks against the plan, and
/// what the engine admits and holds at peak.
pub fn bytes_note(s: &ReductionSummary, n: usize) -> String {
    let vs_plan = |slots: usize| 100.0 * ratio_error(slots as f64, s.plan_entries);
    format!(
        "{:+.2}% of the plan's entries at {n} tokens; {:+.2}% in {}-token blocks in steady \
         decode, {:+.2}% at admission, {:+.2}% at peak ({} / {} / {} bytes a sequence at 2 bytes \
         a number)",
        100.0 * s.bytes_error,
        100.0 * s.block_bytes_error,
        s.block_size,
        vs_plan(s.admission_slots),
        vs_plan(s.peak_slots),
        s.bytes.steady,
        s.bytes.admission,
        s.bytes.peak,
    )
}

/// The note on prefill the capability implies.
pub fn prefill_note(cap: &Capability) -> String {
    match cap.prefill {
        Prefill::Windowed => format!(
            "{}: a windowed layer attends over its window in prefill as well; no sinks",
            cap.engine.name()
        ),
        Prefill::Unwindowed => format!(
            "{}: the attention kernel gets no window for this architecture: prefill and decode \
             attend over every position; a window only hands a layer's front blocks back to the \
             pool in decode, and the kernel still reads them — FullKV's answer while no other \
             request takes them, that request's keys and values once one does (`kvplan eval \
             --methods {}:<method>` measures that case)",
            cap.engine.name(),
            cap.engine.name()
        ),
    }
}
