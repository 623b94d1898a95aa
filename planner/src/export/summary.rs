//! Readable summary of a plan (`kvplan plan --summary`): for each method, the per-layer and
//! per-KV-head budget table at one context length, and the total KV bytes against FullKV.
//!
//! KV bytes = (key entries + value entries) × head_dim × bytes per element, over layers and KV
//! heads: 2 × entries × head_dim × bytes, except where PoD shares distant keys. FullKV is the real
//! cache of the model's KV heads (docs/design.md: never unfolded to query heads), a windowed layer
//! counted at its window (`budgets::full_kv_bytes`).

use crate::budgets::{full_kv_bytes, Budgets};
use crate::plan::Plan;
use crate::{Method, Result};
use std::fmt::Write;

/// The summary of every planned method at `context_len`, `bytes_per_element` bytes per number.
pub fn summary(plan: &Plan, context_len: usize, bytes_per_element: usize) -> Result<String> {
    let g = &plan.model.geometry;
    let full = full_kv_bytes(g, context_len, bytes_per_element);
    let mut out = String::new();
    let m = &plan.model;
    let _ = writeln!(
        out,
        "plan for {} ({}, GGUF sha256 {}): {} layers, {} query heads, {} KV heads, head_dim {}",
        m.name, m.architecture, m.gguf_sha256, g.layers, g.q_heads, g.kv_heads, g.head_dim
    );
    let _ = writeln!(
        out,
        "written {} by kvplan {}; target {}; context {} tokens; {} bytes per element",
        plan.provenance.date,
        plan.provenance.kvplan_version,
        plan.target,
        context_len,
        bytes_per_element
    );
    let windowed = g.layers - g.global_layers().len();
    let spans = if windowed == 0 {
        format!("{context_len} entries per head")
    } else {
        let entries: usize = (0..g.layers).map(|l| g.span(l, context_len)).sum();
        format!(
            "{entries} entries per KV head over the layers ({context_len} in each global layer, \
             min(window, {context_len}) in the {windowed} windowed ones)"
        )
    };
    let _ = writeln!(
        out,
        "FullKV: {spans} × {} KV heads = {full} bytes",
        g.kv_heads
    );
    for note in &plan.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for method in plan.methods() {
        out.push('\n');
        match plan.budgets_at(method, context_len) {
            Ok(b) => method_table(&mut out, plan, &b, full, bytes_per_element),
            Err(e) => {
                let _ = writeln!(out, "== {method} ==\nno budgets at this context: {e}");
            }
        }
    }
    Ok(out)
}

fn method_table(out: &mut String, plan: &Plan, b: &Budgets, full: u64, bytes: usize) {
    let g = &plan.model.geometry;
    let _ = writeln!(
        out,
        "== {} ==  {}; per head {} (window {}, sinks {}, recent {}){}",
        b.method,
        parameters(plan, b.method),
        b.per_head,
        b.window,
        b.sinks,
        b.recent,
        if b.compress {
            ""
        } else {
            "; prompt fits: nothing evicted"
        }
    );
    let grid = if b.keys_per_layer_per_kv_head != b.per_layer_per_kv_head {
        let _ = writeln!(
            out,
            "key entries (values keep all {} tokens):",
            b.context_len
        );
        &b.keys_per_layer_per_kv_head
    } else {
        &b.per_layer_per_kv_head
    };
    let mut header = String::from("layer");
    for h in 0..g.kv_heads {
        let _ = write!(header, " {:>8}", format!("kv{h}"));
    }
    let _ = writeln!(out, "{header} {:>9}", "total");
    for (l, row) in grid.iter().enumerate() {
        let mut line = format!("{l:>5}");
        for x in row {
            let _ = write!(line, " {x:>8}");
        }
        let window = g
            .window(l)
            .map_or_else(String::new, |w| format!("  (window {w})"));
        let _ = writeln!(out, "{line} {:>9}{window}", row.iter().sum::<usize>());
    }
    let mut line = String::from("total");
    for h in 0..g.kv_heads {
        let _ = write!(line, " {:>8}", grid.iter().map(|r| r[h]).sum::<usize>());
    }
    let _ = writeln!(out, "{line} {:>9}", grid.iter().flatten().sum::<usize>());
    let kv = b.kv_bytes(g.head_dim, bytes);
    let _ = writeln!(
        out,
        "KV bytes {} vs FullKV {} ({:.2}%)",
        kv,
        full,
        100.0 * kv as f64 / full.max(1) as f64
    );
}

fn parameters(plan: &Plan, m: Method) -> String {
    plan.sections
        .section(m)
        .map(|s| s.parameters())
        .unwrap_or_default()
}
