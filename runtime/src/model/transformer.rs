//! The decoder stack: token embedding, blocks, final norm, output projection.

use burn::module::Module;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::attention::ForwardCtx;
use super::block::Block;
use super::linear::{Embedding, Linear};
use crate::cache::{KvCache, LayerCache};
use crate::observe::Observer;

/// Which positions get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position (prefill for generation: saves a `[t, vocab]` matmul).
    Last,
    /// Every position.
    All,
}

/// The last row of `logits` on the host: the next-token logits.
///
/// # Shapes
/// - logits: `[rows, vocab]` → `vocab` values
pub fn last_row<B: Backend>(logits: Tensor<B, 2>) -> Vec<f32> {
    let [rows, _] = logits.dims();
    logits
        .narrow(0, rows - 1, 1)
        .into_data()
        .iter::<f32>()
        .collect()
}

/// The decoder of a supported architecture.
#[derive(Module, Debug)]
pub struct Transformer<B: Backend> {
    /// Token embedding `[vocab, hidden]`.
    pub embed: Embedding<B>,
    /// Factor on the embeddings before the first block (Gemma: √hidden; otherwise 1).
    pub embed_scale: f64,
    /// Decoder blocks.
    pub blocks: Vec<Block<B>>,
    /// Final RMSNorm.
    pub norm: RmsNorm<B>,
    /// Output projection `[hidden, vocab]` (the transposed embedding when tied).
    pub output: Linear<B>,
    /// `c` of `tanh(z / c)·c` on the logits (Gemma 2's `final_logit_softcapping`).
    #[module(skip)]
    pub final_softcap: Option<f64>,
}

impl<B: Backend> Transformer<B> {
    /// Runs `ids` through the stack, extending `cache`.
    ///
    /// # Shapes
    /// - returns `[1, vocab]` for [`Logits::Last`], `[t, vocab]` for [`Logits::All`]
    pub fn forward(
        &self,
        ids: &[u32],
        ctx: &mut ForwardCtx<'_, B>,
        cache: &mut KvCache<B>,
        mut observer: Option<&mut Observer>,
        logits: Logits,
    ) -> Tensor<B, 2> {
        let t = ids.len();
        let mut x = self.embedded(ids); // [t, hidden]
        for (i, (block, layer_cache)) in self.blocks.iter().zip(&mut cache.layers).enumerate() {
            let obs = observer.as_deref_mut().and_then(|o| o.layer(i));
            ctx.layer = i;
            x = block.forward(x, ctx, layer_cache, obs);
        }
        let x = match logits {
            Logits::Last => x.narrow(0, t - 1, 1),
            Logits::All => x,
        };
        self.logits(x)
    }

    /// The logits of the last block's output rows: final norm, output projection, and the
    /// architecture's soft-cap.
    ///
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, vocab]`
    pub fn logits(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let z = self.output.forward(self.norm.forward(x));
        super::attention::soft_cap(z, self.final_softcap)
    }

    /// One new token in each of several sequences: `ids[i]` after `caches[i]` under `ctxs[i]`
    /// (observed into `observers[i]`); the logits of every row (each sequence's last).
    ///
    /// # Shapes
    /// - returns `[n, vocab]`, `n = ids.len()`
    pub fn forward_many(
        &self,
        ids: &[u32],
        ctxs: &mut [ForwardCtx<'_, B>],
        caches: &mut [&mut KvCache<B>],
        observers: &mut [Option<&mut Observer>],
    ) -> Tensor<B, 2> {
        let mut x = self.embedded(ids); // [n, hidden]
        for (i, block) in self.blocks.iter().enumerate() {
            let mut layers: Vec<&mut LayerCache<B>> =
                caches.iter_mut().map(|c| &mut c.layers[i]).collect();
            let obs = observers
                .iter_mut()
                .map(|o| o.as_deref_mut().and_then(|o| o.layer(i)))
                .collect();
            for ctx in ctxs.iter_mut() {
                ctx.layer = i;
            }
            x = block.forward_many(x, ctxs, &mut layers, obs);
        }
        self.logits(x)
    }

    /// The rows of `ids`, scaled by [`Self::embed_scale`].
    ///
    /// # Shapes
    /// - returns `[ids.len(), hidden]`
    pub fn embedded(&self, ids: &[u32]) -> Tensor<B, 2> {
        let x = self.embed.forward(ids, &self.device());
        if self.embed_scale == 1.0 {
            return x;
        }
        // As transformers: the factor in the embeddings' dtype (f32), then one multiply.
        x.mul_scalar(self.embed_scale as f32)
    }

    /// The device the weights live on.
    pub fn device(&self) -> B::Device {
        self.norm.gamma.device()
    }

    /// Whether every weight is an f32 tensor (what training and `--weights` need), rather
    /// than the GGUF's quantised blocks.
    pub fn is_dense(&self) -> bool {
        self.embed
            .weight
            .as_ref()
            .is_some_and(|w| w.dtype() == burn::tensor::DType::F32)
            && self.output.is_dense()
            && self.blocks.iter().all(|b| {
                let (a, f) = (&b.attention, &b.ffn);
                [&a.wqkv, &a.wo, &f.w_gate, &f.w_up, &f.w_down]
                    .iter()
                    .all(|l| l.is_dense())
            })
    }

    /// Bytes of the embedding, the output and the blocks' projections where they are held (a
    /// tied output that shares the embedding's blocks counted once); norms and biases are left
    /// out (under 0.1% of a model).
    pub fn weight_bytes(&self) -> usize {
        let shared = matches!((&self.embed.quant, &self.output.quant),
            (Some(a), Some(b)) if std::sync::Arc::ptr_eq(a, b));
        let output = if shared { 0 } else { self.output.bytes() };
        self.embed.bytes()
            + output
            + self
                .blocks
                .iter()
                .map(|b| {
                    let (a, f) = (&b.attention, &b.ffn);
                    [&a.wqkv, &a.wo, &f.w_gate, &f.w_up, &f.w_down]
                        .iter()
                        .map(|l| l.bytes())
                        .sum::<usize>()
                })
                .sum::<usize>()
    }
}
