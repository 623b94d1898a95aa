//! What repeats across prompts: clustered intervals and tests, multiplicity, detectable size.
//!
//! Prompts that share a needle, an article or a haystack stretch are not independent: a needle
//! one method misses at one depth it tends to miss at the next. Values here come in **clusters**
//! (a needle's prompts, an article's questions) nested in **groups** (RULER's tasks; one group
//! for NIAH), and every interval and test resamples or weighs clusters, never prompts.
//!
//! - **Cluster bootstrap** ([`cluster_bootstrap`]): clusters drawn with replacement within each
//!   group, the group's statistic the ratio Σ values / Σ prompts of the drawn clusters (so the
//!   point estimate, a mean over prompts, is the statistic of the sample itself), the table's
//!   statistic the mean of the group statistics; the percentile interval of [`RESAMPLES`] such
//!   draws. Davison & Hinkley, *Bootstrap Methods and their Application* (1997) §2.4.2 and §3.8
//!   (resample the first stage of a two-stage sample: the clusters, whole). With one value per
//!   cluster it is Efron's bootstrap of the values, draw for draw.
//! - **Cluster sign test** ([`sign_test`]): under H₀ (two methods exchangeable on every prompt)
//!   each cluster's summed difference `D_k` is symmetric about 0, independently across
//!   clusters. The statistic `T = Σ_g w_g Σ_k D_gk` (`w_g = 1/(G·N_g)`, N_g the group's pairs:
//!   T is the mean of the group means of the differences) then has mean 0 and variance
//!   `V₀ = Σ_g w_g² Σ_k D_gk²`. With at most [`EXACT_UP_TO`] clusters whose differences do not
//!   sum to 0 the p-value is exact: the share of the 2^K sign assignments of those clusters
//!   whose |T| reaches the observed one (Fisher's randomization test; for one pair per cluster
//!   and 0/1 scores, the exact McNemar test). With more, `z = T/√V₀` and the two-sided normal
//!   p: for one group of 0/1 pairs the clustered McNemar test of Durkalski, Palesch, Lipsitz &
//!   Rust ("Analysis of clustered matched-pair data", Statist. Med. 22, 2003, eq. 4:
//!   `X² = (Σ_k (b_k − c_k))² / Σ_k (b_k − c_k)²`), and with one pair per cluster McNemar's
//!   (1947) `(b − c)²/(b + c)`.
//! - **Holm** ([`holm`]): S. Holm, "A simple sequentially rejective multiple test procedure",
//!   Scand. J. Statist. 6 (1979): the i-th smallest of m p-values times (m − i + 1), made
//!   non-decreasing in that order, capped at 1. It controls the family-wise error rate under
//!   any dependence; a table's comparisons are one family.
//! - **Smallest detectable difference** ([`detectable`]): the difference the same test detects
//!   with power 1 − β = 0.8 at two-sided α = 0.05, from the sample's own discordance:
//!   `MDD = (z_{1−α/2} + z_{1−β}) · √V₀ = 2.8016 · √V₀`, the normal approximation of power
//!   with the null variance for both hypotheses (Connor, "Sample size for testing differences in
//!   proportions for the paired-sample design", Biometrics 43, 1987, eq. 3 with δ² ≪ ψ; for one
//!   pair per cluster √V₀ = √(b + c)/N, i.e. `√(ψ/N)` with ψ the discordant share). For 0/1
//!   scores in one group it is at least `(z_{1−α/2} + z_{1−β})² / N = 7.849/N`: that is the MDD
//!   when every discordant pair goes one way (V₀ = δ/N, the least V₀ a difference δ of integer
//!   cluster sums allows), so no smaller difference is detectable whatever the discordance.

use kvplan_common::rng::Rng;
use statrs::distribution::{ContinuousCDF, Normal};

use super::{percentile, Interval};

/// α of every test and detectable difference: 0.05, two-sided.
pub const ALPHA: f64 = 0.05;
/// Power at which the detectable difference is computed.
pub const POWER: f64 = 0.8;
/// Clusters with a non-zero summed difference up to which the sign test is exact (2^16 sign
/// assignments); the normal approximation beyond.
pub const EXACT_UP_TO: usize = 16;

/// Φ⁻¹(p), the standard-normal quantile.
pub fn normal_quantile(p: f64) -> f64 {
    Normal::new(0.0, 1.0).map_or(f64::NAN, |n| n.inverse_cdf(p))
}

/// Φ(x), the standard-normal CDF.
fn normal_cdf(x: f64) -> f64 {
    Normal::new(0.0, 1.0).map_or(f64::NAN, |n| n.cdf(x))
}

/// `z_{1−α/2} + z_{1−β}` for [`ALPHA`] and [`POWER`]: 1.959964 + 0.841621 = 2.801585.
pub fn detectable_factor() -> f64 {
    normal_quantile(1.0 - ALPHA / 2.0) + normal_quantile(POWER)
}

/// Whether every cluster holds one value: the prompts are independent.
pub fn independent<T>(groups: &[Vec<Vec<T>>]) -> bool {
    groups.iter().flatten().all(|c| c.len() == 1)
}

/// Percentile interval of the cluster bootstrap (module header) of the mean of the group
/// statistics, `resamples` draws from `seed`; `None` without a group, with an empty group or
/// cluster, or without resamples.
pub fn cluster_bootstrap(
    groups: &[Vec<Vec<f64>>],
    resamples: usize,
    seed: u64,
    level: f64,
) -> Option<Interval> {
    let empty = groups
        .iter()
        .any(|g| g.is_empty() || g.iter().any(Vec::is_empty));
    if groups.is_empty() || empty || resamples == 0 {
        return None;
    }
    // Each cluster as (sum of its values, its prompts).
    let sums: Vec<Vec<(f64, f64)>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|c| (c.iter().sum::<f64>(), c.len() as f64))
                .collect()
        })
        .collect();
    let mut rng = Rng::new(seed);
    let mut stats = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let mut total = 0.0;
        for g in &sums {
            let (mut a, mut b) = (0.0, 0.0);
            for _ in 0..g.len() {
                let (x, y) = g[rng.below(g.len() as u64) as usize];
                a += x;
                b += y;
            }
            total += a / b;
        }
        stats.push(total / sums.len() as f64);
    }
    Some(percentile(stats, level))
}

/// The cluster sign test's `(T, V₀)` (module header) of the paired differences `groups`.
pub fn sign_statistic(groups: &[Vec<Vec<f64>>]) -> (f64, f64) {
    let used: Vec<&Vec<Vec<f64>>> = groups.iter().filter(|g| !g.is_empty()).collect();
    let g = used.len().max(1) as f64;
    let (mut t, mut v) = (0.0, 0.0);
    for group in used {
        let n: usize = group.iter().map(Vec::len).sum();
        let w = 1.0 / (g * n.max(1) as f64);
        for c in group {
            let d: f64 = c.iter().sum();
            t += w * d;
            v += w * w * d * d;
        }
    }
    (t, v)
}

/// Each cluster's weighted summed difference `w_g·D_gk` (module header), those that are not 0.
fn weighted_sums(groups: &[Vec<Vec<f64>>]) -> Vec<f64> {
    let used: Vec<&Vec<Vec<f64>>> = groups.iter().filter(|g| !g.is_empty()).collect();
    let g = used.len().max(1) as f64;
    let mut out = Vec::new();
    for group in used {
        let n: usize = group.iter().map(Vec::len).sum();
        let w = 1.0 / (g * n.max(1) as f64);
        out.extend(
            group
                .iter()
                .map(|c| w * c.iter().sum::<f64>())
                .filter(|&x| x != 0.0),
        );
    }
    out
}

/// Two-sided p-value of the cluster sign test (module header): exact over the sign
/// assignments up to [`EXACT_UP_TO`] non-zero clusters, the normal approximation beyond; 1 when
/// no cluster's differences sum to other than 0.
pub fn sign_test(groups: &[Vec<Vec<f64>>]) -> f64 {
    let sums = weighted_sums(groups);
    if sums.is_empty() {
        return 1.0;
    }
    let observed: f64 = sums.iter().sum::<f64>().abs();
    if sums.len() <= EXACT_UP_TO {
        // Ties within rounding count as reached.
        let tol = 1e-12 * sums.iter().map(|x| x.abs()).sum::<f64>();
        let total = 1u32 << sums.len();
        let reached = (0..total)
            .filter(|mask| {
                let t: f64 = sums
                    .iter()
                    .enumerate()
                    .map(|(i, x)| if mask >> i & 1 == 1 { -x } else { *x })
                    .sum();
                t.abs() >= observed - tol
            })
            .count();
        return reached as f64 / f64::from(total);
    }
    let v: f64 = sums.iter().map(|x| x * x).sum();
    (2.0 * (1.0 - normal_cdf(observed / v.sqrt()))).clamp(0.0, 1.0)
}

/// The smallest difference the sample could have detected (module header): `2.8016·√V₀`, for
/// 0/1 scores in one group at least `7.849/N`; `None` without pairs, or where no pair differs
/// and the scores are not 0/1 (nothing to say how they would vary).
pub fn detectable(groups: &[Vec<Vec<f64>>], binary_one_group: bool) -> Option<f64> {
    let n: usize = groups.iter().flatten().map(Vec::len).sum();
    if n == 0 {
        return None;
    }
    let k = detectable_factor();
    let (_, v) = sign_statistic(groups);
    let floor = binary_one_group.then(|| k * k / n as f64);
    match (v > 0.0, floor) {
        (true, f) => Some((k * v.sqrt()).max(f.unwrap_or(0.0))),
        (false, f) => f,
    }
}

/// Holm's adjusted p-values (module header), in the order given.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let adjusted = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adjusted);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{bootstrap, LEVEL, RESAMPLES, SEED};

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn singletons(v: &[f64]) -> Vec<Vec<f64>> {
        v.iter().map(|&x| vec![x]).collect()
    }

    #[test]
    fn two_clusters_of_identical_values_are_two_observations_not_fifty() {
        // Needle A found at all 25 depths, needle B at none. Resampling needles, a draw is AA
        // (mean 1), AB or BA (½) or BB (0) with chances ¼, ½, ¼: the 50th of 2000 sorted means
        // is 0 and the 1950th is 1 (P[fewer than 50 BB draws] ≈ 10⁻¹⁰⁰). Resampling the 50
        // prompts as if independent gives ½ ± 1.96·½/√50 ≈ [0.36, 0.64].
        let clusters = vec![vec![1.0; 25], vec![0.0; 25]];
        let i = cluster_bootstrap(&[clusters], RESAMPLES, SEED, LEVEL).expect("clusters");
        assert_eq!(i, Interval { lo: 0.0, hi: 1.0 });
        let flat: Vec<f64> = [vec![1.0; 25], vec![0.0; 25]].concat();
        let p = bootstrap(&[flat], RESAMPLES, SEED, LEVEL).expect("values");
        assert!(p.lo > 0.3 && p.hi < 0.7, "{p:?}");
    }

    #[test]
    fn repeated_clusters_widen_the_interval_by_the_root_of_their_size() {
        // Ten needles, five prompts each, each needle all-or-nothing (5 found, 5 not): the
        // effective n is 10, so the interval is √5 ≈ 2.24 times the 50-prompt one (normal
        // widths 2·1.96·½/√10 = 0.62 and 2·1.96·½/√50 = 0.277).
        let clusters: Vec<Vec<f64>> = (0..10).map(|k| vec![(k % 2) as f64; 5]).collect();
        let c =
            cluster_bootstrap(std::slice::from_ref(&clusters), RESAMPLES, SEED, LEVEL).expect("ok");
        let flat = singletons(&clusters.concat());
        let f = cluster_bootstrap(&[flat], RESAMPLES, SEED, LEVEL).expect("ok");
        assert!(close(c.hi - c.lo, 0.62, 0.08), "{c:?}");
        assert!(close(f.hi - f.lo, 0.277, 0.04), "{f:?}");
        let ratio = (c.hi - c.lo) / (f.hi - f.lo);
        assert!(close(ratio, 5f64.sqrt(), 0.35), "{ratio}");
    }

    #[test]
    fn one_value_per_cluster_is_efrons_bootstrap_draw_for_draw() {
        let v: Vec<f64> = (0..23).map(|i| (i % 4) as f64 / 3.0).collect();
        let groups = [v.clone(), vec![0.5, 1.0, 0.0]];
        let plain = bootstrap(&groups, RESAMPLES, SEED, LEVEL);
        let clustered: Vec<Vec<Vec<f64>>> = groups.iter().map(|g| singletons(g)).collect();
        assert_eq!(plain, cluster_bootstrap(&clustered, RESAMPLES, SEED, LEVEL));
        assert!(independent(&clustered));
        assert!(!independent(&[vec![vec![1.0, 0.0]]]));
        assert_eq!(
            cluster_bootstrap(&[vec![vec![]]], RESAMPLES, SEED, LEVEL),
            None
        );
    }

    #[test]
    fn clusters_resampled_within_their_group() {
        // Two tasks: every cluster of the first scores 1, of the second 0; the mean of group
        // means is ½ whatever is drawn.
        let groups = vec![vec![vec![1.0, 1.0], vec![1.0]], vec![vec![0.0; 3]]];
        let i = cluster_bootstrap(&groups, RESAMPLES, SEED, LEVEL).expect("ok");
        assert_eq!(i, Interval { lo: 0.5, hi: 0.5 });
    }

    #[test]
    fn sign_test_is_exact_over_few_clusters() {
        // Three needles of 4 pairs each with (wins − losses) 3, 1, −1: T = 3/12 = 0.25,
        // V₀ = (9 + 1 + 1)/144. Of the 8 sign assignments of (3, 1, −1) the sums are ±5, ±3,
        // ±3, ±1: 6 reach |3|, p = 6/8 = 0.75.
        let c = |w: usize, l: usize| {
            let mut v = vec![1.0; w];
            v.extend(vec![-1.0; l]);
            v.resize(4, 0.0);
            v
        };
        let groups = vec![vec![c(3, 0), c(2, 1), c(0, 1)]];
        let (t, v) = sign_statistic(&groups);
        assert!(close(t, 0.25, 1e-12) && close(v, 11.0 / 144.0, 1e-12));
        assert!(close(sign_test(&groups), 0.75, 1e-12));
        // One pair per cluster, 0/1 scores: the exact McNemar test. 6 wins, 0 losses, 4 ties:
        // 2·2⁻⁶ = 0.03125; 9 wins and 1 loss: 2·11/1024 = 0.021484375.
        let mut six = vec![1.0; 6];
        six.resize(10, 0.0);
        assert!(close(sign_test(&[singletons(&six)]), 0.031_25, 1e-12));
        let mut nine = vec![1.0; 9];
        nine.push(-1.0);
        assert!(close(sign_test(&[singletons(&nine)]), 0.021_484_375, 1e-12));
        // One needle holding every difference: nothing to compare it with, p = 1.
        assert_eq!(sign_test(&[vec![vec![1.0; 10]]]), 1.0);
        assert_eq!(sign_test(&[vec![vec![0.0, 0.0]]]), 1.0);
    }

    #[test]
    fn sign_test_is_durkalskis_clustered_mcnemar_over_many_clusters() {
        // 20 needles of 2 pairs: 15 with one win, 5 with one loss (20 clusters not 0 > 16:
        // the normal approximation). T = 10/40, V₀ = 20/1600, z = 10/√20 = 2.236068,
        // p = 2(1 − Φ(z)) = 0.025347.
        let mut needles: Vec<Vec<f64>> = (0..15).map(|_| vec![1.0, 0.0]).collect();
        needles.extend((0..5).map(|_| vec![-1.0, 0.0]));
        let p = sign_test(&[needles]);
        assert!(close(p, 0.025_347, 1e-5), "{p}");
        // Two groups (tasks) of 20 singletons: the same 15/5 in one, ties in the other; the
        // weights halve T and V₀'s root alike, so z and p are unchanged.
        let mut a: Vec<f64> = vec![1.0; 15];
        a.extend([-1.0; 5]);
        let p2 = sign_test(&[singletons(&a), singletons(&[0.0; 20])]);
        assert!(close(p2, 0.025_347, 1e-5), "{p2}");
    }

    #[test]
    fn detectable_difference_from_the_discordance() {
        // 50 independent pairs, 6 won and 4 lost: √V₀ = √10/50 = 0.0632456, MDD =
        // 2.801585·0.0632456 = 0.177188, above the floor 7.848880/50 = 0.156978.
        let mut d = vec![1.0; 6];
        d.extend([-1.0; 4]);
        d.resize(50, 0.0);
        let m = detectable(&[singletons(&d)], true).expect("pairs");
        assert!(close(m, 0.177_188, 1e-5), "{m}");
        // One discordant pair: 2.8016/50 = 0.056 is below the floor, which holds.
        let mut one = vec![1.0];
        one.resize(50, 0.0);
        let m = detectable(&[singletons(&one)], true).expect("pairs");
        assert!(close(m, 0.156_978, 1e-5), "{m}");
        // No pair differs: the floor for pass rates, nothing for other scores.
        let ties = vec![singletons(&[0.0; 50])];
        assert!(close(
            detectable(&ties, true).unwrap_or(0.0),
            0.156_978,
            1e-5
        ));
        assert_eq!(detectable(&ties, false), None);
        // The same 10 discordant pairs in 2 needles (6 wins in one, 4 losses in the other):
        // √V₀ = √(36 + 16)/50 = 0.144222, MDD = 0.404050, 2.3 times the independent one.
        let mut a = vec![1.0; 6];
        a.resize(25, 0.0);
        let mut b = vec![-1.0; 4];
        b.resize(25, 0.0);
        let m = detectable(&[vec![a, b]], true).expect("pairs");
        assert!(close(m, 0.404_050, 1e-5), "{m}");
        assert!(close(detectable_factor(), 2.801_585, 1e-6));
    }

    #[test]
    fn holm_multiplies_by_the_remaining_count_and_keeps_the_order() {
        // Sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04, made
        // non-decreasing: 0.02, 0.03, 0.06, 0.06; back in the order given.
        let adj = holm(&[0.01, 0.04, 0.03, 0.005]);
        let want = [0.03, 0.06, 0.06, 0.02];
        for (a, w) in adj.iter().zip(want) {
            assert!(close(*a, w, 1e-12), "{adj:?}");
        }
        // Capped at 1; one p-value is its own adjustment; none gives none.
        assert_eq!(holm(&[0.5, 0.9]), vec![1.0, 1.0]);
        assert_eq!(holm(&[0.04]), vec![0.04]);
        assert!(holm(&[]).is_empty());
    }
}
