//! Intervals and paired comparisons behind every table entry.
//!
//! - **Pass rates of independent prompts** (means of 0/1 scores, one prompt per cluster: every
//!   NIAH prompt its own needle): the Wilson score interval (E. B. Wilson, "Probable inference,
//!   the law of succession, and statistical inference", JASA 22, 1927), `(p̂ + z²/2n ±
//!   z·√(p̂(1−p̂)/n + z²/4n²)) / (1 + z²/n)`. Unlike the normal (Wald) interval it is never
//!   empty at 0/n or n/n.
//! - **Everything else** (prompts that share a needle or an article, fractions of references
//!   found, an average over tasks, paired differences): the percentile bootstrap (B. Efron,
//!   "Bootstrap methods: another look at the jackknife", Ann. Statist. 7, 1979; Efron &
//!   Tibshirani 1993 §13.3) resampling **clusters** — whatever repeats across prompts — within
//!   each group (RULER's tasks, a stratified bootstrap), the statistic the mean of the group
//!   means as RULER averages tasks ([`cluster`]). With one prompt per cluster it is the
//!   bootstrap of the prompts. [`RESAMPLES`] resamples, the interval between their α/2 and
//!   1 − α/2 order statistics ([`order_statistic`]); the project's SplitMix64 generator with the
//!   fixed seed [`SEED`], so every table is reproducible to the byte. A group of one cluster
//!   (a RULER task run on one example, prompts that all share one needle) gives the resampling
//!   nothing to draw: it would add no spread for that group, and an average over such groups
//!   would get an interval of width 0. [`estimate`] and [`paired`] give no interval then
//!   ([`resamplable`]); the stratified bootstrap needs two clusters in every stratum.
//! - **Paired comparisons** of two methods on the same prompts: the mean difference with the
//!   cluster bootstrap interval over the prompt pairs; for 0/1 scores of independent prompts in
//!   one group the exact McNemar test (a two-sided sign test on the discordant pairs,
//!   Q. McNemar, Psychometrika 12, 1947): `p = min(1, 2·P[X ≤ min(b, c)])`, X ~ Binomial(b + c,
//!   ½); otherwise the cluster sign test ([`cluster::sign_test`], Durkalski et al. 2003 for
//!   clustered pass rates). Each comparison also carries the smallest difference its sample
//!   could have detected ([`cluster::detectable`]); Holm's correction across a table's
//!   comparisons is [`cluster::holm`].
//!
//! The normal quantile is statrs's; the binomial CDF of the sign test is summed exactly up to
//! 1000 pairs, statrs's beyond.

pub mod cluster;

pub use cluster::{cluster_bootstrap, detectable, holm, independent, sign_test};

use kvplan_common::rng::Rng;
use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal};

/// Coverage of every interval: 95%.
pub const LEVEL: f64 = 0.95;
/// Bootstrap resamples per interval (Efron & Tibshirani recommend at least 1000 for percentile
/// intervals).
pub const RESAMPLES: usize = 2000;
/// Seed of every bootstrap.
pub const SEED: u64 = 0x6b76_706c_616e; // "kvplan"

/// A closed interval `[lo, hi]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// Whether `x` lies in the interval (ends included).
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// How an interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Wilson score interval of a pass rate.
    Wilson,
    /// Percentile bootstrap of a mean, one prompt per cluster.
    Bootstrap,
    /// Percentile bootstrap resampling clusters of prompts ([`cluster::cluster_bootstrap`]).
    ClusterBootstrap,
}

/// How a paired comparison's p-value was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// Exact McNemar (sign) test: 0/1 scores of independent prompts, one group.
    McNemar,
    /// The cluster sign test ([`cluster::sign_test`]).
    ClusterSign,
}

/// A mean with its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// The mean (of the group means, for groups).
    pub mean: f64,
    /// Values behind it.
    pub n: usize,
    /// Clusters behind it (`n` when every prompt is its own).
    pub clusters: usize,
    /// Its [`LEVEL`] interval; `None` where a group holds one cluster ([`resamplable`]).
    pub interval: Option<Interval>,
    /// How the interval was made (or would be, given a second cluster in each group).
    pub method: Method,
}

/// A paired comparison: mean of (a − b) over prompts scored under both.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Pairs behind it.
    pub n: usize,
    /// Clusters behind it (`n` when every prompt is its own).
    pub clusters: usize,
    /// Mean difference (of the group means, for groups).
    pub mean: f64,
    /// (Cluster) bootstrap [`LEVEL`] interval of the mean difference; `None` where a group
    /// holds one cluster ([`resamplable`]).
    pub interval: Option<Interval>,
    /// Two-sided p-value of no difference, made by `test`.
    pub p_value: Option<f64>,
    /// How `p_value` was made.
    pub test: Test,
    /// The smallest difference this sample could have detected ([`cluster::detectable`]).
    pub detectable: Option<f64>,
    /// Pairs whose two scores differ (0: the two rows scored alike on every prompt).
    pub differing: usize,
}

/// The two-sided standard-normal quantile of `level`: 1.959964 for 0.95.
pub fn z(level: f64) -> f64 {
    let (mean, sd) = (0.0, 1.0);
    match Normal::new(mean, sd) {
        Ok(n) => n.inverse_cdf(0.5 + level / 2.0),
        Err(_) => f64::NAN,
    }
}

/// The Wilson score interval of `successes` out of `n` at `level`; `None` when `n` is 0.
pub fn wilson(successes: usize, n: usize, level: f64) -> Option<Interval> {
    if n == 0 || successes > n {
        return None;
    }
    let (n, z) = (n as f64, z(level));
    let p = successes as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    // At 0/n and n/n the end is exactly 0 or 1 (centre ∓ half there only in rounding).
    let lo = if successes == 0 { 0.0 } else { centre - half };
    let hi = if successes as f64 == n {
        1.0
    } else {
        centre + half
    };
    Some(Interval {
        lo: lo.max(0.0),
        hi: hi.min(1.0),
    })
}

/// Whether every value is exactly 0 or 1 (a pass rate).
pub fn is_binary(values: &[f64]) -> bool {
    values.iter().all(|&v| v == 0.0 || v == 1.0)
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Mean of the group means.
fn mean_of_means(groups: &[Vec<f64>]) -> f64 {
    let means: Vec<f64> = groups.iter().map(|g| mean(g)).collect();
    mean(&means)
}

/// The `q` quantile of sorted `v` as an order statistic: the ⌊q·B⌋-th value for the lower end,
/// the ⌈q·B⌉-th for the upper end (1-based), so a [`LEVEL`] interval of B = 2000 means runs from
/// the 50th to the 1950th.
fn order_statistic(sorted: &[f64], q: f64, upper: bool) -> f64 {
    let b = sorted.len() as f64;
    let k = if upper {
        (q * b).ceil()
    } else {
        (q * b).floor()
    };
    let i = (k as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// The `level` percentile interval of the bootstrap statistics `stats` (sorted here): from
/// the ⌊(α/2)·B⌋-th to the ⌈(1 − α/2)·B⌉-th.
pub(crate) fn percentile(mut stats: Vec<f64>, level: f64) -> Interval {
    stats.sort_by(f64::total_cmp);
    let alpha = 1.0 - level;
    Interval {
        lo: order_statistic(&stats, alpha / 2.0, false),
        hi: order_statistic(&stats, 1.0 - alpha / 2.0, true),
    }
}

/// Percentile bootstrap interval of the mean of the group means, each group resampled within
/// itself (`resamples` draws from `seed`); `None` when a group is empty or there is none. The
/// [`cluster_bootstrap`] of one value per cluster.
pub fn bootstrap(groups: &[Vec<f64>], resamples: usize, seed: u64, level: f64) -> Option<Interval> {
    let clustered: Vec<Vec<Vec<f64>>> = groups
        .iter()
        .map(|g| g.iter().map(|&v| vec![v]).collect())
        .collect();
    cluster_bootstrap(&clustered, resamples, seed, level)
}

/// Percentile bootstrap interval of the ratio Σa / Σb over `blocks` of (a, b) pairs, resampled
/// with replacement (a block bootstrap of a mean over tokens: a = a block's summed loss, b its
/// token count); `None` without blocks or with Σb = 0.
pub fn bootstrap_ratio(
    blocks: &[(f64, f64)],
    resamples: usize,
    seed: u64,
    level: f64,
) -> Option<Interval> {
    if blocks.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = Rng::new(seed);
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let (mut a, mut b) = (0.0, 0.0);
        for _ in 0..blocks.len() {
            let (x, y) = blocks[rng.below(blocks.len() as u64) as usize];
            a += x;
            b += y;
        }
        if b <= 0.0 {
            return None;
        }
        ratios.push(a / b);
    }
    Some(percentile(ratios, level))
}

/// The mean of the group means (each over its prompts) with its [`LEVEL`] interval; `groups`
/// hold clusters of values. Wilson when there is one group of 0/1 scores of independent prompts
/// (one per cluster), else the seeded (cluster) percentile bootstrap, given two clusters in every
/// group ([`resamplable`]; no interval otherwise); `None` without values.
pub fn estimate(groups: &[Vec<Vec<f64>>]) -> Option<Estimate> {
    let groups = non_empty(groups);
    if groups.is_empty() {
        return None;
    }
    let n = groups.iter().flatten().map(Vec::len).sum();
    let clusters = groups.iter().map(Vec::len).sum();
    let mean = mean_of_means(&flatten(&groups));
    let indep = independent(&groups);
    if let ([only], true) = (groups.as_slice(), indep) {
        let values: Vec<f64> = only.concat();
        if is_binary(&values) {
            let passed = values.iter().filter(|&&v| v == 1.0).count();
            let interval = wilson(passed, values.len(), LEVEL)?;
            return Some(Estimate {
                mean,
                n,
                clusters,
                interval: Some(interval),
                method: Method::Wilson,
            });
        }
    }
    let interval = resamplable(&groups)
        .then(|| cluster_bootstrap(&groups, RESAMPLES, SEED, LEVEL))
        .flatten();
    let method = if indep {
        Method::Bootstrap
    } else {
        Method::ClusterBootstrap
    };
    Some(Estimate {
        mean,
        n,
        clusters,
        interval,
        method,
    })
}

/// Whether every group holds at least two clusters: the stratified bootstrap resamples within
/// each group, and a group of one cluster draws that cluster every time.
pub fn resamplable<T>(groups: &[Vec<Vec<T>>]) -> bool {
    !groups.is_empty() && groups.iter().all(|g| g.len() >= 2)
}

/// `groups` without empty clusters, and without groups left empty.
fn non_empty<T: Clone>(groups: &[Vec<Vec<T>>]) -> Vec<Vec<Vec<T>>> {
    groups
        .iter()
        .map(|g| {
            g.iter()
                .filter(|c| !c.is_empty())
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|g| !g.is_empty())
        .collect()
}

/// Each group's values, clusters joined.
fn flatten(groups: &[Vec<Vec<f64>>]) -> Vec<Vec<f64>> {
    groups.iter().map(|g| g.concat()).collect()
}

/// The exact McNemar (sign test) two-sided p-value of `wins` pairs won by one side and `losses`
/// won by the other (ties carry no information): 1 without discordant pairs.
pub fn mcnemar(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    (2.0 * binomial_half_cdf(n, wins.min(losses))).min(1.0)
}

/// P[X ≤ k] for X ~ Binomial(n, ½): summed term by term (C(n, i+1) = C(n, i)·(n−i)/(i+1)), exact
/// to rounding, up to n = 1000 (2⁻ⁿ stays a normal f64); statrs's beyond.
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    if n > 1000 {
        return Binomial::new(0.5, n as u64).map_or(f64::NAN, |b| b.cdf(k as u64));
    }
    let mut term = 0.5f64.powi(n as i32);
    let mut sum = term;
    for i in 0..k.min(n) {
        term *= (n - i) as f64 / (i + 1) as f64;
        sum += term;
    }
    sum
}

/// The paired comparison of `(a, b)` score pairs, grouped and clustered as [`estimate`]'s
/// values: the mean of the group means of a − b, its (cluster) bootstrap interval (given two
/// clusters in every group, [`resamplable`]), the p-value
/// (exact McNemar for 0/1 scores of independent prompts in one group, else the cluster sign
/// test) and the smallest detectable difference; `None` without pairs.
pub fn paired(groups: &[Vec<Vec<(f64, f64)>>]) -> Option<Paired> {
    let groups = non_empty(groups);
    if groups.is_empty() {
        return None;
    }
    let diffs: Vec<Vec<Vec<f64>>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|c| c.iter().map(|(a, b)| a - b).collect())
                .collect()
        })
        .collect();
    let interval = resamplable(&diffs)
        .then(|| cluster_bootstrap(&diffs, RESAMPLES, SEED, LEVEL))
        .flatten();
    let pairs: Vec<(f64, f64)> = groups.iter().flatten().flatten().copied().collect();
    let binary = pairs.iter().all(|&(a, b)| is_binary(&[a, b]));
    let one_group = groups.len() == 1;
    let (p_value, test) = if binary && one_group && independent(&groups) {
        let wins = pairs.iter().filter(|(a, b)| a > b).count();
        let losses = pairs.iter().filter(|(a, b)| a < b).count();
        (mcnemar(wins, losses), Test::McNemar)
    } else {
        (sign_test(&diffs), Test::ClusterSign)
    };
    Some(Paired {
        n: pairs.len(),
        clusters: groups.iter().map(Vec::len).sum(),
        mean: mean_of_means(&flatten(&diffs)),
        interval,
        p_value: Some(p_value),
        test,
        detectable: detectable(&diffs, binary && one_group),
        differing: pairs.iter().filter(|(a, b)| a != b).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// One prompt per cluster.
    fn ind<T: Copy>(v: &[T]) -> Vec<Vec<T>> {
        v.iter().map(|&x| vec![x]).collect()
    }

    #[test]
    fn normal_quantile_is_the_familiar_one() {
        assert!(close(z(0.95), 1.959_964, 1e-6), "{}", z(0.95));
        assert!(close(z(0.90), 1.644_854, 1e-6));
    }

    #[test]
    fn wilson_matches_hand_worked_intervals() {
        // 7/10: z² = 3.841459, centre (0.7 + 0.192073)/1.384146 = 0.644493, half
        // 1.959964·√(0.021 + 0.000960)/1.384146 = 0.247715 → [0.3968, 0.8922].
        let i = wilson(7, 10, 0.95).expect("n > 0");
        assert!(
            close(i.lo, 0.396_778, 1e-5) && close(i.hi, 0.892_209, 1e-5),
            "{i:?}"
        );
        // 0/50: [0, (z²/n)/(1 + z²/n)] = [0, 0.071348]; 50/50 mirrors it.
        let none = wilson(0, 50, 0.95).expect("n > 0");
        assert!(
            none.lo == 0.0 && close(none.hi, 0.071_348, 1e-5),
            "{none:?}"
        );
        let all = wilson(50, 50, 0.95).expect("n > 0");
        assert!(
            close(all.lo, 1.0 - 0.071_348, 1e-5) && all.hi == 1.0,
            "{all:?}"
        );
        assert_eq!(wilson(0, 0, 0.95), None);
        assert_eq!(wilson(3, 2, 0.95), None);
    }

    #[test]
    fn estimate_uses_wilson_for_pass_rates_and_the_bootstrap_otherwise() {
        let pass = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0];
        let e = estimate(&[ind(&pass)]).expect("values");
        assert_eq!((e.method, e.n), (Method::Wilson, 10));
        let lo = e.interval.map(|i| i.lo).unwrap_or(f64::NAN);
        assert!(close(e.mean, 0.7, 1e-12) && close(lo, 0.396_778, 1e-5));
        let frac = estimate(&[ind(&[0.5, 0.25, 1.0, 0.75])]).expect("values");
        assert_eq!(frac.method, Method::Bootstrap);
        let i = frac.interval.expect("four prompts");
        assert!(i.contains(frac.mean) && i.lo >= 0.25);
        assert_eq!(estimate(&[]), None);
        // The same pass rates from 2 needles of 5 prompts: the cluster bootstrap, not Wilson.
        let needles = [vec![pass[..5].to_vec(), pass[5..].to_vec()]];
        let c = estimate(&needles).expect("values");
        assert_eq!(
            (c.method, c.n, c.clusters),
            (Method::ClusterBootstrap, 10, 2)
        );
        assert!(close(c.mean, 0.7, 1e-12));
        // One pass rate of one prompt keeps its Wilson interval; five prompts of one needle get
        // none (the cluster bootstrap would draw that needle every time: width 0).
        let one = estimate(&[ind(&[1.0])]).expect("value");
        assert_eq!(one.method, Method::Wilson);
        assert!(one.interval.is_some_and(|i| i.lo > 0.0 && i.hi == 1.0));
        let needle = estimate(&[vec![pass[..5].to_vec()]]).expect("values");
        assert_eq!((needle.clusters, needle.interval), (1, None));
    }

    #[test]
    fn bootstrap_of_constant_data_has_zero_width() {
        let i = bootstrap(&[vec![0.4; 30]], RESAMPLES, SEED, LEVEL).expect("values");
        assert!(close(i.lo, 0.4, 1e-12) && close(i.hi, 0.4, 1e-12), "{i:?}");
        assert_eq!(bootstrap(&[vec![]], RESAMPLES, SEED, LEVEL), None);
    }

    #[test]
    fn bootstrap_is_seeded_contains_the_mean_and_narrows_with_n() {
        let small: Vec<f64> = (0..20).map(|i| (i % 5) as f64 / 4.0).collect();
        let a = bootstrap(std::slice::from_ref(&small), RESAMPLES, SEED, LEVEL).expect("values");
        let b = bootstrap(std::slice::from_ref(&small), RESAMPLES, SEED, LEVEL).expect("values");
        assert_eq!(a, b, "same seed, same interval");
        let c =
            bootstrap(std::slice::from_ref(&small), RESAMPLES, SEED + 1, LEVEL).expect("values");
        assert_ne!(a, c, "another seed, other resamples");
        assert!(
            a.contains(mean(&small)) && a.lo > 0.0 && a.hi < 1.0,
            "{a:?}"
        );
        // Mean 0.5, sd 0.3536: the normal interval is ±1.96·0.3536/√20 = ±0.155.
        assert!(close(a.hi - a.lo, 0.31, 0.05), "{a:?}");
        let big: Vec<f64> = small.iter().cycle().take(500).copied().collect();
        let d = bootstrap(&[big], RESAMPLES, SEED, LEVEL).expect("values");
        assert!(d.hi - d.lo < (a.hi - a.lo) / 3.0, "{d:?} vs {a:?}");
    }

    #[test]
    fn stratified_bootstrap_averages_group_means() {
        // Group means 1 and 0 whatever is drawn: the mean of means is 0.5, the interval [0.5, 0.5],
        // though pooling the 4 + 2 values would give 0.67.
        let groups = [vec![1.0; 4], vec![0.0; 2]];
        let groups: Vec<Vec<Vec<f64>>> = groups.iter().map(|g| ind(g)).collect();
        let e = estimate(&groups).expect("values");
        assert_eq!((e.mean, e.n, e.method), (0.5, 6, Method::Bootstrap));
        assert_eq!(e.interval, Some(Interval { lo: 0.5, hi: 0.5 }));
        // A task of one prompt: the mean of means still, but no interval — resampling that task
        // draws its one prompt every time, so its score would count as known exactly. Two tasks
        // of one prompt each (one example a task) would otherwise get [0.5, 0.5].
        let single = [ind(&[1.0, 1.0, 0.0, 1.0]), ind(&[0.0])];
        let s = estimate(&single).expect("values");
        assert_eq!((s.mean, s.n, s.interval), (0.375, 5, None));
        let one_each = estimate(&[ind(&[1.0]), ind(&[0.0])]).expect("values");
        assert_eq!((one_each.mean, one_each.interval), (0.5, None));
        assert!(!resamplable(&[ind(&[1.0]), ind(&[0.0, 1.0])]));
        assert!(resamplable(&[ind(&[1.0, 0.0]), ind(&[0.0, 1.0])]));
        assert!(!resamplable::<f64>(&[]));
    }

    #[test]
    fn ratio_bootstrap_weighs_blocks_by_their_size() {
        // Equal per-token means in every block: the ratio is 2 whatever is drawn.
        let even = [(20.0, 10.0), (4.0, 2.0), (64.0, 32.0)];
        let i = bootstrap_ratio(&even, RESAMPLES, SEED, LEVEL).expect("blocks");
        assert!(close(i.lo, 2.0, 1e-12) && close(i.hi, 2.0, 1e-12), "{i:?}");
        // Blocks of mean 1 and 3, equal sizes: the interval straddles 2 within [1, 3].
        let mixed: Vec<(f64, f64)> = (0..40)
            .map(|k| (if k % 2 == 0 { 8.0 } else { 24.0 }, 8.0))
            .collect();
        let m = bootstrap_ratio(&mixed, RESAMPLES, SEED, LEVEL).expect("blocks");
        assert!(m.contains(2.0) && m.lo > 1.0 && m.hi < 3.0, "{m:?}");
        // sd of a block mean 1, 40 blocks: ±1.96/√40 = ±0.31.
        assert!(close(m.hi - m.lo, 0.62, 0.1), "{m:?}");
        assert_eq!(bootstrap_ratio(&[], RESAMPLES, SEED, LEVEL), None);
    }

    #[test]
    fn mcnemar_is_the_exact_sign_test() {
        // 0 wins, 6 losses: 2 · 2⁻⁶ = 0.03125; 1 and 9: 2 · (1 + 10)/1024 = 0.021484.
        assert!(close(mcnemar(0, 6), 0.031_25, 1e-9));
        assert!(close(mcnemar(9, 1), 0.021_484_375, 1e-9));
        assert_eq!(mcnemar(3, 3), 1.0);
        assert_eq!(mcnemar(0, 0), 1.0);
        // 2 wins of 10 discordant: 2 · (1 + 10 + 45)/1024 = 0.109375, exactly.
        assert_eq!(mcnemar(2, 8), 0.109_375);
        // Past 1000 pairs statrs's CDF: 600 of 1200, P[X ≤ 600] = ½ + P[X = 600]/2 ≈ 0.5115.
        assert!(close(mcnemar(600, 600), 1.0, 1e-9));
        assert!(close(binomial_half_cdf(1200, 600), 0.511_5, 1e-3));
    }

    #[test]
    fn paired_difference_of_pass_rates() {
        // 10 prompts: a wins 6, loses 0, ties 4 → mean +0.6, p 0.03125, interval above 0.
        let mut pairs = vec![(1.0, 0.0); 6];
        pairs.extend([(1.0, 1.0), (0.0, 0.0), (1.0, 1.0), (0.0, 0.0)]);
        let p = paired(&[ind(&pairs)]).expect("pairs");
        assert_eq!((p.n, p.differing), (10, 6));
        assert!(close(p.mean, 0.6, 1e-12) && close(p.p_value.unwrap_or(0.0), 0.031_25, 1e-9));
        assert!(
            p.interval.is_some_and(|i| i.lo > 0.0 && i.contains(0.6)),
            "{p:?}"
        );
        // Identical scores: difference 0 exactly, cannot be told apart.
        let same = paired(&[ind(&[(1.0, 1.0), (0.0, 0.0)])]).expect("pairs");
        assert_eq!(
            (same.mean, same.interval, same.p_value, same.differing),
            (0.0, Some(Interval { lo: 0.0, hi: 0.0 }), Some(1.0), 0)
        );
        assert_eq!(p.test, Test::McNemar);
        // Fractions or several groups: the cluster sign test. Group means of the differences
        // 0.5 and 0: one cluster differs, its two signs give |T| = 0.25 both: p = 1.
        let groups = [ind(&[(0.5, 0.0)]), ind(&[(1.0, 1.0)])];
        let g = paired(&groups).expect("pairs");
        assert_eq!((g.mean, g.test, g.clusters), (0.25, Test::ClusterSign, 2));
        assert_eq!((g.p_value, g.interval), (Some(1.0), None));
        // The six wins above in two needles of three: McNemar gives way to the cluster test,
        // D = 3, 3 and four ties alone: of the sign assignments (±3 ± 3) two reach 6, p = ½.
        let needles = vec![
            vec![(1.0, 0.0); 3],
            vec![(1.0, 0.0); 3],
            vec![(1.0, 1.0)],
            vec![(0.0, 0.0)],
            vec![(1.0, 1.0)],
            vec![(0.0, 0.0)],
        ];
        let c = paired(&[needles]).expect("pairs");
        assert_eq!((c.n, c.clusters, c.test), (10, 6, Test::ClusterSign));
        assert_eq!(c.p_value, Some(0.5));
        assert_eq!(paired(&[vec![]]), None);
    }
}
