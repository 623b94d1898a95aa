//! KNorm (Devoto et al. 2024, "A Simple and Effective L2 Norm-Based Strategy for KV Cache
//! Compression", §3): keys of **low** L2 norm draw high attention, so each KV head keeps its
//! entries of lowest `‖k‖₂` (score `−‖k‖₂`, as kvpress's `KnormPress`, NVIDIA/kvpress @ 08a43bf).
//! Selection once, after prefill; decoding only appends.
//!
//! The norms come from the prefill's observed pre-RoPE keys ([`ObserveConfig::keys_values`]):
//! RoPE is a rotation, so a key's norm is the same before and after it. No attention is read.

use super::from_plan::PlainScorer;
use super::{LayerView, Scorer, Scores};
use crate::observe::{KeysValues, ObserveConfig};

/// Lowest key norms per KV head.
#[derive(Debug, Clone, Default)]
pub struct KnormScorer;

/// No parameter beyond the budget (its section is empty); selects once, after prefill.
impl PlainScorer for KnormScorer {}

impl KnormScorer {
    /// KNorm has no parameter beyond the budget.
    pub fn new() -> Self {
        Self
    }
}

/// `−‖k‖₂` of KV head `head`'s key at `pos` in the observed call `kv` of `kv_heads` heads
/// (`None`: not observed).
///
/// # Shapes
/// - `kv.keys`: `[kv_heads][t][head_dim]` flattened, `t = kv.positions.len()`
fn negative_norm(kv: &KeysValues, kv_heads: usize, head: usize, pos: usize) -> Option<f32> {
    let t = kv.positions.len();
    let d = kv.keys.len().checked_div(kv_heads * t)?;
    let at = kv.positions.binary_search(&pos).ok()?;
    let row = kv.keys.get((head * t + at) * d..(head * t + at + 1) * d)?;
    Some(-row.iter().map(|x| x * x).sum::<f32>().sqrt())
}

impl Scorer for KnormScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        ObserveConfig {
            keys_values: true,
            ..ObserveConfig::default()
        }
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        let LayerView { positions, obs, .. } = at;
        let kv = obs.and_then(|o| o.keys_values.last());
        let heads = positions.len();
        positions
            .iter()
            .enumerate()
            .map(|(h, p)| {
                p.iter()
                    .map(|&pos| {
                        kv.and_then(|kv| negative_norm(kv, heads, h, pos))
                            .unwrap_or(0.0)
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::LayerObservation;
    use crate::press::top_k;

    #[test]
    fn each_kv_head_keeps_its_lowest_norm_keys() {
        // 2 KV heads, positions 0–3, d = 2. Head 0 norms: (3,4) → 5, (1,0) → 1, (0,2) → 2,
        // (6,8) → 10; head 1: (1,1) → 1.41, (0,3) → 3, (0,0.5) → 0.5, (2,0) → 2.
        // Budget 2 keeps positions 1, 2 in head 0 and 0, 2 in head 1.
        let keys = vec![
            3.0, 4.0, 1.0, 0.0, 0.0, 2.0, 6.0, 8.0, //
            1.0, 1.0, 0.0, 3.0, 0.0, 0.5, 2.0, 0.0,
        ];
        let obs = LayerObservation {
            keys_values: vec![KeysValues {
                positions: vec![0, 1, 2, 3],
                values: vec![0.0; keys.len()],
                keys,
            }],
            ..Default::default()
        };
        let positions = vec![(0..4).collect::<Vec<_>>(); 2];
        let scores =
            KnormScorer::new().prefill_scores(LayerView::new(0, &positions, Some(&obs), &[2, 2]));
        assert_eq!(scores[0], vec![-5.0, -1.0, -2.0, -10.0]);
        assert_eq!(top_k(&scores[0], 2), vec![1, 2]);
        assert_eq!(top_k(&scores[1], 2), vec![0, 2]);
    }

    #[test]
    fn scores_follow_positions_after_an_earlier_eviction() {
        // Head 0 holds positions 1 and 3 only: their norms 1 and 10, in storage order.
        let obs = LayerObservation {
            keys_values: vec![KeysValues {
                positions: vec![0, 1, 2, 3],
                keys: vec![3.0, 4.0, 1.0, 0.0, 0.0, 2.0, 6.0, 8.0],
                values: vec![0.0; 8],
            }],
            ..Default::default()
        };
        let scores =
            KnormScorer::new().prefill_scores(LayerView::new(0, &[vec![1, 3]], Some(&obs), &[1]));
        assert_eq!(scores, vec![vec![-1.0, -10.0]]);
    }
}
