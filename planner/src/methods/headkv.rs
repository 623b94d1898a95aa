//! HeadKV (`docs/papers/headkv.md` §3, App. E–F): per-head budgets from head importance scores — a shared
//! pool handed out in proportion to each KV head's score (eq. 4, β; the allocator below), SnapKV
//! selection inside each head. One section type serves both table entries: `headkv` uses the
//! retrieval-reasoning scores (HeadKV-R2, eq. 2), `headkv-r` the retrieval scores (eq. 1).
//! Only the global layers' heads share the pool (windowed layers hold their window); with one KV
//! head per layer (Gemma 3) the per-head budgets are per-layer budgets.
//!
//! ## The allocator
//!
//! HeadKV head-level budgets (`docs/papers/headkv.md` §3.2 eq. 4, App. F; β = 1.01, temperature 1 as in
//! the authors' scripts).
//!
//! Eq. 4: with `b` the fixed budget of a head, the shared pool is `B_pool = (b/β)·L·H` and head h
//! keeps `b_h = (b − b/β) + S_h·B_pool`, S L1-normalised. As in the authors' code (App. F and
//! `ReasonSnapKVCluster`), `b` excludes the α observation window, which every head keeps on top:
//! so with our per-head target `B` (window inside, docs/design.md's equal-KV rule) `b = B − α`, the
//! pool per head is ⌊b/β⌋ and the basic budget `b − ⌊b/β⌋`; scores are raised to the temperature
//! and normalised again (`S^t / ΣS^t`; t = 1 leaves them).
//!
//! **Query heads → KV heads.** Scores are measured per query head, but the cache stores KV heads.
//! A KV head's score is the sum of the normalised scores of the query heads that read it. This is
//! exactly eq. 4 averaged over the group: the mean of the group's per-query-head budgets
//! `(b − b/β) + S_h·(b/β)·L·H_q` is `(b − b/β) + (Σ_group S_h)·(b/β)·L·H_kv`, so totals stay
//! `L·H_kv·B` and memory matches FullKV's KV heads.
//!
//! **Layers.** `kv_scores` has one row per layer that takes a budget: the model's global layers
//! (windowed layers hold their window). With one KV head per layer (Gemma 3) the per-head
//! budgets are per-layer budgets.
//!
//! **Floor.** At β = 1 the basic budget is 0 and a zero-score head gets no share of the pool; it
//! still keeps the α window, so α ≥ 1 is required and every head keeps at least one entry.
//!
//! **Integers.** The pool is split by largest remainder (not the code's `round`) so the total is
//! exactly `L·H_kv·B`; no head keeps more than the context (water-filling hands the surplus of a
//! capped head to the others). All-zero scores share the pool evenly.

use super::rules::{distribute, window_guards};
use super::snapkv::{Pooling, DEFAULT_KERNEL, DEFAULT_POOLING};
use super::MethodSection;
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::{validate_head_scores, Profile};
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// HeadKV β (the authors' scripts: 1.01).
pub const DEFAULT_HEADKV_BETA: f64 = 1.01;
/// Softmax temperature of the scores mapped onto KV heads.
pub const DEFAULT_HEADKV_TEMPERATURE: f64 = 1.0;

/// Options of the HeadKV sections.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadKvOptions {
    /// β of eq. 4 for `headkv` (retrieval-reasoning scores).
    pub beta: f64,
    /// β of eq. 4 for `headkv-r` (retrieval scores); `None`: [`HeadKvOptions::beta`]. The two
    /// score sets differ in how many heads score zero, so the best β can differ (HeadKV App. F
    /// sweeps β per method; `kvplan eval niah --methods headkv-r@beta2,…` measures it).
    pub beta_r: Option<f64>,
    /// Temperature of the scores mapped onto KV heads.
    pub temperature: f64,
}

impl Default for HeadKvOptions {
    fn default() -> Self {
        HeadKvOptions {
            beta: DEFAULT_HEADKV_BETA,
            beta_r: None,
            temperature: DEFAULT_HEADKV_TEMPERATURE,
        }
    }
}

/// Which HeadKV score set a section uses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScoreSource {
    /// Retrieval heads (HeadKV-R, eq. 1).
    Retrieval,
    /// Retrieval-reasoning heads (HeadKV-R2, eq. 2).
    RetrievalReasoning,
}

/// HeadKV (`headkv`: retrieval-reasoning scores; `headkv-r`: retrieval scores).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeadKvSection {
    pub source: ScoreSource,
    pub window: usize,
    pub beta: f64,
    pub temperature: f64,
    pub kernel_size: usize,
    pub pooling: Pooling,
    pub trials_kept: usize,
    pub trials_total: usize,
    /// Raw scores per query head `[layer][q_head]`; the allocator below maps them onto KV heads.
    pub scores: Vec<Vec<f64>>,
    /// A placement control (`<method>@layer-uniform`, [`crate::controls`]), never in a built
    /// plan: each layer keeps the total its heads are given and splits it evenly over them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub layer_uniform: bool,
}

impl MethodSection for HeadKvSection {
    type Options = HeadKvOptions;

    fn build(method: Method, p: &Profile, window: usize, opts: &HeadKvOptions) -> Result<Self> {
        let (source, scores) = if method == Method::HeadKvR {
            (ScoreSource::Retrieval, &p.retrieval)
        } else {
            (ScoreSource::RetrievalReasoning, &p.retrieval_reasoning)
        };
        Ok(HeadKvSection {
            source,
            window,
            beta: match source {
                ScoreSource::Retrieval => opts.beta_r.unwrap_or(opts.beta),
                ScoreSource::RetrievalReasoning => opts.beta,
            },
            temperature: opts.temperature,
            kernel_size: DEFAULT_KERNEL,
            pooling: DEFAULT_POOLING,
            trials_kept: scores.trials_kept,
            trials_total: scores.trials_total,
            scores: scores.scores.clone(),
            layer_uniform: false,
        })
    }

    fn validate(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{p}.window"), self.window, 1)?;
        validate::in_range(&format!("{p}.beta"), self.beta, 1.0, f64::MAX)?;
        validate::above(&format!("{p}.temperature"), self.temperature, 0.0)?;
        validate::at_least(&format!("{p}.kernel_size"), self.kernel_size, 1)?;
        validate_head_scores(p, self.trials_kept, self.trials_total, &self.scores, g)
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        // Only the global layers' heads share the pool; windowed layers hold their window.
        let global: Vec<Vec<f64>> = g
            .global_layers()
            .into_iter()
            .map(|l| self.scores[l].clone())
            .collect();
        let kv = kv_head_scores(&global, g, self.temperature);
        out.window = self.window.min(b);
        let mut grid = head_budgets(out.method, &kv, n, b, self.window, self.beta)?;
        if self.layer_uniform {
            grid.iter_mut().for_each(|row| spread_evenly(row));
        }
        out.per_layer_per_kv_head = g.scatter_global(grid, n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("β {}, α {}", self.beta, self.window)
    }
}

/// `row`'s total split over its entries as evenly as integers allow (the first `total mod len`
/// get one more).
pub fn spread_evenly(row: &mut [usize]) {
    let len = row.len();
    let total: usize = row.iter().sum();
    for (i, x) in row.iter_mut().enumerate() {
        *x = total / len + usize::from(i < total % len);
    }
}

// ---- The allocator ----

/// KV-head scores `[layer][kv_head]` from query-head scores `[layer][q_head]`: normalise, apply
/// the temperature, normalise again, sum over each KV head's query heads. Sums to 1 (or all 0).
pub fn kv_head_scores(
    q_scores: &[Vec<f64>],
    geometry: &Geometry,
    temperature: f64,
) -> Vec<Vec<f64>> {
    let total: f64 = q_scores.iter().flatten().sum();
    let tempered: Vec<Vec<f64>> = q_scores
        .iter()
        .map(|row| {
            row.iter()
                .map(|&s| {
                    if total > 0.0 {
                        (s / total).powf(temperature)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    let norm: f64 = tempered.iter().flatten().sum();
    tempered
        .iter()
        .map(|row| {
            (0..geometry.kv_heads)
                .map(|kv| {
                    let s: f64 = geometry.q_heads_of(kv).map(|h| row[h]).sum();
                    if norm > 0.0 {
                        s / norm
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect()
}

/// Per-head budgets `[layer][kv_head]` (window included) from KV-head scores.
pub fn head_budgets(
    method: Method,
    kv_scores: &[Vec<f64>],
    context_len: usize,
    per_head: usize,
    window: usize,
    beta: f64,
) -> Result<Vec<Vec<usize>>> {
    let layers = kv_scores.len();
    let kv_heads = kv_scores.first().map_or(0, Vec::len);
    let n = context_len;
    if window_guards(method, n, per_head, window, "α")? {
        return Ok(vec![vec![n; kv_heads]; layers]);
    }
    if !(beta >= 1.0 && beta.is_finite()) {
        return Err(Error::budget(
            method,
            format!("β must be >= 1, found {beta}"),
        ));
    }
    let b = per_head - window;
    let pool_per_head = ((b as f64 / beta).floor() as usize).min(b);
    let basic = b - pool_per_head;
    let heads = layers * kv_heads;
    let weights: Vec<f64> = kv_scores.iter().flatten().copied().collect();
    // Each head's share of the pool may not lift it past the context.
    let caps = vec![n - window - basic; heads];
    let shares = distribute(pool_per_head * heads, &weights, &caps);
    Ok(shares
        .chunks(kv_heads.max(1))
        .map(|row| row.iter().map(|s| basic + s + window).collect())
        .collect())
}

#[cfg(test)]
mod allocator_tests {
    use super::*;

    fn geometry() -> Geometry {
        // 2 layers, 4 query heads, 2 KV heads: q 0,1 → kv 0; q 2,3 → kv 1.
        Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"))
    }

    fn q_scores() -> Vec<Vec<f64>> {
        vec![vec![0.4, 0.0, 0.1, 0.1], vec![0.2, 0.0, 0.0, 0.2]]
    }

    #[test]
    fn query_scores_sum_onto_kv_heads() {
        // Σ = 1.0, so S = raw: kv 0 of layer 0 = 0.4 + 0.0, kv 1 = 0.1 + 0.1; layer 1: 0.2, 0.2.
        let s = kv_head_scores(&q_scores(), &geometry(), 1.0);
        let expect = [[0.4, 0.2], [0.2, 0.2]];
        for (row, e) in s.iter().zip(expect) {
            for (a, b) in row.iter().zip(e) {
                assert!((a - b).abs() < 1e-12, "{s:?}");
            }
        }
    }

    #[test]
    fn temperature_sharpens_scores() {
        // t = 2 on S = (0.4, 0, 0.1, 0.1 | 0.2, 0, 0, 0.2): squares 0.16, 0.01, 0.01, 0.04, 0.04,
        // Σ = 0.26 → kv (0,0) = 0.16/0.26, (0,1) = 0.02/0.26, (1,0) = (1,1) = 0.04/0.26.
        let s = kv_head_scores(&q_scores(), &geometry(), 2.0);
        assert!((s[0][0] - 0.16 / 0.26).abs() < 1e-12);
        assert!((s[0][1] - 0.02 / 0.26).abs() < 1e-12);
        assert!((s[1][1] - 0.04 / 0.26).abs() < 1e-12);
    }

    #[test]
    fn eq4_by_hand() {
        // B = 28, α = 8 → b = 20; β = 1.01: pool per head ⌊20/1.01⌋ = ⌊19.80⌋ = 19, basic = 1.
        // Pool = 19 · (2 layers · 2 KV heads) = 76 → shares 0.4·76 = 30.4, 0.2·76 = 15.2 (×3)
        // → floors 30, 15, 15, 15 (75), one left to the largest fraction (.4) → 31.
        // Budgets = basic 1 + share + α 8: 40, 24, 24, 24 (sum 112 = 4 · 28).
        let s = kv_head_scores(&q_scores(), &geometry(), 1.0);
        let b = head_budgets(Method::HeadKv, &s, 1000, 28, 8, 1.01).ok();
        assert_eq!(b, Some(vec![vec![40, 24], vec![24, 24]]));
    }

    #[test]
    fn kv_mapping_equals_mean_of_query_head_budgets() {
        // Per query head (H = 4 per layer, 8 heads): pool 19 · 8 = 152; q-head shares
        // 0.4·152 = 60.8, 0, 15.2, 15.2 | 30.4, 0, 0, 30.4. KV means: (60.8 + 0)/2 = 30.4,
        // (15.2 + 15.2)/2 = 15.2, 15.2, 15.2 — the shares of the KV-head split above.
        let pool_q = 19.0 * 8.0;
        let q = q_scores();
        let kv = kv_head_scores(&q, &geometry(), 1.0);
        for l in 0..2 {
            for g in 0..2 {
                let mean = (q[l][2 * g] * pool_q + q[l][2 * g + 1] * pool_q) / 2.0;
                assert!((mean - kv[l][g] * 19.0 * 4.0).abs() < 1e-9);
            }
        }
    }

    #[test]
    fn zero_score_head_keeps_the_floor_at_beta_one() {
        // 1 layer, 2 KV heads, scores 1 and 0; n = 1000, B = 11, α = 1, β = 1: b = 10, pool per
        // head ⌊10/1⌋ = 10, basic 0; pool 20 all to head 0 → 0 + 20 + 1 = 21 and 0 + 0 + 1 = 1.
        let s = vec![vec![1.0, 0.0]];
        let b = head_budgets(Method::HeadKv, &s, 1000, 11, 1, 1.0).ok();
        assert_eq!(b, Some(vec![vec![21, 1]]));
        assert!(head_budgets(Method::HeadKv, &s, 1000, 10, 0, 1.0).is_err());
    }

    #[test]
    fn capped_head_passes_surplus_on() {
        // n = 40, B = 28: caps n − α − basic = 31 selected-from-pool per head. One head holds all
        // the score: it would get 76 > 31 → capped at 31; the other 45 spread evenly over 3 zero-
        // score heads (15 each). Budgets: 1 + 31 + 8 = 40 = n, and 1 + 15 + 8 = 24.
        let s = vec![vec![1.0, 0.0], vec![0.0, 0.0]];
        let b = head_budgets(Method::HeadKv, &s, 40, 28, 8, 1.01).ok();
        assert_eq!(b, Some(vec![vec![40, 24], vec![24, 24]]));
    }
}
