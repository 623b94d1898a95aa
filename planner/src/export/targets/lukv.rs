//! `lukv`: kvpress `LUKVPress` budget curves, float32 `[99, L, KV heads]`, entry `[r−1, l, h]`
//! the prune ratio of head `(l, h)` at r% compression, from the plan's budgets at "keep
//! 1 − r/100 of the context". A layer the model windows prunes 0 (it holds only its window), so
//! each row averages r/100 over the global layers (up to the flooring of the per-head budget,
//! within 1/n), not over every layer.

use super::super::npy;
use super::kvpress::Kvpress;
use crate::export::capability::{Arch, Capability, Refusal};
use crate::export::manifest::file;
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::{Result, Target};

/// The `lukv` target.
pub struct Lukv;

impl ExportTarget for Lukv {
    fn about(&self) -> About {
        About {
            name: "lukv",
            files: &["lukv_curve.npy"],
            holds: "float32 [99, layers, KV heads] prune ratios for kvpress's LUKVPress",
            reader: "kvpress: LUKVPress budget curves (np.load of lukv_curve.npy)",
        }
    }

    /// kvpress's entry: `LUKVPress` is one of its presses.
    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        Kvpress.capability(arch)
    }

    fn write(&self, cx: &Context<'_>, _cap: &Capability) -> Result<Written> {
        let g = &cx.plan.model.geometry;
        let n = cx.n;
        let mut curve = Vec::with_capacity(99 * g.layers * g.kv_heads);
        for r in 1..=99usize {
            let keep = Target::Ratio(1.0 - r as f64 / 100.0);
            let b = cx.plan.budgets(cx.method, n, keep)?;
            for (l, row) in b.per_layer_per_kv_head.iter().enumerate() {
                let windowed = g.is_windowed(l);
                curve.extend(row.iter().map(|&k| match windowed {
                    true => 0.0,
                    false => (1.0 - k as f64 / n as f64) as f32,
                }));
            }
        }
        let notes = vec![
            format!(
                "row r−1 holds the prune ratios at r% compression, from the plan's budgets at \
                 {n} tokens; the target is the row's, not --budget; model-windowed layers prune 0"
            ),
            "load: kvpress 0.5.5's LUKVPress fetches curves only by URL from BUDGET_CURVE_URLS \
             keyed by (model.config.name_or_path, scorer press name), and post_init_from_model \
             skips the fetch when a curve is already set — so set it from this file before use: \
             press = LUKVPress(ExpectedAttentionPress(epsilon=2e-2), compression_ratio=R); \
             press._budget_curves = numpy.load('lukv_curve.npy') (shape [99, layers, KV heads], \
             checked as LUKVPress checks a downloaded one)"
                .to_string(),
        ];
        Ok(Written {
            files: vec![file(
                "lukv_curve.npy",
                npy::write_f32(&[99, g.layers, g.kv_heads], &curve)?,
            )],
            notes,
            reduction: None,
            scores: None,
        })
    }
}
