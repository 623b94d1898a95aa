//! Retrieval-reasoning (R2) heads (HeadKV §3.1 eq. 2), as the authors' code computes it.
//!
//! At each decode step take the N most-attended keys of head h, N = |c²| (the correct answer's
//! span in tokens); each one inside c² adds its attention weight a_i / N. Unlike eq. 1 there is no
//! check against the generated token (FYYFU/HeadKV `retrieval_head_detection_r2.py`,
//! `retrieval_calculate`, FYYFU/HeadKV commit 0862a09). Summed over the decode steps and divided
//! by max(N, steps decoded) — the code's 1/N whenever the answer takes at most N steps, as its
//! loop does (it stops at the statement's length); the mean per step when our 50-token decode
//! runs longer — so the most a trial can give is 1, the property App. E asks of eq. 2 (the code's
//! commented-out factor 10 only rescales). A head's score is the mean over kept trials.

use std::ops::Range;

use super::top_k;

/// Attention mass that one decode step's `row` puts on `span` through its `span.len()` largest
/// entries (keys at `key_positions`): Σ a_i over the top-|span| keys that lie in the span.
pub fn mass_on_span(row: &[f32], key_positions: &[usize], span: &Range<usize>) -> f64 {
    top_k(row, span.len())
        .into_iter()
        .filter(|&i| key_positions.get(i).is_some_and(|p| span.contains(p)))
        .map(|i| f64::from(row[i]))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::retrieval::denominator;

    #[test]
    fn hand_made_row_scores_its_span_mass_among_the_top_n() {
        // Keys 0..6, span 2..4 (N = 2). Row: 0.5 on key 0 (a sink), 0.2 on key 2, 0.15 on key 3,
        // 0.1 on key 5, 0.05 on key 1. Top-2 keys: 0 (0.5, outside) and 2 (0.2, inside) → 0.2;
        // key 3 (0.15) is third, so it does not count.
        let row = [0.5, 0.05, 0.2, 0.15, 0.0, 0.1];
        let keys: Vec<usize> = (0..6).collect();
        let m = mass_on_span(&row, &keys, &(2..4));
        assert!((m - 0.2).abs() < 1e-7, "{m}");
        // Per step the trial adds m / N: 0.1.
        assert!((m / denominator(2, 2) - 0.1).abs() < 1e-7);
    }

    #[test]
    fn head_attending_only_to_the_answer_scores_one() {
        // All mass on the span at each of N = 3 steps: 3 · 1 / 3 = 1.
        let keys: Vec<usize> = (0..6).collect();
        let row = [0.0, 0.5, 0.3, 0.2, 0.0, 0.0];
        let total: f64 = (0..3).map(|_| mass_on_span(&row, &keys, &(1..4))).sum();
        let score = total / denominator(3, 3);
        assert!((score - 1.0).abs() < 1e-6, "{score}");
    }

    #[test]
    fn no_check_against_the_generated_token_and_no_mass_outside() {
        let keys: Vec<usize> = (0..4).collect();
        assert_eq!(mass_on_span(&[1.0, 0.0, 0.0, 0.0], &keys, &(2..4)), 0.0);
    }
}
