//! Retrieval-reasoning answers against the copying rate (see `kvplan_planner::chance`).
//!
//! A needle with k statements of the answer's shape is answered right 1/k of the time by a model
//! that copies one at random. The one-sided exact p of `correct` right answers is the upper tail
//! P(X ≥ correct) of the copier's count X: binomial for trials of one k (statrs'
//! `Binomial::sf(correct − 1)`), and over a mix of k's the Poisson-binomial tail, computed exactly
//! by the convolution recurrence P_{t}(j) = P_{t−1}(j)(1 − p_t) + P_{t−1}(j − 1) p_t.
//!
//! The needle-level test (`kvplan_planner::NeedleTest`) takes the needle as the unit: a copier
//! that picks one candidate per needle and keeps it in all n_j of its trials is right
//! S = Σ_j n_j B_j times, B_j ~ Bernoulli(1/k_j); P(S ≥ correct) by the same recurrence with
//! steps of n_j, P_{j}(s) = P_{j−1}(s)(1 − p_j) + P_{j−1}(s − n_j) p_j (n_j = 1 everywhere is the
//! Poisson-binomial above).

use std::collections::BTreeMap;

use kvplan_planner::{ChanceGroup, ChanceTest, NeedleTest};
use statrs::distribution::{Binomial, DiscreteCDF};

/// One retrieval-reasoning trial as the tests see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct R2Answer {
    /// Candidate statements of its needle, k ≥ 2 (a copier is right 1/k of the time).
    pub candidates: usize,
    /// Which needle it asked (trials of one needle differ in length and depth only).
    pub needle: usize,
    /// Whether it was answered right.
    pub right: bool,
}

/// P(X ≥ `correct`), X ~ Binomial(`trials`, `rate`).
pub fn binomial_p_at_least(correct: usize, trials: usize, rate: f64) -> f64 {
    if correct == 0 {
        return 1.0;
    }
    if correct > trials {
        return 0.0;
    }
    match Binomial::new(rate, trials as u64) {
        Ok(b) => b.sf(correct as u64 - 1).clamp(0.0, 1.0),
        // A rate outside [0, 1] cannot come from 1/k; no evidence either way.
        Err(_) => 1.0,
    }
}

/// P(X ≥ `correct`), X the number of successes of independent trials with success `rates`
/// (Poisson-binomial), by the exact convolution recurrence.
pub fn poisson_binomial_p_at_least(correct: usize, rates: &[f64]) -> f64 {
    let one_each: Vec<(usize, f64)> = rates.iter().map(|&p| (1, p)).collect();
    grouped_p_at_least(correct, &one_each)
}

/// P(S ≥ `correct`), S = Σ_j n_j B_j over `groups` of `(n_j, p_j)`, B_j ~ Bernoulli(p_j)
/// independent: the right answers of a copier consistent within each needle, by the exact
/// recurrence in steps of n_j.
pub fn grouped_p_at_least(correct: usize, groups: &[(usize, f64)]) -> f64 {
    let total: usize = groups.iter().map(|g| g.0).sum();
    if correct == 0 {
        return 1.0;
    }
    if correct > total {
        return 0.0;
    }
    // pmf[s] = P(S = s over the groups so far); `reach` the largest such s.
    let mut pmf = vec![0.0; total + 1];
    pmf[0] = 1.0;
    let mut reach = 0;
    for &(n, p) in groups {
        // Downwards, so pmf[s + n] already holds its own (1 − p) share when pmf[s]'s p adds in.
        for s in (0..=reach).rev() {
            let here = pmf[s];
            pmf[s] = here * (1.0 - p);
            pmf[s + n] += here * p;
        }
        reach += n;
    }
    pmf[correct..].iter().sum::<f64>().clamp(0.0, 1.0)
}

/// The needle-level test of `trials`: each needle's trials as one group at its copying rate.
pub fn needle_test(trials: &[R2Answer]) -> NeedleTest {
    // needle → (trials, copying rate, right)
    let mut needles: BTreeMap<usize, (usize, f64, usize)> = BTreeMap::new();
    for t in trials {
        let e = needles
            .entry(t.needle)
            .or_insert((0, 1.0 / t.candidates as f64, 0));
        e.0 += 1;
        e.2 += usize::from(t.right);
    }
    let correct = trials.iter().filter(|t| t.right).count();
    let groups: Vec<(usize, f64)> = needles.values().map(|&(n, p, _)| (n, p)).collect();
    NeedleTest {
        needles: needles.len(),
        right_every_trial: needles.values().filter(|&&(n, _, r)| r == n).count(),
        right_no_trial: needles.values().filter(|&&(_, _, r)| r == 0).count(),
        p_value: grouped_p_at_least(correct, &groups),
    }
}

/// The test of R2 `trials`: over trials, per candidate count, and over needles.
pub fn chance_test(trials: &[R2Answer]) -> ChanceTest {
    let rates: Vec<f64> = trials.iter().map(|t| 1.0 / t.candidates as f64).collect();
    let correct = trials.iter().filter(|t| t.right).count();
    let mut ks: Vec<usize> = trials.iter().map(|t| t.candidates).collect();
    ks.sort_unstable();
    ks.dedup();
    let by_candidates = ks
        .into_iter()
        .map(|k| {
            let of_k = trials.iter().filter(|t| t.candidates == k);
            let n = of_k.clone().count();
            let c = of_k.filter(|t| t.right).count();
            ChanceGroup::new(k, n, c, binomial_p_at_least(c, n, 1.0 / k as f64))
        })
        .collect::<Vec<_>>();
    // One k: the group's binomial p itself (the recurrence gives the same up to rounding).
    let p_value = match by_candidates.as_slice() {
        [one] => one.p_value,
        _ => poisson_binomial_p_at_least(correct, &rates),
    };
    let test = ChanceTest::new(
        trials.len(),
        correct,
        rates.iter().sum(),
        p_value,
        by_candidates,
    );
    if trials.is_empty() {
        test
    } else {
        test.with_needles(needle_test(trials))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() < tol, "{a} vs {b}");
    }

    #[test]
    fn binomial_tails_worked_by_hand() {
        // 16 of 50 at 1/2 (Qwen 1.5B's earlier R2 count): Σ_{i ≥ 16} C(50, i) / 2^50 = 0.996700
        // (P(X ≤ 15) = 0.0033001). Not above chance.
        close(binomial_p_at_least(16, 50, 0.5), 0.996_699_776, 1e-8);
        // 10 of 20 at 1/4: Σ_{i=10}^{20} C(20, i) 3^(20−i) / 4^20 = 15 244 087 642 / 4^20.
        close(
            binomial_p_at_least(10, 20, 0.25),
            15_244_087_642.0 / 1_099_511_627_776.0,
            1e-10,
        );
        // Small enough to check on paper: 3 of 3 at 1/2 = 1/8; 2 of 3 at 1/2 = (3 + 1)/8;
        // 1 of 2 at 1/4 = 1 − (3/4)² = 7/16.
        close(binomial_p_at_least(3, 3, 0.5), 0.125, 1e-12);
        close(binomial_p_at_least(2, 3, 0.5), 0.5, 1e-12);
        close(binomial_p_at_least(1, 2, 0.25), 7.0 / 16.0, 1e-12);
        assert_eq!(binomial_p_at_least(0, 10, 0.5), 1.0);
        assert_eq!(binomial_p_at_least(11, 10, 0.5), 0.0);
    }

    #[test]
    fn poisson_binomial_by_hand_and_against_the_binomial() {
        // Rates 1/2 and 1/4: P(X ≥ 1) = 1 − (1/2)(3/4) = 5/8, P(X ≥ 2) = (1/2)(1/4) = 1/8.
        close(poisson_binomial_p_at_least(1, &[0.5, 0.25]), 0.625, 1e-12);
        close(poisson_binomial_p_at_least(2, &[0.5, 0.25]), 0.125, 1e-12);
        assert_eq!(poisson_binomial_p_at_least(3, &[0.5, 0.25]), 0.0);
        // One rate: the binomial tail.
        let rates = vec![0.25; 20];
        close(
            poisson_binomial_p_at_least(10, &rates),
            binomial_p_at_least(10, 20, 0.25),
            1e-12,
        );
    }

    /// `(candidates, needle, right)` as trials.
    fn answers(trials: &[(usize, usize, bool)]) -> Vec<R2Answer> {
        trials
            .iter()
            .map(|&(candidates, needle, right)| R2Answer {
                candidates,
                needle,
                right,
            })
            .collect()
    }

    #[test]
    fn grouped_tails_worked_by_hand() {
        // Needles of 2 and 1 trials at 1/2: S ∈ {0, 1, 2, 3}, each with probability 1/4.
        let g = [(2, 0.5), (1, 0.5)];
        close(grouped_p_at_least(1, &g), 0.75, 1e-12);
        close(grouped_p_at_least(2, &g), 0.5, 1e-12);
        close(grouped_p_at_least(3, &g), 0.25, 1e-12);
        assert_eq!(grouped_p_at_least(4, &g), 0.0);
        // 12 needles of 2 trials at 1/4: S = 2X, X ~ Binomial(12, 1/4); P(S ≥ 12) = P(X ≥ 6)
        // = Σ_{i=6}^{12} C(12, i) 3^(12−i) / 4^12 = 912 718 / 16 777 216.
        close(
            grouped_p_at_least(12, &[(2, 0.25); 12]),
            912_718.0 / 16_777_216.0,
            1e-12,
        );
        // An odd count needs the next even S: P(S ≥ 11) = P(X ≥ 6) too.
        close(
            grouped_p_at_least(11, &[(2, 0.25); 12]),
            grouped_p_at_least(12, &[(2, 0.25); 12]),
            1e-15,
        );
    }

    #[test]
    fn repeated_needles_can_take_a_trial_level_result_below_chance_again() {
        // 12 four-candidate needles, each asked twice; 6 of them right both times: 12 of 24.
        // Over trials p = P(Binomial(24, 1/4) ≥ 12) = 0.0072 (above chance); over needles
        // 0.0544 (a copier keeping one candidate per needle does this one time in 18).
        let trials: Vec<(usize, usize, bool)> = (0..24).map(|i| (4, i % 12, i % 12 < 6)).collect();
        let t = chance_test(&answers(&trials));
        close(t.p_value, binomial_p_at_least(12, 24, 0.25), 1e-12);
        assert!(t.p_value < 0.01, "{}", t.p_value);
        let n = t.by_needle.clone().expect("needle test recorded");
        assert_eq!(
            (n.needles, n.right_every_trial, n.right_no_trial),
            (12, 6, 6)
        );
        close(n.p_value, 912_718.0 / 16_777_216.0, 1e-12);
        assert!(!t.above_chance);
        assert!(t.validate("t").is_ok());
        // The same answers spread over 24 distinct needles: the two tests agree.
        let spread: Vec<(usize, usize, bool)> = (0..24).map(|i| (4, i, i % 12 < 6)).collect();
        let t = chance_test(&answers(&spread));
        let n = t.by_needle.clone().expect("needle test recorded");
        close(n.p_value, t.p_value, 1e-12);
        assert!(t.above_chance);
        // No trial: no needle test.
        assert_eq!(chance_test(&[]).by_needle, None);
    }

    #[test]
    fn the_test_groups_trials_by_candidates_and_flags_chance() {
        // 16 of 50 two-candidate trials: what copying gives; not above chance.
        let coin = answers(&(0..50).map(|i| (2, i, i < 16)).collect::<Vec<_>>());
        let t = chance_test(&coin);
        assert_eq!((t.correct, t.trials, t.above_chance), (16, 50, false));
        close(t.p_value, 0.996_699_776, 1e-8);
        close(t.chance_correct, 25.0, 1e-12);
        assert!(t.validate("t").is_ok());
        // 10 of 20 four-candidate trials (p = 0.0139) and 0 of 2 two-candidate ones: the mix's
        // tail by the recurrence; above chance.
        let mut mix: Vec<(usize, usize, bool)> = (0..20).map(|i| (4, i, i < 10)).collect();
        mix.extend([(2, 20, false), (2, 21, false)]);
        let t = chance_test(&answers(&mix));
        assert_eq!(t.by_candidates.len(), 2);
        assert_eq!(t.by_candidates[0].candidates, 2);
        close(t.by_candidates[1].p_value, 0.013_864_417, 1e-8);
        let mut rates = vec![0.25; 20];
        rates.extend([0.5, 0.5]);
        close(t.p_value, poisson_binomial_p_at_least(10, &rates), 1e-12);
        assert!(t.p_value > t.by_candidates[1].p_value && t.above_chance);
        assert!(t.validate("t").is_ok());
    }
}
