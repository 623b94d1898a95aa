//! TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs", §3.3): after the prompt and after
//! every decode step, each entry scores the attention the **newest** query gives it, averaged over
//! all query heads of the layer; the layer keeps its top entries. One score per position for the
//! whole layer, so every KV head keeps the same positions (under a per-head allocation, the top
//! `B_h` of one ranking).
//!
//! As in kvpress (`TOVAPress`, NVIDIA/kvpress @ 08a43bf), the newest entry itself always stays
//! (scored `∞`); the paper does not force it, but the newest token's own weight is usually the
//! largest. A query head whose KV head does not hold a position (heads with different budgets)
//! gives it 0 — the mean is always over all the layer's query heads. When the prefill's observed
//! row ends at the user's question ([`crate::observe::ObserveConfig::rows_end`]), that row scores
//! the keys before it and the prompt's tokens after it are kept.

use std::collections::BTreeMap;

use super::from_plan::PlainScorer;
use super::{keep_from, observe, window_start, LayerView, Scorer, Scores};
use crate::observe::{LayerObservation, ObserveConfig};

/// The newest row's attention, averaged over the layer's query heads.
#[derive(Debug, Clone, Default)]
pub struct TovaScorer;

/// No parameter beyond the budget (its section is empty); re-selects after prefill and, as the
/// table's decode policy says, after every decode step.
impl PlainScorer for TovaScorer {}

impl TovaScorer {
    /// TOVA has no parameter beyond the budget.
    pub fn new() -> Self {
        Self
    }

    /// Scores of every head's entries: the mean over query heads of the last observed row's
    /// weight on the entry's position; the newest position `∞`. Zeros when nothing was observed.
    fn scores(positions: &[Vec<usize>], obs: Option<&LayerObservation>) -> Scores {
        let Some(rows) = obs.and_then(|o| o.attention.last()) else {
            return positions.iter().map(|p| vec![0.0; p.len()]).collect();
        };
        let q_heads = rows.probs.len().max(1) as f32;
        // position → Σ over query heads of the newest row's weight
        let mut by_position: BTreeMap<usize, f32> = BTreeMap::new();
        for (head_rows, &g) in rows.probs.iter().zip(&rows.kv_of) {
            let (Some(last), Some(keys)) = (head_rows.last(), rows.key_positions.get(g)) else {
                continue;
            };
            for (&pos, &p) in keys.iter().zip(last) {
                *by_position.entry(pos).or_insert(0.0) += p;
            }
        }
        let newest = positions.iter().flatten().copied().max();
        positions
            .iter()
            .map(|p| {
                p.iter()
                    .map(|&pos| {
                        if Some(pos) == newest {
                            f32::INFINITY
                        } else {
                            by_position.get(&pos).copied().unwrap_or(0.0) / q_heads
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

impl Scorer for TovaScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        observe(1, false)
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        let LayerView { positions, obs, .. } = at;
        // A row observed before the prompt's end (a question-end window) keeps what follows it.
        keep_from(
            Self::scores(positions, obs),
            positions,
            window_start(obs, 1),
        )
    }

    fn decode_observe(&self) -> Option<ObserveConfig> {
        Some(observe(1, false))
    }

    fn decode_scores(&mut self, at: LayerView<'_>) -> Option<Scores> {
        let LayerView { positions, obs, .. } = at;
        Some(Self::scores(positions, obs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::AttentionRows;
    use crate::press::tests::scores_before_a_tail;
    use crate::press::top_k;

    /// Two KV heads of two query heads each (heads 0, 1 → KV 0; 2, 3 → KV 1), entries at
    /// positions 0–4; only the last row counts (an earlier row would favour position 1).
    fn obs(key_positions: Vec<Vec<usize>>) -> LayerObservation {
        let early = vec![0.0, 1.0, 0.0, 0.0, 0.0];
        let rows = |last: [f32; 5]| vec![early.clone(), last.to_vec()];
        LayerObservation {
            attention: vec![AttentionRows {
                query_positions: vec![3, 4],
                probs: vec![
                    rows([0.5, 0.1, 0.0, 0.2, 0.2]),
                    rows([0.3, 0.1, 0.2, 0.0, 0.4]),
                    rows([0.1, 0.0, 0.6, 0.1, 0.2]),
                    rows([0.1, 0.0, 0.2, 0.5, 0.2]),
                ],
                key_positions,
                kv_of: vec![0, 0, 1, 1],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn every_kv_head_keeps_the_layers_top_positions() {
        // Mean over the 4 query heads of the last row: position 0: (.5+.3+.1+.1)/4 = .25,
        // 1: .05, 2: (0+.2+.6+.2)/4 = .25, 3: (.2+0+.1+.5)/4 = .2; position 4 is the newest: ∞.
        // Budget 3: 4, then 0 and 2 (.25 each); 3 and 1 go — the same for both KV heads,
        // where each KV head's own query heads alone would keep 4, 0, 1 and 4, 2, 3.
        let positions = vec![(0..5).collect::<Vec<_>>(); 2];
        let o = obs(positions.clone());
        let scores =
            TovaScorer::new().prefill_scores(LayerView::new(0, &positions, Some(&o), &[3, 3]));
        assert!((scores[0][0] - 0.25).abs() < 1e-6 && (scores[1][3] - 0.2).abs() < 1e-6);
        assert_eq!(top_k(&scores[0], 3), vec![0, 2, 4]);
        assert_eq!(top_k(&scores[1], 3), vec![0, 2, 4]);
    }

    #[test]
    fn decoding_scores_the_newest_row_over_what_each_head_holds() {
        // KV head 1 no longer holds position 0; query heads 2, 3 give nothing to it, and the
        // rows of KV head 1 cover positions [1, 2, 3, 4] (their last 4 weights shifted).
        let mut o = obs(vec![(0..5).collect(), vec![1, 2, 3, 4]]);
        for head in &mut o.attention[0].probs[2..] {
            for row in head.iter_mut() {
                row.remove(0);
            }
        }
        // Position 0: (.5+.3)/4 = .2; 1: (.1+.1)/4 = .05; 2: (0+.2+.6+.2)/4 = .25;
        // 3: (.2+0+.1+.5)/4 = .2; 4 is the newest. Budget 2 keeps 4 and 2 in both heads.
        let positions = vec![(0..5).collect::<Vec<_>>(), vec![1, 2, 3, 4]];
        let scores =
            TovaScorer::new().decode_scores(LayerView::new(0, &positions, Some(&o), &[2, 2]));
        let kept = scores.map(|s| (top_k(&s[0], 2), top_k(&s[1], 2)));
        assert_eq!(kept, Some((vec![2, 4], vec![1, 3])));
    }

    #[test]
    fn a_row_observed_at_the_question_end_keeps_the_tokens_after_it() {
        // One query head, 5 keys; the row at position 2 gives .2 .5 .3: keys 0, 1 score .2, .5,
        // the row's own key and the tail (3, 4) are kept.
        let s = scores_before_a_tail(&mut TovaScorer::new(), [0.2, 0.5, 0.3, 0.0, 0.0]);
        assert_eq!(&s[0][..2], &[0.2, 0.5]);
        assert!(s[0][2..].iter().all(|x| x.is_infinite()), "{:?}", s[0]);
    }
}
