//! GQA aggregation: how the scores of a KV head's query heads become the KV head's scores, for
//! every window-based selection (SnapKV, PyramidKV, HeadKV, HeadKV-R, and SpindleKV when it
//! does not repeat its KV heads). TreeKV and H2O (accumulated attention, no pooling) and TOVA
//! (one ranking per layer) keep the group mean.
//!
//! For KV head `g` with query heads `q ∈ G(g)`, `s_q` the window's attention summed per key and
//! `P` the scorer's pooling along the keys (SnapKV's kernel; none for SpindleKV):
//! - `pool-then-mean`: `mean_q P(s_q)` — kvpress's SnapKV order; ours by default until measured;
//! - `mean-then-pool`: `P(mean_q s_q)` — KVCache-Factory's KV-head granularity
//!   (Zefan-Cai/KVCache-Factory @ ad51c4e, `pyramidkv/pyramidkv_utils.py`: the window sums are
//!   reduced over the group, `mean` by default, *before* the pooling and the top-k);
//! - `max-then-pool`: `P(max_q s_q)` — the same with that code's `max` reduction, so a key one
//!   query head needs is not divided by its group mates (HeadKV's retrieval heads).
//!
//! With average pooling or no pooling the first two are equal (both linear); with max-pooling
//! they differ. `max-then-pool` equals `pool-then-max` under max-pooling (maxima commute).

use std::fmt;
use std::str::FromStr;

use super::Scores;
use crate::observe::AttentionRows;

/// The order in which a KV head's query-head scores are pooled and combined (module header).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GqaAggregation {
    /// Pool each query head's scores, then average over the group (kvpress's SnapKV).
    #[default]
    PoolThenMean,
    /// Average the group's window sums, then pool (KVCache-Factory's KV-head mode).
    MeanThenPool,
    /// Take the group's maximum of the window sums, then pool.
    MaxThenPool,
}

impl GqaAggregation {
    /// Every mode, in the order of [`GqaAggregation::NAMES`].
    pub const ALL: [Self; 3] = [Self::PoolThenMean, Self::MeanThenPool, Self::MaxThenPool];

    /// The names the command line and the results' settings use.
    pub const NAMES: [&'static str; 3] = ["pool-then-mean", "mean-then-pool", "max-then-pool"];

    /// The mode's name (`pool-then-mean`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::PoolThenMean => Self::NAMES[0],
            Self::MeanThenPool => Self::NAMES[1],
            Self::MaxThenPool => Self::NAMES[2],
        }
    }

    /// Combines per-query-head scores `per_q[q][key]` (query head `q` reading cache head
    /// `kv_of[q]`) into `[kv_head][key]`, pooling with `pool` in this mode's order.
    pub fn combine(
        self,
        per_q: &[Vec<f32>],
        kv_of: &[usize],
        kv_heads: usize,
        pool: impl Fn(&[f32]) -> Vec<f32>,
    ) -> Scores {
        match self {
            Self::PoolThenMean => {
                let pooled: Vec<Vec<f32>> = per_q.iter().map(|s| pool(s)).collect();
                group_mean(&pooled, kv_of, kv_heads)
            }
            Self::MeanThenPool => group_mean(per_q, kv_of, kv_heads)
                .iter()
                .map(|s| pool(s))
                .collect(),
            Self::MaxThenPool => group_max(per_q, kv_of, kv_heads)
                .iter()
                .map(|s| pool(s))
                .collect(),
        }
    }
}

impl fmt::Display for GqaAggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GqaAggregation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown GQA aggregation `{s}`; expected one of {}",
                    Self::NAMES.join(", ")
                )
            })
    }
}

/// The rows of `per_q` that read KV head `g`.
fn group<'a>(per_q: &'a [Vec<f32>], kv_of: &[usize], g: usize) -> Vec<&'a Vec<f32>> {
    per_q
        .iter()
        .zip(kv_of)
        .filter(|(_, &k)| k == g)
        .map(|(r, _)| r)
        .collect()
}

/// Mean over each KV head's query heads: `per_q[q][key]` → `[kv][key]`, query head `q` reading
/// cache head `kv_of[q]` (the observation's map: the geometry's query→KV map, or its unfolded
/// copy). Keys are in the KV head's storage order, so the group's rows have equal lengths.
pub fn group_mean(per_q: &[Vec<f32>], kv_of: &[usize], kv_heads: usize) -> Scores {
    by_group(per_q, kv_of, kv_heads, |rows, i| {
        rows.iter().map(|r| r[i]).sum::<f32>() / rows.len() as f32
    })
}

/// Maximum over each KV head's query heads, as [`group_mean`] maps them.
pub fn group_max(per_q: &[Vec<f32>], kv_of: &[usize], kv_heads: usize) -> Scores {
    by_group(per_q, kv_of, kv_heads, |rows, i| {
        rows.iter().map(|r| r[i]).fold(f32::NEG_INFINITY, f32::max)
    })
}

/// The last observed row of each query head (a decode step's attention), averaged over each KV
/// head's query heads ([`group_mean`]): `[kv][key]`.
pub fn last_row_mean(rows: &AttentionRows, kv_heads: usize) -> Scores {
    let last: Vec<Vec<f32>> = rows
        .probs
        .iter()
        .map(|r| r.last().cloned().unwrap_or_default())
        .collect();
    group_mean(&last, &rows.kv_of, kv_heads)
}

/// `[kv][key]`: each KV head's entry `key` combined from the rows of its query heads by
/// `at_key(rows, key)` (the rows as [`group_mean`] maps them).
fn by_group(
    per_q: &[Vec<f32>],
    kv_of: &[usize],
    kv_heads: usize,
    at_key: impl Fn(&[&Vec<f32>], usize) -> f32,
) -> Scores {
    (0..kv_heads)
        .map(|g| {
            let rows = group(per_q, kv_of, g);
            let len = rows.first().map_or(0, |r| r.len());
            (0..len).map(|i| at_key(&rows, i)).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::press::snapkv::pool;
    use crate::press::top_k;
    use kvplan_planner::Pooling;

    /// Two query heads on one KV head (groups of 2), six keys, max-pooling with kernel 3
    /// (padding 1). Window sums: q0 = [.1 .2 .1 .3 0 0], q1 = [.2 .3 .1 0 .4 .4].
    /// - pool-then-mean: P(q0) = [.2 .2 .3 .3 .3 0], P(q1) = [.3 .3 .3 .4 .4 .4]
    ///   → mean [.25 .25 .3 .35 .35 .2]: budget 3 keeps keys 2, 3, 4;
    /// - mean-then-pool: mean [.15 .25 .1 .15 .2 .2] → P = [.25 .25 .25 .2 .2 .2]: keys 0, 1, 2;
    /// - max-then-pool: max [.2 .3 .1 .3 .4 .4] → P = [.3 .3 .3 .4 .4 .4]: keys 3, 4, 5.
    fn sums() -> Vec<Vec<f32>> {
        vec![
            vec![0.1, 0.2, 0.1, 0.3, 0.0, 0.0],
            vec![0.2, 0.3, 0.1, 0.0, 0.4, 0.4],
        ]
    }

    fn scores(mode: GqaAggregation) -> Vec<f32> {
        let p = |s: &[f32]| pool(s, 3, Pooling::Maxpool);
        mode.combine(&sums(), &[0, 0], 1, p).remove(0)
    }

    fn close(got: &[f32], want: &[f32]) {
        assert_eq!(got.len(), want.len());
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn the_three_orders_give_the_hand_worked_scores() {
        close(
            &scores(GqaAggregation::PoolThenMean),
            &[0.25, 0.25, 0.3, 0.35, 0.35, 0.2],
        );
        close(
            &scores(GqaAggregation::MeanThenPool),
            &[0.25, 0.25, 0.25, 0.2, 0.2, 0.2],
        );
        close(
            &scores(GqaAggregation::MaxThenPool),
            &[0.3, 0.3, 0.3, 0.4, 0.4, 0.4],
        );
    }

    #[test]
    fn the_three_orders_select_differently() {
        assert_eq!(top_k(&scores(GqaAggregation::PoolThenMean), 3), [2, 3, 4]);
        assert_eq!(top_k(&scores(GqaAggregation::MeanThenPool), 3), [0, 1, 2]);
        assert_eq!(top_k(&scores(GqaAggregation::MaxThenPool), 3), [3, 4, 5]);
        // Average pooling is linear: pooling and the mean commute.
        let avg = |s: &[f32]| pool(s, 3, Pooling::Avgpool);
        let a = GqaAggregation::PoolThenMean.combine(&sums(), &[0, 0], 1, avg);
        let b = GqaAggregation::MeanThenPool.combine(&sums(), &[0, 0], 1, avg);
        close(&a[0], &b[0]);
    }

    #[test]
    fn group_max_takes_the_larger_query_head_per_kv_head() {
        let per_q = vec![
            vec![1.0, 3.0],
            vec![3.0, 5.0],
            vec![0.0, 2.0],
            vec![2.0, 1.0],
        ];
        assert_eq!(
            group_max(&per_q, &[0, 1, 0, 1], 2),
            vec![vec![1.0, 3.0], vec![3.0, 5.0]]
        );
        assert_eq!(
            group_max(&per_q, &[0, 0, 1, 1], 2),
            vec![vec![3.0, 5.0], vec![2.0, 2.0]]
        );
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for m in GqaAggregation::ALL {
            assert_eq!(m.name().parse::<GqaAggregation>(), Ok(m));
        }
        let err = "mean".parse::<GqaAggregation>().expect_err("unknown");
        assert!(
            err.contains("pool-then-mean, mean-then-pool, max-then-pool"),
            "{err}"
        );
    }
}
