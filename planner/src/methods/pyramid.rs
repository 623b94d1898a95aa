//! PyramidKV (`docs/papers/pyramidkv.md` §3–4): SnapKV selection under an arithmetic per-layer schedule — wide
//! budgets in the lower layers, narrow in the upper ones, where attention funnels onto few tokens
//! (eq. 1, β; the allocator below). The schedule runs over the global layers, bottom to top;
//! windowed layers hold their window (`budgets`). The section keeps the profile's funnelling per
//! layer, the measurement that motivates the schedule, for readers and figures.
//!
//! ## The allocator
//!
//! PyramidKV layer budgets (`docs/papers/pyramidkv.md` §4.2.1, eq. 1; defaults β = 20, α = 8).
//!
//! The printed eq. 1 is not usable as printed: it runs from the top layer down, divides the step
//! by m instead of m − 1, and its top budget `k_total/(β·m) − k⁰` is negative for every β ≥ 1. We
//! follow the authors' code (KVCache-Factory `pyramidkv_utils.py`, `PyramidKVCluster`) instead.
//! With `B` the average per-head budget, α the observation window, `c = B − α` and m layers:
//!
//! - top = ⌊c/β⌋, bottom = 2c − top (so (top + bottom)/2 = c);
//! - if bottom ≥ n − α: bottom = n − α, top = 2c − bottom (the prompt is too short for the shape);
//! - step = ⌊(bottom − top)/(m − 1)⌋; layer l keeps `bottom − l·step` selected entries plus α.
//!
//! Short prompts fall back as that code does: n ≤ B keeps the whole prompt in every layer;
//! n < 2c gives every layer c selected entries plus α (SnapKV).
//!
//! **Floor.** The top layer may select 0 entries (top = ⌊c/β⌋ = 0 when c < β); it still keeps
//! the α window, so α ≥ 1 is required: every (layer, KV head) then keeps at least one entry.
//!
//! `layers` are the layers the schedule runs over — the model's *global* layers, in order
//! (windowed layers hold their window and take no budget; see `budgets`).
//!
//! **Our resolution of the floor remainder.** Flooring the step makes the layers sum to *more*
//! than m·c (the code overshoots): the excess is E = m·r/2 with r = (bottom − top) mod (m − 1).
//! We take it back one entry per layer from the top layer downwards (⌊E/m⌋ from every layer, then
//! one more from the top E mod m layers), which keeps the schedule non-increasing from bottom to
//! top and the total exactly m·B.

use super::rules::{evidence, window_guards};
use super::snapkv::{Pooling, DEFAULT_KERNEL, DEFAULT_POOLING};
use super::MethodSection;
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::{LayerFunnel, Profile};
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// PyramidKV β (§5: β = 20).
pub const DEFAULT_PYRAMID_BETA: f64 = 20.0;

/// Options of the PyramidKV section.
#[derive(Clone, Debug, PartialEq)]
pub struct PyramidOptions {
    /// β: the top layer keeps 1/β of the average budget.
    pub beta: f64,
}

impl Default for PyramidOptions {
    fn default() -> Self {
        PyramidOptions {
            beta: DEFAULT_PYRAMID_BETA,
        }
    }
}

/// PyramidKV: arithmetic layer schedule (the allocator below), SnapKV selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PyramidSection {
    pub window: usize,
    pub beta: f64,
    pub kernel_size: usize,
    pub pooling: Pooling,
    /// The profile's funnelling per layer (what motivates the schedule; not used by the rule).
    pub funnel: Vec<LayerFunnel>,
}

impl MethodSection for PyramidSection {
    type Options = PyramidOptions;

    fn build(_: Method, p: &Profile, window: usize, opts: &PyramidOptions) -> Result<Self> {
        Ok(PyramidSection {
            window,
            beta: opts.beta,
            kernel_size: DEFAULT_KERNEL,
            pooling: DEFAULT_POOLING,
            funnel: p
                .funnel
                .iter()
                .map(|f| LayerFunnel {
                    entropy: evidence(f.entropy),
                    top_k_mass: evidence(f.top_k_mass),
                })
                .collect(),
        })
    }

    fn validate(&self, q: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{q}.window"), self.window, 1)?;
        validate::in_range(&format!("{q}.beta"), self.beta, 1.0, f64::MAX)?;
        validate::at_least(&format!("{q}.kernel_size"), self.kernel_size, 1)?;
        validate::per_layer(
            &format!("{q}.funnel"),
            &self.funnel,
            g,
            LayerFunnel::validate,
        )
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        out.window = self.window.min(b);
        let global = g.global_layers().len();
        let layers = layer_budgets(global, n, b, self.window, self.beta)?;
        out.per_layer_per_kv_head = g.scatter_global(Budgets::per_layer(layers, g.kv_heads), n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("β {}, α {}", self.beta, self.window)
    }
}

// ---- The allocator ----

/// Per-layer budgets (entries per KV head, window included), bottom layer first.
///
/// `beta` ≥ 1; needs `per_head > window` unless the prompt is shorter than `per_head`.
pub fn layer_budgets(
    layers: usize,
    context_len: usize,
    per_head: usize,
    window: usize,
    beta: f64,
) -> Result<Vec<usize>> {
    let n = context_len;
    if !(beta >= 1.0 && beta.is_finite()) {
        return Err(Error::budget(
            Method::Pyramid,
            format!("β must be a finite number >= 1, found {beta}"),
        ));
    }
    if window_guards(Method::Pyramid, n, per_head, window, "α")? {
        return Ok(vec![n; layers]);
    }
    let c = per_head - window;
    if n < 2 * c || layers < 2 {
        return Ok(vec![per_head; layers]);
    }
    let mut top = (c as f64 / beta).floor() as usize;
    let mut bottom = 2 * c - top;
    if bottom >= n - window {
        bottom = n - window;
        top = 2 * c - bottom;
    }
    let step = (bottom - top) / (layers - 1);
    let mut selected: Vec<usize> = (0..layers).map(|l| bottom - l * step).collect();
    let excess = selected.iter().sum::<usize>() - layers * c;
    let (each, extra) = (excess / layers, excess % layers);
    for (l, s) in selected.iter_mut().enumerate() {
        *s -= each + usize::from(l >= layers - extra);
    }
    Ok(selected.into_iter().map(|s| s + window).collect())
}

#[cfg(test)]
mod allocator_tests {
    use super::*;

    fn run(layers: usize, n: usize, b: usize) -> Vec<usize> {
        layer_budgets(layers, n, b, 8, 20.0).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn four_layers_average_72() {
        // B = 72, α = 8 → c = 64; top = ⌊64/20⌋ = 3; bottom = 128 − 3 = 125;
        // step = ⌊122/3⌋ = 40 → 125, 85, 45, 5 (sum 260 = 256 + 4, r = 122 mod 3 = 2, E = 4·2/2).
        // E = 4: one from every layer → 124, 84, 44, 4 (sum 256); plus α = 8 each.
        assert_eq!(run(4, 1000, 72), vec![132, 92, 52, 12]);
    }

    #[test]
    fn odd_remainder_comes_off_the_top_layers() {
        // B = 73 → c = 65; top = ⌊65/20⌋ = 3; bottom = 127; step = ⌊124/3⌋ = 41 →
        // 127, 86, 45, 4 (sum 262); target 4·65 = 260, E = 2 → top two layers −1: 127, 86, 44, 3.
        assert_eq!(run(4, 1000, 73), vec![135, 94, 52, 11]);
    }

    #[test]
    fn exact_schedule_needs_no_correction() {
        // 3 layers, c = 64: step = ⌊122/2⌋ = 61 → 125, 64, 3 (sum 192 = 3·64).
        assert_eq!(run(3, 1000, 72), vec![133, 72, 11]);
    }

    #[test]
    fn short_prompt_clips_the_bottom_layer() {
        // n = 130, B = 72, c = 64: bottom 125 ≥ n − α = 122 → bottom = 122, top = 128 − 122 = 6, step = ⌊116/3⌋ = 38 → 122, 84, 46, 8 (sum 260);
        // E = 4 → 121, 83, 45, 7; plus α.
        assert_eq!(run(4, 130, 72), vec![129, 91, 53, 15]);
    }

    #[test]
    fn prompt_shorter_than_twice_the_selection_is_uniform() {
        // n = 100 < 2c = 128: every layer keeps c + α = B = 72 (the authors' middle branch).
        assert_eq!(run(4, 100, 72), vec![72; 4]);
    }

    #[test]
    fn prompt_shorter_than_the_budget_is_kept_whole() {
        assert_eq!(run(4, 50, 72), vec![50; 4]);
    }

    #[test]
    fn top_layer_keeps_the_floor_of_one_entry() {
        // 2 layers, B = 11, α = 1, β = 20, n = 1000: c = 10, top = ⌊10/20⌋ = 0, bottom = 20,
        // step = 20 → selected 20, 0 (sum 20 = 2·10); plus α: 21, 1 — the top layer at the floor.
        let b = layer_budgets(2, 1000, 11, 1, 20.0).ok();
        assert_eq!(b, Some(vec![21, 1]));
        // With α = 0 the top layer would keep nothing: refused.
        let err = layer_budgets(2, 1000, 10, 0, 20.0)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "pyramid: the observation window α must hold at least 1 entry (every (layer, \
                 KV head) keeps it: the floor of one entry), found 0"
            )
        );
    }

    #[test]
    fn budget_inside_the_window_is_an_error() {
        let err = layer_budgets(4, 1000, 8, 8, 20.0)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("pyramid: budget 8 per head must exceed the observation window α = 8")
        );
    }
}
