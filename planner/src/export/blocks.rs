//! A layer's cache as the engine allocates it, at three moments of one request: **admission**
//! (what the engine reserves or checks before it takes the request), **peak** (the most the
//! request holds while it runs, prefill included) and **steady** decode at context `n`. Engines
//! allocate whole blocks of `B` tokens, so a window of 13 entries costs a 32-token block in
//! TensorRT-LLM; some reserve for tokens in flight as well. The rules, per layer and sequence
//! ([`super::capability::BlockRule`]), for the serving settings the export writes
//! ([`Serving`]):
//!
//! - **vLLM** (0.33.0, `vllm/v1/kv_cache_interface.py`; the export sets `--max-model-len n`):
//!   a full layer `⌈n/B⌉` blocks at every moment (`FullAttentionSpec.max_memory_usage_bytes`). A
//!   sliding layer of window `W` is admitted and held at most
//!   `⌈min(W − 1 + c·T, n)/B⌉ + 1` blocks (`SlidingWindowSpec.max_admission_blocks_per_request`,
//!   "single source of truth for both startup pool sizing and the runtime admission gate"; real
//!   held blocks "plateau at this bound"), with `T` = `max_num_batched_tokens` and `c` =
//!   `VllmConfig.max_concurrent_batches` (2: async scheduling is on by default,
//!   `vllm/config/vllm.py`), so `c·T` = `max_in_flight_tokens`. In steady decode the window's
//!   `W − 1` past tokens and the `c` in flight: `min(⌈n/B⌉, ⌈(W − 1 + c)/B⌉ + 1)` (the `+ 1`:
//!   the window need not start at a block boundary).
//! - **TensorRT-LLM** (`cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp` at `b35ac1b6`):
//!   `addSequence` allocates the whole prompt, `⌈min(P, maxTokenNum + T)/B⌉` blocks with
//!   `maxTokenNum = max(W, maxSequenceLength)` — so every layer, windowed or not, takes `⌈n/B⌉`
//!   blocks at admission and at peak ("SWA allocates blocks linearly, and we need as many blocks
//!   as full attention"). Decode's `addToken` → `WindowBlockManager::adjustBlocksIfNeeded`
//!   detaches front blocks once `W + B` tokens are held (the first decode step may detach many)
//!   and returns them to the free pool (their ids stay in the sequence's list, skipped on
//!   release), so in steady decode a windowed layer holds `⌈min(n, W)/B⌉ + 1` blocks when
//!   `n > W` — `calculateMaxBlockRequirementsPerBeam` with `kSWAExtraBlock` — and a full one
//!   `⌈n/B⌉`. The count of detached blocks is one per sequence (`getNumFrontBlocksRemoved()`,
//!   no window), and `BlockManager::adjustBlocksIfNeeded` walks the windows in ascending order:
//!   after the smallest window `W₀` has detached, `numTokens − removed·B < W₀ + B ≤ W + B` for
//!   every larger `W`, so **only the layers at the smallest window detach**; a layer at a larger
//!   window keeps its whole sequence, `⌈n/B⌉` blocks, as a full one ([`total_slots`]).
//! - **llama.cpp** (the copy in llama-cpp-python 0.3.36, `src/llama-context.cpp`,
//!   `src/llama-kv-cache-iswa.cpp`): cells are allocated when the context is made, so the three
//!   are one number. `n_ctx` is padded to 256; a full layer holds `n_ctx` cells, a sliding
//!   layer `pad₂₅₆(min(n_ctx, n_swa·s + n_ubatch))` (`s` the sequences of a unified cache, one
//!   otherwise) — unless `swa_full`, which keeps `n_ctx` cells in every layer: llama-server and
//!   llama-cli default it off (`common/common.h`), the library (`llama_context_default_params`,
//!   and so llama-cpp-python unless given `swa_full=False`) on.
//! - **Entries** (the Python packages' tensors): one cell per entry, `min(n, W)`.
//!
//! Bytes follow: slots × 2 (K and V) × KV heads × head_dim × bytes per element.

use serde::Serialize;

use super::capability::BlockRule;
use super::classes::LayerClass;

/// The serving settings an export writes, on which the engines' allocation depends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Serving {
    /// vLLM `--max-num-batched-tokens`: tokens one step schedules at most.
    pub max_num_batched_tokens: usize,
    /// vLLM batches in flight (`max_concurrent_batches`: 2 with async scheduling).
    pub concurrent_batches: usize,
    /// llama.cpp `n_ubatch` (`-ub`; its default 512).
    pub n_ubatch: usize,
}

impl Default for Serving {
    /// vLLM's `SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS` (2048, the serve default on GPUs
    /// under 70 GiB) with async scheduling; llama.cpp's default `n_ubatch`.
    fn default() -> Self {
        Serving {
            max_num_batched_tokens: 2048,
            concurrent_batches: 2,
            n_ubatch: 512,
        }
    }
}

/// A layer's token slots (blocks × `B`) at admission, at peak and in steady decode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Slots {
    pub admission: usize,
    pub peak: usize,
    pub steady: usize,
}

impl Slots {
    fn same(x: usize) -> Self {
        Slots {
            admission: x,
            peak: x,
            steady: x,
        }
    }
}

impl std::ops::Add for Slots {
    type Output = Slots;
    fn add(self, o: Slots) -> Slots {
        Slots {
            admission: self.admission + o.admission,
            peak: self.peak + o.peak,
            steady: self.steady + o.steady,
        }
    }
}

/// Bytes of one token slot of one layer: K and V over the KV heads (module header).
pub fn slot_bytes(g: &crate::Geometry, bytes_per_element: usize) -> u64 {
    (2 * g.kv_heads * g.head_dim * bytes_per_element) as u64
}

/// `x` rounded up to a multiple of `to`.
fn pad(x: usize, to: usize) -> usize {
    x.div_ceil(to) * to
}

/// The slots one layer of class `class` takes for one sequence of `n` tokens (module header).
pub fn slots(rule: BlockRule, class: LayerClass, n: usize, block: usize, s: &Serving) -> Slots {
    let b = block.max(1);
    let whole = n.div_ceil(b);
    match (rule, class) {
        (BlockRule::Entries, c) => Slots::same(c.held(n)),
        (BlockRule::LlamaCpp, c) => {
            let n_ctx = pad(n, 256);
            Slots::same(match c {
                LayerClass::Full => n_ctx,
                LayerClass::Window(w) => pad(n_ctx.min(w + s.n_ubatch), 256),
            })
        }
        (_, LayerClass::Full) => Slots::same(whole * b),
        (BlockRule::Vllm, LayerClass::Window(w)) => {
            let c = s.concurrent_batches.max(1);
            let past = w.saturating_sub(1);
            let admitted = (past + c * s.max_num_batched_tokens).min(n).div_ceil(b) + 1;
            let steady = whole.min((past + c).div_ceil(b) + 1);
            Slots {
                admission: admitted * b,
                peak: admitted * b,
                steady: steady * b,
            }
        }
        (BlockRule::Trtllm, LayerClass::Window(w)) => {
            let kept = w.min(n).div_ceil(b) + usize::from(n > w);
            Slots {
                admission: whole * b,
                peak: whole * b,
                steady: kept.min(whole) * b,
            }
        }
    }
}

/// Slots of every layer together. TensorRT-LLM frees blocks in the layers at the smallest
/// window below `n` only (module header): its layers at a larger window count as full.
pub fn total_slots(
    rule: BlockRule,
    layers: &[LayerClass],
    n: usize,
    block: usize,
    s: &Serving,
) -> Slots {
    let smallest = layers
        .iter()
        .filter_map(|c| match c {
            LayerClass::Window(w) if *w < n => Some(*w),
            _ => None,
        })
        .min();
    layers
        .iter()
        .map(|&c| match (rule, c) {
            (BlockRule::Trtllm, LayerClass::Window(w)) if Some(w) != smallest => LayerClass::Full,
            _ => c,
        })
        .map(|c| slots(rule, c, n, block, s))
        .fold(Slots::default(), |a, x| a + x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use LayerClass::{Full, Window};

    fn steady(rule: BlockRule, c: LayerClass, n: usize, b: usize) -> usize {
        slots(rule, c, n, b, &Serving::default()).steady
    }

    #[test]
    fn block_rounding_by_hand() {
        // n = 1000, B = 16: a full layer ⌈1000/16⌉ = 63 blocks = 1008 slots in both engines.
        assert_eq!(steady(BlockRule::Vllm, Full, 1000, 16), 1008);
        assert_eq!(steady(BlockRule::Trtllm, Full, 1000, 16), 1008);
        // A window of 100 in steady decode: vLLM ⌈(99 + 2)/16⌉ + 1 = 8 blocks = 128;
        // TensorRT-LLM ⌈100/16⌉ + kSWAExtraBlock = 8 = 128.
        assert_eq!(steady(BlockRule::Vllm, Window(100), 1000, 16), 128);
        assert_eq!(steady(BlockRule::Trtllm, Window(100), 1000, 16), 128);
        // TensorRT-LLM's 32-token blocks: a window of 13 costs one block of 32 and the extra
        // one, 64 slots (+392%).
        assert_eq!(steady(BlockRule::Trtllm, Window(13), 4096, 32), 64);
        // No extra block where the window holds the whole sequence (n ≤ W).
        assert_eq!(steady(BlockRule::Trtllm, Window(100), 100, 16), 112);
        // A window larger than the prompt holds the prompt: vLLM min(63, 65) = 63 blocks.
        assert_eq!(steady(BlockRule::Vllm, Window(1010), 1000, 16), 1008);
        // Entries: no rounding.
        assert_eq!(steady(BlockRule::Entries, Window(13), 4096, 32), 13);
        let all = total_slots(
            BlockRule::Trtllm,
            &[Full, Window(13), Window(40)],
            100,
            32,
            &Serving::default(),
        );
        // Only the smallest window (13) detaches: the window of 40 keeps its 4 blocks.
        assert_eq!(all.steady, 128 + 64 + 128);
    }

    #[test]
    fn trtllm_frees_blocks_at_the_smallest_window_only() {
        // One detached-block count per sequence, windows walked in ascending order
        // (BlockManager::adjustBlocksIfNeeded): n = 1000, B = 32, windows 100 and 300. At the
        // window of 100, blocks detach while 1000 − 32·r ≥ 132: r = 27, 136 tokens left, 5
        // blocks held (⌈100/32⌉ + 1 = 5 at most). At 300: 1000 − 32·27 = 136 < 332, nothing more
        // detaches: ⌈1000/32⌉ = 32 blocks, the full layer's.
        let s = Serving::default();
        let layers = [Window(100), Window(300), Full];
        let all = total_slots(BlockRule::Trtllm, &layers, 1000, 32, &s);
        assert_eq!(all.steady, (5 + 32 + 32) * 32);
        assert_eq!(all.admission, 3 * 32 * 32);
        // One window for every windowed layer: both detach.
        let two = total_slots(
            BlockRule::Trtllm,
            &[Window(100), Window(100), Full],
            1000,
            32,
            &s,
        );
        assert_eq!(two.steady, (5 + 5 + 32) * 32);
        // vLLM frees every window's blocks.
        let v = total_slots(BlockRule::Vllm, &layers, 1000, 16, &s);
        let per = |w| slots(BlockRule::Vllm, w, 1000, 16, &s).steady;
        assert_eq!(v.steady, per(Window(100)) + per(Window(300)) + per(Full));
    }

    #[test]
    fn trtllm_admits_the_whole_prompt_and_detaches_in_decode() {
        // addSequence: ⌈min(P, max(W, maxSeqLen) + T)/B⌉ = ⌈4096/32⌉ = 128 blocks in every
        // layer at admission and peak; steady ⌈128/32⌉ + 1 = 5 blocks for a window of 128.
        let s = Serving::default();
        let w = slots(BlockRule::Trtllm, Window(128), 4096, 32, &s);
        assert_eq!((w.admission, w.peak, w.steady), (4096, 4096, 160));
        let f = slots(BlockRule::Trtllm, Full, 4096, 32, &s);
        assert_eq!((f.admission, f.peak, f.steady), (4096, 4096, 4096));
    }

    #[test]
    fn vllm_admits_a_sliding_layer_for_its_tokens_in_flight() {
        // max_admission_blocks_per_request worked by hand, B = 16, T = 2048, c = 2:
        // n = 4096, W = 128: min(127 + 4096, 4096) = 4096 → ⌈4096/16⌉ + 1 = 257 blocks — one
        // more than the full layer's 256: at 4K a window of 128 saves nothing at admission.
        let s = Serving::default();
        let w = slots(BlockRule::Vllm, Window(128), 4096, 16, &s);
        assert_eq!((w.admission, w.peak), (257 * 16, 257 * 16));
        assert_eq!(
            slots(BlockRule::Vllm, Full, 4096, 16, &s).admission,
            256 * 16
        );
        // …and 10 blocks in steady decode: ⌈(127 + 2)/16⌉ + 1 (129 tokens span 9 blocks).
        assert_eq!(w.steady, 10 * 16);
        // At 32K the same window is admitted with ⌈(127 + 4096)/16⌉ + 1 = 265 blocks against
        // the full layer's 2048.
        let long = slots(BlockRule::Vllm, Window(128), 32768, 16, &s);
        assert_eq!(long.admission, 265 * 16);
        // One batch in flight (async scheduling off) and T = 512: ⌈(127 + 512)/16⌉ + 1 = 41.
        let small = Serving {
            max_num_batched_tokens: 512,
            concurrent_batches: 1,
            ..s
        };
        assert_eq!(
            slots(BlockRule::Vllm, Window(128), 4096, 16, &small).admission,
            41 * 16
        );
    }

    #[test]
    fn llama_cpp_pads_a_sliding_layer_to_its_ubatch_and_256() {
        // n_ctx 1024, W 404, n_ubatch 512: pad₂₅₆(min(1024, 916)) = 1024 cells — no saving.
        let s = Serving::default();
        assert_eq!(
            slots(BlockRule::LlamaCpp, Window(404), 1024, 1, &s).admission,
            1024
        );
        assert_eq!(slots(BlockRule::LlamaCpp, Full, 1024, 1, &s).steady, 1024);
        // n 4096, W 512: pad₂₅₆(min(4096, 1024)) = 1024, a quarter of the full layer's 4096.
        assert_eq!(
            slots(BlockRule::LlamaCpp, Window(512), 4096, 1, &s).steady,
            1024
        );
        // n 1000 pads n_ctx to 1024; W 100: pad₂₅₆(612) = 768.
        let w = slots(BlockRule::LlamaCpp, Window(100), 1000, 1, &s);
        assert_eq!((w.admission, w.peak, w.steady), (768, 768, 768));
        // n_ubatch 32: pad₂₅₆(132) = 256.
        let small = Serving { n_ubatch: 32, ..s };
        assert_eq!(
            slots(BlockRule::LlamaCpp, Window(100), 1000, 1, &small).steady,
            256
        );
    }
}
