//! One pre-norm transformer block: `x + attn(norm(x))`, then `x + ffn(norm(x))`.

use burn::module::Module;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::attention::{Attention, ForwardCtx};
use super::feed_forward::FeedForward;
use crate::cache::LayerCache;
use crate::observe::LayerObservation;

/// A Llama decoder block.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    /// RMSNorm before attention.
    pub attn_norm: RmsNorm<B>,
    /// Self-attention.
    pub attention: Attention<B>,
    /// RMSNorm before the feed-forward.
    pub ffn_norm: RmsNorm<B>,
    /// SwiGLU feed-forward.
    pub ffn: FeedForward<B>,
}

impl<B: Backend> Block<B> {
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(
        &self,
        x: Tensor<B, 2>,
        ctx: &mut ForwardCtx<'_, B>,
        cache: &mut LayerCache<B>,
        obs: Option<&mut LayerObservation>,
    ) -> Tensor<B, 2> {
        let h = x.clone()
            + self
                .attention
                .forward(self.attn_norm.forward(x), ctx, cache, obs);
        h.clone() + self.ffn.forward(self.ffn_norm.forward(h))
    }
}
