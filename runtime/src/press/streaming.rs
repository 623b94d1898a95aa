//! StreamingLLM (Xiao et al. 2024): the first `sinks` entries (attention sinks, 4 by default)
//! plus the most recent ones, at prefill and after every decode step. The split of a head's
//! budget is the planner's (`methods::uniform::streaming_split`): `min(sinks, B)` sinks, the rest
//! recent. Scores: sinks `∞`, every other entry its position (newer scores higher), so the
//! top-`B` selection is exactly sinks + recent window.

use burn::tensor::backend::Backend;
use kvplan_planner::StreamingSection;

use super::from_plan::{FromPlan, MethodPress};
use super::{LayerView, Press, PressKind, Scorer, Scores};
use crate::error::Result;
use crate::observe::ObserveConfig;

/// Sinks + recent window.
#[derive(Debug, Clone)]
pub struct StreamingScorer {
    sinks: usize,
}

impl MethodPress for StreamingScorer {
    /// A selection over the model's forward pass; its decode scores keep sinks + the recent
    /// window (evicted as the table's decode policy says: every step, held at budget).
    const KIND: PressKind = PressKind::SELECTION;

    /// The section's sinks under the plan's allocation.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let s: &StreamingSection = p.section_as()?;
        Ok(p.selection(Self::new(s.sinks)))
    }
}

impl StreamingScorer {
    /// Keeps `sinks` initial entries plus recent ones.
    pub fn new(sinks: usize) -> Self {
        Self { sinks }
    }

    fn scores(&self, positions: &[Vec<usize>]) -> Scores {
        positions
            .iter()
            .map(|p| {
                p.iter()
                    .enumerate()
                    .map(|(i, &pos)| {
                        if i < self.sinks {
                            f32::INFINITY
                        } else {
                            pos as f32
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

impl Scorer for StreamingScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        ObserveConfig::default()
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        self.scores(at.positions)
    }

    fn decode_scores(&mut self, at: LayerView<'_>) -> Option<Scores> {
        Some(self.scores(at.positions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::press::top_k;

    #[test]
    fn keeps_sinks_and_the_newest_entries() {
        // 10 entries, budget 6, 4 sinks: 0–3 and the two newest, 8 and 9.
        let mut s = StreamingScorer::new(4);
        let scores = s.prefill_scores(LayerView::new(0, &[(0..10).collect()], None, &[6]));
        assert_eq!(top_k(&scores[0], 6), vec![0, 1, 2, 3, 8, 9]);
        // Decode: an entry at position 10 arrives after 0–3, 8, 9: the oldest non-sink (8) goes.
        let positions = vec![vec![0, 1, 2, 3, 8, 9, 10]];
        let scores = s.decode_scores(LayerView::new(0, &positions, None, &[6]));
        assert_eq!(
            scores.map(|s| top_k(&s[0], 6)),
            Some(vec![0, 1, 2, 3, 5, 6])
        );
    }
}
