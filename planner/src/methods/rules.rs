//! What every method's allocator shares: the guards (the prompt fits; the budget exceeds the
//! observation window), the integer rounding, and the rounding of the measurements a section
//! carries only for readers ([`evidence`]).
//!
//! Every allocator (one per method, in its module) works in entries (tokens) per layer and KV head,
//! the observation window included (docs/design.md "Equal KV size"), over the layers it is given: the
//! model's global layers (windowed layers hold their window and take no budget, `budgets`). No
//! allocator gives a head fewer than one entry ([`check_window`]). Where a paper's rule yields
//! fractions, the floor remainder is handed out by largest remainder ([`round_to_total`]) so that
//! totals equal the target exactly: the entries with the largest fractional parts get one more,
//! ties going to the lower index (lower layer, then lower head), which keeps the result
//! deterministic.
//!
//! The measurements a section carries only for readers and figures — PyramidKV's funnel
//! (`docs/papers/pyramidkv.md` §3), SpindleKV's redundancy (`docs/papers/spindlekv.md` §3.2), TreeKV's wavelet magnitudes
//! (`docs/papers/treekv.md` §3.3) — are written with [`EVIDENCE_DIGITS`] significant digits. They come from
//! float sums over thousands of attention rows, whose last digits move with the summation order
//! of a rebuilt runtime (seen: ~1e-9 relative); rounded, that noise rarely reaches the plan's
//! bytes (a value at a rounding boundary, or a count crossing a threshold, still can). Inputs of
//! the budget rules (head scores, layer similarities through PoD's blocks) are kept as measured.

use crate::budgets::MIN_ENTRIES_PER_KV_HEAD;
use crate::method::Method;
use crate::{Error, Result};

/// The observation window every head keeps on top of its selected entries must hold at least
/// [`MIN_ENTRIES_PER_KV_HEAD`]: it is what keeps each (layer, KV head) at or above the floor
/// when a schedule gives a head no selected entry (PyramidKV's top layer, a zero-score HeadKV
/// head at β = 1, SpindleKV's top layer on a short prompt).
pub fn check_window(method: Method, window: usize) -> Result<()> {
    if window >= MIN_ENTRIES_PER_KV_HEAD {
        return Ok(());
    }
    Err(Error::budget(
        method,
        format!(
            "the observation window α must hold at least {MIN_ENTRIES_PER_KV_HEAD} entry (every \
             (layer, KV head) keeps it: the floor of one entry), found {window}"
        ),
    ))
}

/// Whether a prompt of `context_len` tokens fits a per-head budget of `per_head` entries, so every
/// head keeps it whole and no schedule applies. The one guard every window-based allocator
/// (SnapKV, PyramidKV, HeadKV, SpindleKV) asks first: `per_head = target.per_head(n) ≤ n`, so the
/// prompt fits exactly when the two are equal (`n ≤ per_head`). A prompt of α tokens or fewer
/// therefore always fits, whatever the window.
pub fn prompt_fits(context_len: usize, per_head: usize) -> bool {
    context_len <= per_head
}

/// The guards of an allocator that keeps an observation window α (`name`: how its paper calls
/// it), in the order every such allocator asks them: the window holds the floor
/// ([`check_window`]); then either the prompt fits (`Ok(true)`: each head keeps it whole,
/// [`prompt_fits`]) or the budget exceeds the window (`Ok(false)`: a schedule applies,
/// [`check_exceeds_window`]).
pub fn window_guards(
    method: Method,
    context_len: usize,
    per_head: usize,
    window: usize,
    name: &str,
) -> Result<bool> {
    check_window(method, window)?;
    if prompt_fits(context_len, per_head) {
        return Ok(true);
    }
    check_exceeds_window(method, per_head, window, name)?;
    Ok(false)
}

/// The second shared guard, asked when the prompt does not fit: a head's budget must exceed the
/// observation window α it keeps on top of its selected entries (`name` is how the method's
/// paper calls α).
pub fn check_exceeds_window(
    method: Method,
    per_head: usize,
    window: usize,
    name: &str,
) -> Result<()> {
    if per_head > window {
        return Ok(());
    }
    Err(Error::budget(
        method,
        format!("budget {per_head} per head must exceed the observation window {name} = {window}"),
    ))
}

/// Values this close to an integer are that integer: `0.35 * 1000.0` must give 350, not 349.
const SNAP: f64 = 1e-9;

/// Rounds `ideal` (entries ≥ 0) to integers that sum to `total` exactly, each at most `caps[i]`:
/// floors first, then one more to the largest fractional parts (ties: lower index), or one less
/// from the smallest (ties: higher index) if the floors overshoot. Needs `Σ caps ≥ total`.
pub fn round_to_total(ideal: &[f64], total: usize, caps: &[usize]) -> Vec<usize> {
    let snapped: Vec<f64> = ideal
        .iter()
        .map(|&x| {
            let x = if x.is_finite() { x.max(0.0) } else { 0.0 };
            if (x - x.round()).abs() < SNAP {
                x.round()
            } else {
                x
            }
        })
        .collect();
    let mut out: Vec<usize> = snapped
        .iter()
        .zip(caps)
        .map(|(&x, &cap)| (x.floor() as usize).min(cap))
        .collect();
    // Fractions on a 1e-9 grid, so that float noise does not break ties (0.55·10 vs 0.05·10).
    let frac: Vec<i64> = snapped
        .iter()
        .map(|x| ((x - x.floor()) / SNAP).round() as i64)
        .collect();
    let sum: usize = out.iter().sum();
    let mut order: Vec<usize> = (0..out.len()).collect();
    if sum < total {
        // Largest fraction first; ties to the lower index (sort is stable).
        order.sort_by_key(|&i| std::cmp::Reverse(frac[i]));
        let mut rem = total - sum;
        while rem > 0 {
            let before = rem;
            for &i in &order {
                if rem > 0 && out[i] < caps[i] {
                    out[i] += 1;
                    rem -= 1;
                }
            }
            if rem == before {
                break; // caps too small: the caller broke the precondition
            }
        }
    } else if sum > total {
        // Smallest fraction first; ties to the higher index.
        order.reverse();
        order.sort_by_key(|&i| frac[i]);
        let mut excess = sum - total;
        while excess > 0 {
            let before = excess;
            for &i in &order {
                if excess > 0 && out[i] > 0 {
                    out[i] -= 1;
                    excess -= 1;
                }
            }
            if excess == before {
                break;
            }
        }
    }
    out
}

/// Splits `total` entries in proportion to `weights` (≥ 0), none above its cap; entries whose
/// share would pass the cap get the cap and the rest is shared again among the others
/// (water-filling). All-zero weights share evenly. Needs `Σ caps ≥ total`.
pub fn distribute(total: usize, weights: &[f64], caps: &[usize]) -> Vec<usize> {
    let n = weights.len();
    let mut capped = vec![false; n];
    let mut ideal = vec![0.0; n];
    let mut remaining = total as f64;
    loop {
        let active: Vec<usize> = (0..n).filter(|&i| !capped[i]).collect();
        if active.is_empty() {
            break;
        }
        let wsum: f64 = active.iter().map(|&i| weights[i].max(0.0)).sum();
        for &i in &active {
            ideal[i] = if wsum > 0.0 {
                remaining * weights[i].max(0.0) / wsum
            } else {
                remaining / active.len() as f64
            };
        }
        let over: Vec<usize> = active
            .into_iter()
            .filter(|&i| ideal[i] > caps[i] as f64)
            .collect();
        if over.is_empty() {
            break;
        }
        for i in over {
            capped[i] = true;
            ideal[i] = caps[i] as f64;
            remaining -= caps[i] as f64;
        }
    }
    round_to_total(&ideal, total, caps)
}

/// Significant digits of the measurements a plan carries for readers ([`evidence`]).
pub const EVIDENCE_DIGITS: usize = 6;

/// `x` to [`EVIDENCE_DIGITS`] significant digits: the decimal rounding of its exact value, read
/// back as the nearest `f64`, so it prints as at most that many digits.
pub fn evidence(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{:.*e}", EVIDENCE_DIGITS - 1, x)
        .parse()
        .unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{headkv, pyramid, spindle};

    /// The shared guards: a prompt of n ≤ B tokens fits (B = min(target, n), so n = 1 with any
    /// target fits), and only a prompt that does not fit needs B > α.
    #[test]
    fn guards_prompt_fits_before_the_window_check() {
        assert!(prompt_fits(1, 1));
        assert!(prompt_fits(8, 8));
        assert!(!prompt_fits(9, 8));
        assert!(check_exceeds_window(Method::Pyramid, 9, 8, "α").is_ok());
        let e = check_exceeds_window(Method::Pyramid, 8, 8, "α").unwrap_err();
        assert!(
            e.to_string().contains("budget 8 per head must exceed"),
            "{e}"
        );
    }

    /// The guards in their order: a window below the floor fails even when the prompt fits;
    /// then a prompt that fits is kept whole, and only one that does not needs B > α.
    #[test]
    fn window_guards_check_the_floor_then_fit_then_the_budget() {
        let e = window_guards(Method::Pyramid, 4, 4, 0, "α").unwrap_err();
        assert!(e.to_string().contains("must hold at least 1 entry"), "{e}");
        assert!(window_guards(Method::Pyramid, 8, 8, 8, "α").is_ok_and(|fits| fits));
        assert!(window_guards(Method::Pyramid, 16, 9, 8, "α").is_ok_and(|fits| !fits));
        let e = window_guards(Method::Spindle, 16, 8, 8, "l_w").unwrap_err();
        assert!(e.to_string().contains("observation window l_w = 8"), "{e}");
    }

    /// Every window-based allocator keeps a prompt shorter than its window whole (PyramidKV's
    /// guard tested `n < B` and failed on a 1-token prompt: "budget 1 per head must exceed the
    /// observation window α = 8"), each head holding the prompt's n entries.
    #[test]
    fn every_window_allocator_keeps_a_prompt_of_at_most_alpha_tokens_whole() {
        for n in [1, 5, 8] {
            assert_eq!(
                pyramid::layer_budgets(4, n, n, 8, 20.0).unwrap(),
                vec![n; 4]
            );
            assert_eq!(
                spindle::layer_budgets(4, n, n, 8, 0.02, 0.5).unwrap(),
                vec![n; 4]
            );
            let kv = vec![vec![0.5, 0.5]; 3];
            let grid = headkv::head_budgets(Method::HeadKv, &kv, n, n, 8, 1.01).unwrap();
            assert_eq!(grid, vec![vec![n; 2]; 3]);
        }
    }

    #[test]
    fn largest_remainder_goes_to_largest_fraction_then_lower_index() {
        // 5.5 + 3.0 + 0.5 = 9: floors 5 + 3 + 0 = 8, one left; fractions .5, 0, .5 → index 0.
        assert_eq!(round_to_total(&[5.5, 3.0, 0.5], 9, &[10; 3]), vec![6, 3, 0]);
    }

    #[test]
    fn near_integers_snap() {
        // 0.35 * 1000 is 349.99999999999994 in f64; it must count as 350.
        let x = 0.35 * 1000.0;
        assert_eq!(
            round_to_total(&[x, 650.0], 1000, &[1000; 2]),
            vec![350, 650]
        );
    }

    #[test]
    fn distribute_caps_and_shares_again() {
        // 10 by weights 8:1:1 with caps 5: head 0 would get 8 > 5, so it gets 5 and the other
        // 5 go 1:1 → 2.5 each → floors 2, 2, remainder 1 to the lower index.
        assert_eq!(distribute(10, &[8.0, 1.0, 1.0], &[5, 5, 5]), vec![5, 3, 2]);
    }

    #[test]
    fn distribute_zero_weights_evenly() {
        assert_eq!(distribute(7, &[0.0, 0.0, 0.0], &[9; 3]), vec![3, 2, 2]);
    }
}
