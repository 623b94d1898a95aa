//! SnapKV (Li et al. 2024) as the authors' scripts run it (Zefan-Cai/KVCache-Factory @ 5fb995d,
//! `pyramidkv/pyramidkv_utils.py` `SnapKVCluster`,
//! PyramidKV §4.2.2): α = 8 observed prompt rows are the observation window; each key before the
//! window scores the attention those rows give it (softmax over the whole causal row, summed
//! over the window rows), pooled along the sequence with kernel 7 (max-pool by default, padding
//! k/2, stride 1, over the keys before the window only); the top `B − α` of them are kept and the
//! window is appended (scored `∞`). The window is whatever rows the prefill observed
//! ([`crate::observe::ObserveConfig::rows_end`]): the prompt's last α rows, or the α rows ending
//! with the user's question (PyramidKV §4.2 "instruction tokens"); in the second case the
//! prompt's tokens after the window (the chat template's tail, the answer prefix) are kept as
//! well, inside the budget: the top `B − α − tail` keys before the window are kept. A KV head's
//! query heads are combined as the request's [`GqaAggregation`] says ([`super::gqa`]): by
//! default each head is pooled, then the KV head takes their mean.
//!
//! The same scorer serves PyramidKV (per-layer budgets) and HeadKV (per-head budgets): only the
//! [`super::Allocation`] differs.

use burn::tensor::backend::Backend;
use kvplan_planner::{Pooling, Section};

use super::from_plan::{FromPlan, MethodPress};
use super::{observe, window_scores, GqaAggregation, LayerView, Press, PressKind, Scorer, Scores};
use crate::error::Result;
use crate::observe::ObserveConfig;

/// Observation-window attention, pooled.
#[derive(Debug, Clone)]
pub struct SnapKvScorer {
    window: usize,
    kernel: usize,
    pooling: Pooling,
    gqa: GqaAggregation,
}

impl MethodPress for SnapKvScorer {
    /// A selection over the model's forward pass; it scores after prefill only (the table's
    /// decode policy for SnapKV, PyramidKV, HeadKV: the cache grows while decoding).
    const KIND: PressKind = PressKind::SELECTION;

    /// The window and pooling of the SnapKV, PyramidKV or HeadKV section, under the plan's
    /// allocation (uniform, per layer, per head), query heads combined as the request's GQA
    /// aggregation says.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let (window, kernel, pooling) = match p.section()? {
            Section::SnapKv(x) => (x.window, x.kernel_size, x.pooling),
            Section::Pyramid(x) => (x.window, x.kernel_size, x.pooling),
            Section::HeadKv(x) | Section::HeadKvR(x) => (x.window, x.kernel_size, x.pooling),
            other => return Err(p.wrong_section(other)),
        };
        let scorer = Self::new(window, kernel, pooling).with_gqa(p.options.gqa);
        Ok(p.selection(scorer))
    }
}

impl SnapKvScorer {
    /// Window α, pooling kernel and kind.
    pub fn new(window: usize, kernel: usize, pooling: Pooling) -> Self {
        Self {
            window,
            kernel: kernel.max(1),
            pooling,
            gqa: GqaAggregation::default(),
        }
    }

    /// The same scorer combining a KV head's query heads as `gqa` says.
    pub fn with_gqa(mut self, gqa: GqaAggregation) -> Self {
        self.gqa = gqa;
        self
    }
}

/// 1-D pooling with padding `k/2` and stride 1, as `F.max_pool1d` / `F.avg_pool1d` (the average
/// counts the zero padding, PyTorch's default).
pub fn pool(x: &[f32], kernel: usize, pooling: Pooling) -> Vec<f32> {
    let half = kernel / 2;
    (0..x.len())
        .map(|i| {
            let lo = i.saturating_sub(half);
            let hi = (i + kernel - half).min(x.len());
            let span = &x[lo..hi];
            match pooling {
                Pooling::Maxpool => span.iter().copied().fold(f32::NEG_INFINITY, f32::max),
                Pooling::Avgpool => span.iter().sum::<f32>() / kernel as f32,
            }
        })
        .collect()
}

impl Scorer for SnapKvScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        observe(self.window, false)
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        let LayerView { positions, obs, .. } = at;
        let (window, kernel, pooling) = (self.window, self.kernel, self.pooling);
        let sum_rows = |_: usize, before: usize, rows: &[Vec<f32>]| {
            let mut sums = vec![0f32; before];
            for r in rows {
                for (s, p) in sums.iter_mut().zip(r) {
                    *s += p;
                }
            }
            sums
        };
        let pooled = |sums: &[f32]| pool(sums, kernel, pooling);
        let scores = window_scores(positions, obs, window, self.gqa, sum_rows, pooled);
        scores
            .into_iter()
            .zip(positions)
            .map(|(mut s, p)| {
                s.resize(p.len(), f32::INFINITY);
                s
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::AttentionRows;
    use crate::observe::LayerObservation;
    use crate::press::top_k;

    #[test]
    fn pools_like_pytorch() {
        // Max-pool k = 3 (padding 1): [.3 .6 0 .4] → .6 .6 .6 .4.
        let x = [0.3, 0.6, 0.0, 0.4];
        assert_eq!(pool(&x, 3, Pooling::Maxpool), vec![0.6, 0.6, 0.6, 0.4]);
        // Avg-pool counts the zero padding: (0 + .3 + .6)/3 = .3 at the left edge.
        let a = pool(&x, 3, Pooling::Avgpool);
        assert!((a[0] - 0.3).abs() < 1e-6 && (a[3] - 0.4 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn window_scores_are_summed_pooled_averaged_and_the_window_kept() {
        // 6 keys, window 2, kernel 3; one KV head, two query heads.
        // q0: window sums over keys 0–3 = .3 .6 0 .4 → max-pooled .6 .6 .6 .4;
        // q1: 0 0 1 0 → 0 1 1 1. Mean: .3 .8 .8 .7; window keys 4, 5 always kept.
        // Budget 4: the window + keys 1, 2.
        let obs = LayerObservation {
            attention: vec![AttentionRows {
                query_positions: vec![4, 5],
                probs: vec![
                    vec![
                        vec![0.1, 0.5, 0.0, 0.1, 0.3, 0.0],
                        vec![0.2, 0.1, 0.0, 0.3, 0.2, 0.2],
                    ],
                    vec![
                        vec![0.0, 0.0, 0.9, 0.0, 0.1, 0.0],
                        vec![0.0, 0.0, 0.1, 0.0, 0.4, 0.5],
                    ],
                ],
                key_positions: vec![(0..6).collect()],
                kv_of: vec![0, 0],
            }],
            ..Default::default()
        };
        let mut s = SnapKvScorer::new(2, 3, Pooling::Maxpool);
        let scores = s.prefill_scores(LayerView::new(0, &[(0..6).collect()], Some(&obs), &[4]));
        let want = [0.3, 0.8, 0.8, 0.7];
        for (a, b) in scores[0].iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{:?}", scores[0]);
        }
        assert!(scores[0][4..].iter().all(|s| s.is_infinite()));
        assert_eq!(top_k(&scores[0], 4), vec![1, 2, 4, 5]);
    }

    #[test]
    fn a_question_end_window_keeps_the_tail_and_scores_only_keys_before_it() {
        // 10 keys; the window is the 2 rows ending before position 7 (rows 5 and 6), then a
        // 3-token tail (7, 8, 9, the template's tail): kernel 3, one KV head, two query heads.
        // q0: sums over keys 0–4 = .3 .6 0 .4 0 → max-pooled .6 .6 .6 .4 .4;
        // q1: 0 0 .1 0 1 → 0 .1 .1 1 1. Mean: .3 .35 .35 .7 .7; keys 5–9 kept (∞).
        // Budget 7 = window 2 + tail 3 + keys 3, 4; budget 6 keeps key 3 only (ties: earlier).
        let row = |p: &[f32]| {
            let mut r = p.to_vec();
            r.resize(10, 0.0);
            r
        };
        let obs = LayerObservation {
            attention: vec![AttentionRows {
                query_positions: vec![5, 6],
                probs: vec![
                    vec![
                        row(&[0.1, 0.5, 0.0, 0.1, 0.0, 0.3]),
                        row(&[0.2, 0.1, 0.0, 0.3, 0.0, 0.2, 0.2]),
                    ],
                    vec![
                        row(&[0.0, 0.0, 0.0, 0.0, 0.9, 0.1]),
                        row(&[0.0, 0.0, 0.1, 0.0, 0.1, 0.3, 0.5]),
                    ],
                ],
                key_positions: vec![(0..10).collect()],
                kv_of: vec![0, 0],
            }],
            ..Default::default()
        };
        let mut s = SnapKvScorer::new(2, 3, Pooling::Maxpool);
        let scores = s.prefill_scores(LayerView::new(0, &[(0..10).collect()], Some(&obs), &[7]));
        let want = [0.3, 0.35, 0.35, 0.7, 0.7];
        for (a, b) in scores[0].iter().zip(want) {
            assert!((a - b).abs() < 1e-6, "{:?}", scores[0]);
        }
        assert!(scores[0][5..].iter().all(|s| s.is_infinite()));
        assert_eq!(top_k(&scores[0], 7), vec![3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(top_k(&scores[0], 6), vec![3, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn gqa_aggregation_changes_which_keys_a_kv_head_keeps() {
        // 7 keys, window 1 (key 6), kernel 3, max-pooling; two query heads on one KV head whose
        // window rows are q0 = [.1 .2 .1 .3 0 0 .3], q1 = [.2 .3 .1 0 .4 .4 .6] (any numbers
        // serve: the scorer only sums rows). Budget 4 = 3 keys + the window. By hand
        // (`super::super::gqa`'s test): pool-then-mean scores [.25 .25 .3 .35 .35 .2] → keys
        // 2, 3, 4; mean-then-pool [.25 .25 .25 .2 .2 .2] → 0, 1, 2; max-then-pool
        // [.3 .3 .3 .4 .4 .4] → 3, 4, 5.
        let obs = LayerObservation {
            attention: vec![AttentionRows {
                query_positions: vec![6],
                probs: vec![
                    vec![vec![0.1, 0.2, 0.1, 0.3, 0.0, 0.0, 0.3]],
                    vec![vec![0.2, 0.3, 0.1, 0.0, 0.4, 0.4, 0.6]],
                ],
                key_positions: vec![(0..7).collect()],
                kv_of: vec![0, 0],
            }],
            ..Default::default()
        };
        let keep = |gqa: GqaAggregation| {
            let mut s = SnapKvScorer::new(1, 3, Pooling::Maxpool).with_gqa(gqa);
            let scores = s.prefill_scores(LayerView::new(0, &[(0..7).collect()], Some(&obs), &[4]));
            top_k(&scores[0], 4)
        };
        assert_eq!(keep(GqaAggregation::PoolThenMean), [2, 3, 4, 6]);
        assert_eq!(keep(GqaAggregation::MeanThenPool), [0, 1, 2, 6]);
        assert_eq!(keep(GqaAggregation::MaxThenPool), [3, 4, 5, 6]);
    }
}
