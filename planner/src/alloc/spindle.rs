//! SpindleKV eviction schedule (`docs/papers/spindlekv.md` §3.3, eq. 5–7; Table 3: β = 0.05,
//! α = 0.525, θ_K = 0.98, θ_V = 0.95).
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

use super::{check_exceeds_window, check_window, prompt_fits, round_to_total};
use crate::{Error, Method, Result};

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
    check_window(Method::Spindle, window)?;
    if prompt_fits(n, per_head) {
        return Ok(vec![n; layers]);
    }
    check_exceeds_window(Method::Spindle, per_head, window, "l_w")?;
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
mod tests {
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
