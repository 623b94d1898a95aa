//! H2O (Zhang et al. 2024): heavy hitters by accumulated attention plus a recent window, at
//! prefill and after every decode step.
//!
//! Accumulated attention of an entry = the attention it received summed over every query row so
//! far: after prefill, the column sums of the prompt's attention (computed block by block by the
//! observer, never from an n × n matrix); then each decode step's row is added. A head's budget B
//! splits as the planner says (`methods::uniform::h2o_split`): `⌊B·heavy_fraction⌋` heavy hitters,
//! the rest the most recent entries (scored `∞`). GQA: the query heads' sums are averaged.

use burn::tensor::backend::Backend;
use kvplan_planner::H2oSection;

use super::from_plan::{FromPlan, MethodPress};
use super::{group_mean, last_row_mean, observe, LayerView, Press, PressKind, Scorer, Scores};
use crate::error::Result;
use crate::observe::ObserveConfig;

/// Heavy hitters + recent window.
#[derive(Debug, Clone)]
pub struct H2oScorer {
    heavy_fraction: f64,
    /// `[layer][kv_head][entry]` accumulated attention, in storage order.
    acc: Vec<Vec<Vec<f32>>>,
}

impl MethodPress for H2oScorer {
    /// A selection over the model's forward pass; its decode scores re-choose heavy hitters and
    /// recent entries (evicted as the table's decode policy says: every step, held at budget).
    const KIND: PressKind = PressKind::SELECTION;

    /// The section's heavy share under the plan's allocation.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let s: &H2oSection = p.section_as()?;
        Ok(p.selection(Self::new(s.heavy_fraction)))
    }
}

impl H2oScorer {
    /// Heavy share `heavy_fraction` of each head's budget (0.5 in the paper).
    pub fn new(heavy_fraction: f64) -> Self {
        Self {
            heavy_fraction,
            acc: Vec::new(),
        }
    }

    fn recent(&self, budget: usize) -> usize {
        let heavy = ((budget as f64 * self.heavy_fraction).floor() as usize).min(budget);
        budget - heavy
    }

    fn slot(&mut self, layer: usize) -> &mut Vec<Vec<f32>> {
        if self.acc.len() <= layer {
            self.acc.resize(layer + 1, Vec::new());
        }
        &mut self.acc[layer]
    }

    fn scores(&mut self, layer: usize, budgets: &[usize]) -> Scores {
        let recent: Vec<usize> = budgets.iter().map(|&b| self.recent(b)).collect();
        self.slot(layer)
            .iter()
            .zip(recent)
            .map(|(acc, r)| {
                let from = acc.len().saturating_sub(r);
                let mut s = acc.clone();
                s[from..].fill(f32::INFINITY);
                s
            })
            .collect()
    }
}

impl Scorer for H2oScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        observe(0, true)
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        let kv = at.positions.len();
        let acc = match at.obs.and_then(|o| o.column_sums.last()) {
            Some(c) => group_mean(&c.sums, &c.kv_of, kv),
            None => at.positions.iter().map(|p| vec![0.0; p.len()]).collect(),
        };
        *self.slot(at.layer) = acc;
        self.scores(at.layer, at.budgets)
    }

    fn decode_observe(&self) -> Option<ObserveConfig> {
        Some(observe(1, false))
    }

    fn decode_scores(&mut self, at: LayerView<'_>) -> Option<Scores> {
        let kv = at.positions.len();
        let row: Option<Scores> = at
            .obs
            .and_then(|o| o.attention.last())
            .map(|a| last_row_mean(a, kv));
        let acc = self.slot(at.layer);
        acc.resize(kv, Vec::new());
        for (h, a) in acc.iter_mut().enumerate() {
            a.resize(at.positions[h].len(), 0.0);
            if let Some(r) = row.as_ref().and_then(|r| r.get(h)) {
                for (x, p) in a.iter_mut().zip(r) {
                    *x += p;
                }
            }
        }
        Some(self.scores(at.layer, at.budgets))
    }

    fn retained(&mut self, layer: usize, keep: &[Vec<usize>]) {
        let acc = self.slot(layer);
        for (a, k) in acc.iter_mut().zip(keep) {
            *a = k.iter().map(|&i| a[i]).collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::LayerObservation;
    use crate::observe::{AttentionRows, ColumnSums};
    use crate::press::top_k;

    #[test]
    fn keeps_heavy_hitters_and_recent_then_evicts_while_decoding() {
        // One KV head read by two query heads; their column sums average to 5, 1, 3, 0.5, 2, 1.
        let obs = LayerObservation {
            column_sums: vec![ColumnSums {
                sums: vec![
                    vec![6.0, 1.0, 2.0, 0.0, 2.0, 1.0],
                    vec![4.0, 1.0, 4.0, 1.0, 2.0, 1.0],
                ],
                kv_of: vec![0, 0],
            }],
            ..Default::default()
        };
        let mut h = H2oScorer::new(0.5);
        // Budget 4: recent 2 (entries 4, 5), heavy 2: the sums 5 (0) and 3 (2).
        let scores = h.prefill_scores(LayerView::new(0, &[(0..6).collect()], Some(&obs), &[4]));
        let keep = top_k(&scores[0], 4);
        assert_eq!(keep, vec![0, 2, 4, 5]);
        h.retained(0, &[keep]);
        // Decode: the new entry (position 6) is attended 0.4; the row adds to [5, 3, 2, 1, 0]:
        // 5.1, 7.0, 2.2, 1.3, 0.4. Recent: storage 3, 4; heavy: 7.0 (1) and 5.1 (0): 2 goes.
        let row = vec![vec![0.1, 4.0, 0.2, 0.3, 0.4]];
        let obs = LayerObservation {
            attention: vec![AttentionRows {
                query_positions: vec![6],
                probs: vec![row.clone(), row],
                key_positions: vec![vec![0, 2, 4, 5, 6]],
                kv_of: vec![0, 0],
            }],
            ..Default::default()
        };
        let scores = h.decode_scores(LayerView::new(0, &[vec![0, 2, 4, 5, 6]], Some(&obs), &[4]));
        assert_eq!(scores.map(|s| top_k(&s[0], 4)), Some(vec![0, 1, 3, 4]));
    }
}
