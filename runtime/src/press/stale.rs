//! TensorRT-LLM's PyTorch backend under a `max_attention_window` list, as its source runs it
//! (`trtllm:<method>`; the capability's [`Prefill::Unwindowed`]), in the case the freed blocks
//! are there for: every block the window frees is taken by another request. (Not a bound: what
//! another request writes there could cost more or less than these rows.)
//!
//! What the engine does (`NVIDIA/TensorRT-LLM` at `b35ac1b6`; module header of
//! `kvplan_planner::export::targets::trtllm`): the attention kernel gets no window for Llama,
//! Qwen2 or Gemma 3's global layers, so prefill and every decode step attend over every position
//! of the sequence's block table. The block manager gives the request the whole prompt at
//! admission; each decode step's `addToken` counts the new token and, while
//! `numTokens − r·B ≥ W + B`, detaches front block `r` of the layers at the smallest window `W`
//! (`r` one count per sequence) and releases it to the free queue. The block's id stays in the
//! table the kernel reads, so the positions `0 .. r·B` read whatever the block holds:
//!
//! - **no other request takes the block** (a pool with room): their own keys and values — the
//!   step is FullKV's, bit for bit (not run here: it is `full`);
//! - **another request takes it** (a pool kept full, which is what the freed blocks are for):
//!   that request's keys and values — this press. The other request is modelled as this
//!   prompt's tokens after the first four in a fixed random order (a seeded Fisher–Yates): the
//!   same words and length, no sentence, so no needle; the first four kept, as a request under
//!   the same chat template starts, where attention sinks sit. Its FullKV prefill is run once
//!   (a second prefill per prompt), and its rows replace this prompt's at every detached
//!   position of the detaching layers, position for position (both RoPE-rotated there).
//!   Generated positions that leave the window (a generation longer than `W + B`) keep their
//!   own rows: the other request has none there, so this case is then the lighter one.
//!
//! **Bytes**: what the engine holds for this request — everything after prefill (admission and
//! peak are FullKV's), then the detaching layers' positions from `r·B` on.

use burn::tensor::backend::Backend;
use kvplan_planner::export::capability::Prefill;

use super::{Capabilities, Press, PressKind};
use crate::cache::{HostKv, KvCache, BYTES_PER_ELEMENT};
use crate::error::Result;
use crate::model::{Logits, Model};

/// Tokens kept in place at the start of the other request (module header).
const KEPT_PREFIX: usize = 4;

/// TensorRT-LLM's PyTorch backend with its freed blocks taken by another request (module header).
#[derive(Debug, Clone)]
pub struct StaleBlocksPress {
    name: String,
    /// The window of each layer the block manager detaches (`None`: the layer keeps its blocks —
    /// a full layer, a larger window, or the model's own window, which its kernel masks).
    detaching: Vec<Option<usize>>,
    /// Tokens per block.
    block: usize,
    /// The other request's rows of each detaching layer.
    other: Vec<Option<HostKv>>,
    /// Positions below which each layer's blocks are detached.
    detached: Vec<usize>,
}

impl StaleBlocksPress {
    /// The press `name` for layer `windows` (`None`: full or the model's own), with blocks of
    /// `block` tokens: only the layers at the smallest window detach (one count per sequence).
    pub fn new(name: impl Into<String>, windows: &[Option<usize>], block: usize) -> Self {
        let smallest = windows.iter().flatten().min().copied();
        let detaching: Vec<Option<usize>> = windows
            .iter()
            .map(|w| w.filter(|&w| Some(w) == smallest))
            .collect();
        Self {
            name: name.into(),
            other: vec![None; windows.len()],
            detached: vec![0; windows.len()],
            detaching,
            block: block.max(1),
        }
    }

    /// The positions detached once the sequence holds `tokens` (module header):
    /// `r·B` with `r` the least count for which `tokens − r·B < W + B`.
    pub fn detached_below(tokens: usize, window: usize, block: usize) -> usize {
        let blocks = match tokens.checked_sub(window + block) {
            Some(over) => over / block + 1,
            None => 0,
        };
        blocks * block
    }

    /// The other request's tokens for `ids` (module header).
    pub fn other_request(ids: &[u32]) -> Vec<u32> {
        let mut out = ids.to_vec();
        let tail = &mut out[KEPT_PREFIX.min(ids.len())..];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in (1..tail.len()).rev() {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
            tail.swap(i, (r % (i as u64 + 1)) as usize);
        }
        out
    }
}

impl<B: Backend> Press<B> for StaleBlocksPress {
    fn name(&self) -> &str {
        &self.name
    }

    /// Its prefill runs a second request, so it runs its own; nothing is scored.
    fn capabilities(&self) -> Capabilities {
        PressKind::OWN_PREFILL.serving(None)
    }

    fn held_bytes(&self, cache: &KvCache<B>) -> usize {
        let freed: usize = cache
            .layers
            .iter()
            .zip(&self.detached)
            .map(|(layer, &below)| {
                (0..layer.kv_heads())
                    .map(|h| layer.positions(h).iter().filter(|&&p| p < below).count())
                    .sum::<usize>()
                    * layer.head_dim()
            })
            .sum();
        cache.bytes() - freed * BYTES_PER_ELEMENT * 2
    }

    /// Before the prefill, runs the other request and keeps its rows; before each later step,
    /// overwrites the blocks that have become detached with them.
    fn prepare(&mut self, model: &Model<B>, ids: &[u32], cache: &mut KvCache<B>) -> Result<()> {
        if cache.next_position == 0 {
            let mut other = model.new_cache();
            model.forward(&Self::other_request(ids), &mut other, None, Logits::Last)?;
            for (l, w) in self.detaching.iter().enumerate() {
                self.other[l] = w.map(|_| other.layers[l].host_copy());
                self.detached[l] = 0;
            }
        } else {
            // addToken: the sequence counts the token this step adds before it runs.
            let tokens = cache.next_position + ids.len();
            for (l, w) in self.detaching.iter().enumerate() {
                let (Some(w), Some(other)) = (w, &self.other[l]) else {
                    continue;
                };
                let below = Self::detached_below(tokens, *w, self.block);
                if below > self.detached[l] {
                    cache.layers[l].overwrite_below(below, other);
                    self.detached[l] = below;
                }
            }
        }
        Ok(())
    }
}

/// Whether an engine entry with this prefill runs as this press.
pub fn applies(prefill: Prefill) -> bool {
    prefill == Prefill::Unwindowed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detach_count_worked_by_hand() {
        // W = 100, B = 32: nothing while tokens < 132; at 132 one block (held 100); at 163 still
        // one (held 131); at 164 two (held 100).
        assert_eq!(StaleBlocksPress::detached_below(131, 100, 32), 0);
        assert_eq!(StaleBlocksPress::detached_below(132, 100, 32), 32);
        assert_eq!(StaleBlocksPress::detached_below(163, 100, 32), 32);
        assert_eq!(StaleBlocksPress::detached_below(164, 100, 32), 64);
        // The first decode step after a prompt of 1024 (1025 tokens), W = 128: detach while
        // 1025 − 32r ≥ 160 → r = 28, 896 positions, 129 held.
        assert_eq!(StaleBlocksPress::detached_below(1025, 128, 32), 896);
    }

    #[test]
    fn only_the_smallest_window_detaches() {
        let p = StaleBlocksPress::new("trtllm:x", &[Some(64), None, Some(128), Some(64)], 32);
        assert_eq!(p.detaching, vec![Some(64), None, None, Some(64)]);
    }

    #[test]
    fn the_other_request_is_a_permutation_keeping_the_start() {
        let ids: Vec<u32> = (0..50).collect();
        let o = StaleBlocksPress::other_request(&ids);
        assert_eq!(&o[..4], &[0, 1, 2, 3]);
        let mut sorted = o.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ids);
        let moved = o.iter().zip(&ids).filter(|(a, b)| a != b).count();
        assert!(moved > 40, "{moved} of 46 moved");
        assert_eq!(o, StaleBlocksPress::other_request(&ids), "deterministic");
        assert_eq!(StaleBlocksPress::other_request(&[7, 8]), vec![7, 8]);
    }
}
