//! The decoder stack: token embedding, blocks, final norm, output projection.

use burn::module::{Module, Param};
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::attention::ForwardCtx;
use super::block::Block;
use crate::cache::KvCache;
use crate::observe::Observer;

/// Which positions get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position (prefill for generation: saves a `[t, vocab]` matmul).
    Last,
    /// Every position.
    All,
}

/// Llama-family decoder.
#[derive(Module, Debug)]
pub struct Transformer<B: Backend> {
    /// Token embedding `[vocab, hidden]`.
    pub embed: Param<Tensor<B, 2>>,
    /// Decoder blocks.
    pub blocks: Vec<Block<B>>,
    /// Final RMSNorm.
    pub norm: RmsNorm<B>,
    /// Output projection `[hidden, vocab]` (the transposed embedding when tied).
    pub output: Param<Tensor<B, 2>>,
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
        let device = self.embed.device();
        let t = ids.len();
        let idx: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
        let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [t]), &device);
        let mut x = self.embed.val().select(0, idx); // [t, hidden]
        for (i, (block, layer_cache)) in self.blocks.iter().zip(&mut cache.layers).enumerate() {
            let obs = observer.as_deref_mut().and_then(|o| o.layer(i));
            ctx.layer = i;
            x = block.forward(x, ctx, layer_cache, obs);
        }
        let x = match logits {
            Logits::Last => x.narrow(0, t - 1, 1),
            Logits::All => x,
        };
        self.norm.forward(x).matmul(self.output.val())
    }
}
