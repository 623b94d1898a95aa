//! Retrieval-reasoning answers against the copying rate (see `kvplan_planner::chance`).
//!
//! A needle with k statements of the answer's shape is answered right 1/k of the time by a model
//! that copies one at random. The one-sided exact p of `correct` right answers is the upper tail
//! P(X ≥ correct) of the copier's count X: binomial for trials of one k (statrs'
//! `Binomial::sf(correct − 1)`), and over a mix of k's the Poisson-binomial tail, computed exactly
//! by the convolution recurrence P_{t}(j) = P_{t−1}(j)(1 − p_t) + P_{t−1}(j − 1) p_t.

use kvplan_planner::{ChanceGroup, ChanceTest};
use statrs::distribution::{Binomial, DiscreteCDF};

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
    if correct == 0 {
        return 1.0;
    }
    if correct > rates.len() {
        return 0.0;
    }
    // pmf[j] = P(j successes among the trials so far).
    let mut pmf = vec![0.0; rates.len() + 1];
    pmf[0] = 1.0;
    for (t, &p) in rates.iter().enumerate() {
        for j in (0..=t + 1).rev() {
            let stay = pmf[j] * (1.0 - p);
            let step = if j > 0 { pmf[j - 1] * p } else { 0.0 };
            pmf[j] = stay + step;
        }
    }
    pmf[correct..].iter().sum::<f64>().clamp(0.0, 1.0)
}

/// The test of R2 trials given as `(candidates k ≥ 2, answered right)`.
pub fn chance_test(trials: &[(usize, bool)]) -> ChanceTest {
    let rates: Vec<f64> = trials.iter().map(|&(k, _)| 1.0 / k as f64).collect();
    let correct = trials.iter().filter(|t| t.1).count();
    let mut ks: Vec<usize> = trials.iter().map(|t| t.0).collect();
    ks.sort_unstable();
    ks.dedup();
    let by_candidates = ks
        .into_iter()
        .map(|k| {
            let n = trials.iter().filter(|t| t.0 == k).count();
            let c = trials.iter().filter(|t| t.0 == k && t.1).count();
            ChanceGroup::new(k, n, c, binomial_p_at_least(c, n, 1.0 / k as f64))
        })
        .collect::<Vec<_>>();
    // One k: the group's binomial p itself (the recurrence gives the same up to rounding).
    let p_value = match by_candidates.as_slice() {
        [one] => one.p_value,
        _ => poisson_binomial_p_at_least(correct, &rates),
    };
    ChanceTest::new(
        trials.len(),
        correct,
        rates.iter().sum(),
        p_value,
        by_candidates,
    )
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

    #[test]
    fn the_test_groups_trials_by_candidates_and_flags_chance() {
        // 16 of 50 two-candidate trials: what copying gives; not above chance.
        let coin: Vec<(usize, bool)> = (0..50).map(|i| (2, i < 16)).collect();
        let t = chance_test(&coin);
        assert_eq!((t.correct, t.trials, t.above_chance), (16, 50, false));
        close(t.p_value, 0.996_699_776, 1e-8);
        close(t.chance_correct, 25.0, 1e-12);
        assert!(t.validate("t").is_ok());
        // 10 of 20 four-candidate trials (p = 0.0139) and 0 of 2 two-candidate ones: the mix's
        // tail by the recurrence; above chance.
        let mut mix: Vec<(usize, bool)> = (0..20).map(|i| (4, i < 10)).collect();
        mix.extend([(2, false), (2, false)]);
        let t = chance_test(&mix);
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
