//! SpindleKV (`docs/papers/spindlekv.md` §3): eviction under a per-layer ratio schedule (eq. 5–7, corrected;
//! the allocator below) followed by codebook replacement of redundant kept entries (θ_K, θ_V;
//! Algorithm 1). The section keeps the profile's KV redundancy per layer (§3.2) for readers.
//! The schedule runs over the global layers and the codebook applies there only: windowed layers
//! hold their window untouched (`budgets`).
//!
//! ## The allocator
//!
//! SpindleKV eviction schedule (`docs/papers/spindlekv.md` §3.3, eq. 5–7; Table 3: β = 0.05, α = 0.525,
//! θ_K = 0.98, θ_V = 0.95).
//!
//! With `r = B/n` the reserve ratio of the whole cache and `l_w` the observation window, the
//! context (length `l_c = n − l_w`) keeps the ratio `r_c = (r·n − l_w)/l_c = (B − l_w)/l_c`.
//! Eq. 5 sets the bottom and top layers' ratios and eq. 6 interpolates linearly:
//!
//! - β < r_c ≤ α: r_c(0) = 2·r_c − β, r_c(m−1) = β;
//! - α < r_c ≤ 1: r_c(0) = 1, r_c(m−1) = 2·r_c − 1.
//!
//! **Corrections.** The printed eq. 5 has `1 − 2·r_c` for the top layer when α < r_c ≤ 1: that is
//! negative there; the mean of the schedule is r_c only with `2·r_c − 1`, which we use. The
//! printed constant 0.05 is β (α = (1 + β)/2 makes both branches meet at r_c = α). r_c ≤ β has no
//! schedule and is an error.
//!
//! Layer λ keeps ⌊r_c(λ)·l_c⌋ context entries (eq. 7) plus the l_w window; the floor remainder is
//! handed out by largest remainder so the layers sum to exactly m·B.
//!
//! **Layers and floor.** `layers` are the layers the schedule runs over: the model's global
//! layers (windowed layers hold their window). A layer may select 0 context entries (β·l_c < 1
//! on a short prompt); it keeps the l_w window, so l_w ≥ 1 is required and every head keeps at
//! least one entry.
//!
//! By the paper (eq. 15, r₁·r₂ in every layer) eviction and the codebook both apply to every
//! layer. kvplan's optional shallow/deep split (off by default) only limits where the codebook
//! applies (`codebook_layers`); the eviction schedule stays the paper's.

use super::rules::{evidence, prompt_fits, round_to_total, window_guards};
use super::MethodSection;
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::{LayerRedundancy, Profile};
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// SpindleKV β (Table 3).
pub const DEFAULT_SPINDLE_BETA: f64 = 0.05;
/// SpindleKV θ_K and θ_V (Table 3).
pub const DEFAULT_THETA_K: f64 = 0.98;
/// See [`DEFAULT_THETA_K`].
pub const DEFAULT_THETA_V: f64 = 0.95;

/// Options of the SpindleKV section.
#[derive(Clone, Debug, PartialEq)]
pub struct SpindleOptions {
    /// β (α follows as (1 + β)/2).
    pub beta: f64,
    /// Shallow/deep split: codebook only below this layer (`None`: every layer, the paper).
    pub split: Option<usize>,
}

impl Default for SpindleOptions {
    fn default() -> Self {
        SpindleOptions {
            beta: DEFAULT_SPINDLE_BETA,
            split: None,
        }
    }
}

/// SpindleKV: eviction schedule (the allocator below) and codebook thresholds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpindleSection {
    pub window: usize,
    pub beta: f64,
    /// Always (1 + β)/2; stored so the file reads like Table 3.
    pub alpha: f64,
    pub theta_k: f64,
    pub theta_v: f64,
    /// kvplan option: the codebook only in layers below `split` (null: every layer, the paper).
    pub split: Option<usize>,
    /// The profile's KV redundancy per layer.
    pub redundancy: Vec<LayerRedundancy>,
}

impl MethodSection for SpindleSection {
    type Options = SpindleOptions;

    fn build(_: Method, p: &Profile, window: usize, opts: &SpindleOptions) -> Result<Self> {
        let o = opts;
        Ok(SpindleSection {
            window,
            beta: o.beta,
            alpha: (1.0 + o.beta) / 2.0,
            theta_k: p.settings.theta_k,
            theta_v: p.settings.theta_v,
            split: o.split,
            redundancy: p
                .kv_redundancy
                .iter()
                .map(|r| LayerRedundancy {
                    k_cos_fraction: evidence(r.k_cos_fraction),
                    v_cos_fraction: evidence(r.v_cos_fraction),
                    attention_sparsity: evidence(r.attention_sparsity),
                })
                .collect(),
        })
    }

    fn validate(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{p}.window"), self.window, 1)?;
        validate::in_range(&format!("{p}.beta"), self.beta, 0.0, 1.0)?;
        let alpha = (1.0 + self.beta) / 2.0;
        if !self.alpha.is_finite() || (self.alpha - alpha).abs() > 1e-9 {
            return Err(Error::invalid(
                format!("{p}.alpha"),
                format!("(1 + β)/2 = {alpha}"),
                self.alpha,
            ));
        }
        validate::in_range(&format!("{p}.theta_k"), self.theta_k, 0.0, 1.0)?;
        validate::in_range(&format!("{p}.theta_v"), self.theta_v, 0.0, 1.0)?;
        if let Some(k) = self.split {
            if k == 0 || k >= g.layers {
                return Err(Error::invalid(
                    format!("{p}.split"),
                    format!("a layer in 1..{} or null", g.layers),
                    k,
                ));
            }
        }
        self.validate_redundancy(p, g)
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        out.window = self.window.min(b);
        // A prompt that fits the budget is kept whole: nothing to compress, so no codebook (its
        // centroids would only add bytes to a cache holding every entry).
        let fits = prompt_fits(n, b);
        out.codebook_layers = codebook_layers(g.layers, self.split)
            .into_iter()
            .enumerate()
            .map(|(l, c)| c && !g.is_windowed(l) && !fits)
            .collect();
        let global = g.global_layers().len();
        let layers = layer_budgets(global, n, b, self.window, self.beta, self.alpha)?;
        out.per_layer_per_kv_head = g.scatter_global(Budgets::per_layer(layers, g.kv_heads), n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!(
            "β {}, α {}, θ_K {}, θ_V {}",
            self.beta, self.alpha, self.theta_k, self.theta_v
        )
    }
}

impl SpindleSection {
    fn validate_redundancy(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::per_layer(
            &format!("{p}.redundancy"),
            &self.redundancy,
            g,
            LayerRedundancy::validate,
        )
    }
}

// ---- The allocator ----

/// Eq. 5–6: the context retain ratio of every layer, bottom first. Needs β < r_c ≤ 1.
pub fn layer_ratios(layers: usize, r_c: f64, beta: f64, alpha: f64) -> Vec<f64> {
    let (first, last) = if r_c <= alpha {
        (2.0 * r_c - beta, beta)
    } else {
        (1.0, 2.0 * r_c - 1.0)
    };
    if layers < 2 {
        return vec![r_c; layers];
    }
    let step = (last - first) / (layers - 1) as f64;
    (0..layers).map(|l| first + step * l as f64).collect()
}

/// Per-layer budgets (entries per KV head, window included), bottom layer first.
pub fn layer_budgets(
    layers: usize,
    context_len: usize,
    per_head: usize,
    window: usize,
    beta: f64,
    alpha: f64,
) -> Result<Vec<usize>> {
    let n = context_len;
    if window_guards(Method::Spindle, n, per_head, window, "l_w")? {
        return Ok(vec![n; layers]);
    }
    let l_c = n - window;
    let kept = per_head - window;
    let r_c = kept as f64 / l_c as f64;
    if r_c <= beta {
        return Err(Error::budget(
            Method::Spindle,
            format!(
                "context retain ratio r_c = ({per_head} − {window})/({n} − {window}) = {r_c:.4} \
                 must exceed β = {beta} (eq. 5 has no schedule below it)"
            ),
        ));
    }
    let ideal: Vec<f64> = layer_ratios(layers, r_c, beta, alpha)
        .into_iter()
        .map(|r| r * l_c as f64)
        .collect();
    let selected = round_to_total(&ideal, layers * kept, &vec![l_c; layers]);
    Ok(selected.into_iter().map(|s| s + window).collect())
}

/// Which layers the codebook applies to: every layer (the paper), or with `split = Some(k)` only
/// the shallow layers `0..k` (kvplan option).
pub fn codebook_layers(layers: usize, split: Option<usize>) -> Vec<bool> {
    (0..layers).map(|l| split.is_none_or(|k| l < k)).collect()
}

#[cfg(test)]
mod allocator_tests {
    use super::*;

    fn run(layers: usize, n: usize, b: usize) -> Result<Vec<usize>> {
        layer_budgets(layers, n, b, 8, 0.05, 0.525)
    }

    #[test]
    fn low_ratio_branch_ends_at_beta() {
        // n = 1008, l_w = 8 → l_c = 1000; B = 208 → r_c = 200/1000 = 0.2 ≤ α = 0.525:
        // r(0) = 2·0.2 − 0.05 = 0.35, r(3) = 0.05, step −0.1 → 0.35, 0.25, 0.15, 0.05
        // → 350, 250, 150, 50 (sum 800 = 4·200), plus l_w = 8.
        assert_eq!(run(4, 1008, 208).ok(), Some(vec![358, 258, 158, 58]));
    }

    #[test]
    fn high_ratio_branch_uses_corrected_top_layer() {
        // B = 708 → r_c = 0.7 > α: r(0) = 1, r(3) = 2·0.7 − 1 = 0.4 (the printed 1 − 2·0.7 would
        // be −0.4) → 1.0, 0.8, 0.6, 0.4 → 1000, 800, 600, 400 (sum 2800 = 4·700), plus 8.
        assert_eq!(run(4, 1008, 708).ok(), Some(vec![1008, 808, 608, 408]));
    }

    #[test]
    fn floor_remainder_goes_to_largest_fraction() {
        // n = 18, l_c = 10, B = 11 → r_c = 0.3: r = 0.55, 0.30, 0.05 → 5.5, 3.0, 0.5;
        // floors 5 + 3 + 0 = 8, target 3·3 = 9: the tie .5/.5 goes to layer 0 → 6, 3, 0; plus 8.
        assert_eq!(run(3, 18, 11).ok(), Some(vec![14, 11, 8]));
    }

    #[test]
    fn top_layer_keeps_the_floor_of_one_entry() {
        // n = 11, l_w = 1 → l_c = 10; B = 3 → r_c = 2/10 = 0.2: r = 0.35, 0.05 → 3.5, 0.5;
        // floors 3 + 0, target 2·2 = 4: the tie .5/.5 goes to layer 0 → 4, 0; plus l_w: 5, 1.
        let b = layer_budgets(2, 11, 3, 1, 0.05, 0.525).ok();
        assert_eq!(b, Some(vec![5, 1]));
        assert!(layer_budgets(2, 11, 3, 0, 0.05, 0.525).is_err());
    }

    #[test]
    fn ratio_at_or_below_beta_is_rejected() {
        // B = 58 → r_c = 50/1000 = 0.05 = β.
        let err = run(4, 1008, 58).err().map(|e| e.to_string());
        assert!(err.is_some_and(|m| m.starts_with("spindle: context retain ratio r_c")));
    }

    #[test]
    fn branches_meet_at_alpha() {
        // r_c = α = 0.525: low branch gives r(0) = 2α − β = 1 and r(m−1) = β = 2α − 1.
        let r = layer_ratios(2, 0.525, 0.05, 0.525);
        assert!((r[0] - 1.0).abs() < 1e-12 && (r[1] - 0.05).abs() < 1e-12);
    }

    #[test]
    fn split_limits_codebook_to_shallow_layers() {
        assert_eq!(codebook_layers(3, None), vec![true; 3]);
        assert_eq!(codebook_layers(3, Some(1)), vec![true, false, false]);
    }
}
