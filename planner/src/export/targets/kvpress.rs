//! `kvpress`: `PerLayerCompressionPress(press, compression_ratios)` ratios, one file per serving
//! length. kvpress prunes each layer to `int(m · (1 − ratio))` entries of the `m`-token prompt
//! it sees (`ScorerPress.compress`), so a ratio is only right at the length it was made for:
//! `compression_ratios.json` is for `--context-len`, `compression_ratios_<m>.json` for each
//! shorter power of two from 512. Ratio = `1 − kept/m` per layer from the plan's budgets at `m`
//! (averaged over the layer's KV heads); 0 on a layer the model windows (Gemma 3's local layers
//! already hold only their window, and the plan gives them all of it).

use crate::export::capability::{Arch, Capability, Engine, Refusal, Source};
use crate::export::classes::LayerBudgets;
use crate::export::manifest::{file, json};
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::Result;

const KVPRESS: &[Source] = &[Source {
    repo: "NVIDIA/kvpress",
    commit: "8bb29b9c3078452a86d692f29123fa6c793e2b05",
    file: "kvpress/presses/per_layer_compression_press.py, scorer_press.py: ScorerPress.compress \
           prunes to int(k_len * (1 - compression_ratio)) entries",
}];

/// The `kvpress` target.
pub struct Kvpress;

/// The lengths files are written for: powers of two from 512 below `n`, then `n`.
pub fn serving_lengths(n: usize) -> Vec<usize> {
    let mut out: Vec<usize> = (9..usize::BITS)
        .map(|p| 1usize << p)
        .take_while(|&m| m < n)
        .collect();
    out.push(n);
    out
}

/// Per-layer ratios at length `m` (module header).
pub fn ratios(cx: &Context<'_>, m: usize) -> Result<Vec<f64>> {
    let b = LayerBudgets::of(cx.plan, cx.method, m, cx.target)?;
    Ok(b.budgets
        .iter()
        .zip(&b.model_windows)
        .map(|(&x, own)| match own {
            Some(_) => 0.0,
            None => 1.0 - x / m as f64,
        })
        .collect())
}

impl ExportTarget for Kvpress {
    fn about(&self) -> About {
        About {
            name: "kvpress",
            files: &["compression_ratios.json", "compression_ratios_<m>.json"],
            holds: "PerLayerCompressionPress ratios, one file per serving length",
            reader: "kvpress: PerLayerCompressionPress(press, compression_ratios)",
        }
    }

    /// kvpress's presses run every architecture transformers runs: one entry for all (it also
    /// serves `lukv` and `DuoAttentionPress`).
    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        Ok(Capability::package(
            Engine::Kvpress,
            arch,
            "PerLayerCompressionPress prunes each layer to int(n·(1 − ratio)) entries of the prompt \
             it sees (flash attention only); ratios are per serving length",
            KVPRESS,
        ))
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let mut files = Vec::new();
        for m in serving_lengths(cx.n) {
            let body = serde_json::json!({ "compression_ratios": ratios(cx, m)? });
            let name = if m == cx.n {
                "compression_ratios.json".to_string()
            } else {
                format!("compression_ratios_{m}.json")
            };
            files.push(file(&name, json(&body)?));
        }
        let notes = vec![
            format!(
                "{}; use the file of the prompt length you serve (compression_ratios.json: {} \
                 tokens)",
                cap.note, cx.n
            ),
            "a layer the model windows gets ratio 0 (it already holds only its window)".to_string(),
        ];
        Ok(Written {
            files,
            notes,
            reduction: None,
            scores: None,
        })
    }
}
