//! A layer's cache in an engine's blocks: engines allocate whole blocks of `B` tokens, so a
//! window of 13 entries costs a 32-token block in TensorRT-LLM. The rules, per layer and
//! sequence, at context `n` ([`super::capability::BlockRule`]):
//!
//! - vLLM (`vllm/v1/kv_cache_interface.py`, v0.33.0): a full layer `⌈n/B⌉` blocks
//!   (`FullAttentionSpec.max_memory_usage_bytes`); a sliding layer of window `W`
//!   `min(⌈n/B⌉, ⌈(W − 1 + 1)/B⌉ + 1)` — `SlidingWindowSpec.max_admission_blocks_per_request`
//!   with one token in flight (decode): the window's `W − 1` past tokens and the new one, plus a
//!   block because the window need not start at a block boundary.
//! - TensorRT-LLM (`kvCacheManager.cpp` `calculateMaxBlockRequirementsPerBeam`, no sinks):
//!   `⌈min(n, W)/B⌉` blocks, `W = n` for a full layer.
//! - Entries: one cell per entry (`B = 1`), `min(n, W)`.
//!
//! Bytes follow: `blocks · B` token slots × 2 (K and V) × KV heads × head_dim × bytes per element.

use super::capability::BlockRule;
use super::classes::LayerClass;

/// Token slots (blocks × `block`) one layer of class `class` reserves at context `n`.
pub fn slots(rule: BlockRule, class: LayerClass, n: usize, block: usize) -> usize {
    let b = block.max(1);
    let whole = n.div_ceil(b);
    let blocks = match (rule, class) {
        (BlockRule::Entries, c) => return c.held(n),
        (_, LayerClass::Full) => whole,
        (BlockRule::Vllm, LayerClass::Window(w)) => whole.min(w.div_ceil(b) + 1),
        (BlockRule::Trtllm, LayerClass::Window(w)) => w.min(n).div_ceil(b),
    };
    blocks * b
}

/// Token slots of every layer together.
pub fn total_slots(rule: BlockRule, layers: &[LayerClass], n: usize, block: usize) -> usize {
    layers.iter().map(|&c| slots(rule, c, n, block)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use LayerClass::{Full, Window};

    #[test]
    fn block_rounding_by_hand() {
        // n = 1000, B = 16: a full layer ⌈1000/16⌉ = 63 blocks = 1008 slots in both engines.
        assert_eq!(slots(BlockRule::Vllm, Full, 1000, 16), 1008);
        assert_eq!(slots(BlockRule::Trtllm, Full, 1000, 16), 1008);
        // A window of 100: vLLM ⌈100/16⌉ + 1 = 8 blocks = 128; TensorRT-LLM ⌈100/16⌉ = 7 = 112.
        assert_eq!(slots(BlockRule::Vllm, Window(100), 1000, 16), 128);
        assert_eq!(slots(BlockRule::Trtllm, Window(100), 1000, 16), 112);
        // TensorRT-LLM's 32-token blocks: a window of 13 costs one block of 32 (+146%).
        assert_eq!(slots(BlockRule::Trtllm, Window(13), 4096, 32), 32);
        // A window larger than the prompt holds the prompt: vLLM min(63, 64) = 63 blocks.
        assert_eq!(slots(BlockRule::Vllm, Window(1010), 1000, 16), 1008);
        // Entries: no rounding.
        assert_eq!(slots(BlockRule::Entries, Window(13), 4096, 32), 13);
        assert_eq!(
            total_slots(BlockRule::Trtllm, &[Full, Window(13), Window(40)], 100, 32),
            128 + 32 + 64
        );
    }
}
