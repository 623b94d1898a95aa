//! One transformer block: `x + attn(norm(x))`, then `x + ffn(norm(x))`; with post-norms (Gemma 2
//! and 3), `x + post_norm(attn(norm(x)))` and `x + post_norm(ffn(norm(x)))`; without pre-norms
//! (OLMo 2), `x + post_norm(attn(x))` and `x + post_norm(ffn(x))`. The block chooses the
//! attention path: the fused host kernel (`host_attention`, CPU backend) when the call's context
//! asks for it, otherwise the generic burn ops of [`Attention`].

use burn::module::Module;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::attention::{Attention, ForwardCtx};
use super::feed_forward::FeedForward;
use crate::cache::LayerCache;
use crate::observe::LayerObservation;

/// A decoder block.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    /// RMSNorm before attention (all but OLMo 2).
    pub attn_norm: Option<RmsNorm<B>>,
    /// Self-attention.
    pub attention: Attention<B>,
    /// RMSNorm of the attention output before the residual add (Gemma 2 and 3, OLMo 2).
    pub post_attn_norm: Option<RmsNorm<B>>,
    /// RMSNorm before the feed-forward (all but OLMo 2).
    pub ffn_norm: Option<RmsNorm<B>>,
    /// Gated feed-forward.
    pub ffn: FeedForward<B>,
    /// RMSNorm of the feed-forward output before the residual add (Gemma 2 and 3, OLMo 2).
    pub post_ffn_norm: Option<RmsNorm<B>>,
}

/// `x`, through `norm` when there is one.
fn maybe_norm<B: Backend>(norm: &Option<RmsNorm<B>>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    match norm {
        Some(n) => n.forward(x),
        None => x,
    }
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
        self.around(x, |a| {
            #[cfg(feature = "flex")]
            if ctx.host_kernel {
                return super::host_attention::forward(&self.attention, a, ctx, cache, obs);
            }
            self.attention.forward(a, ctx, cache, obs)
        })
    }

    /// [`Self::forward`] for one new token in each of several sequences (row `i` of `x` after
    /// `caches[i]`; [`Attention::forward_many`]); norms and the feed-forward run over all rows.
    ///
    /// # Shapes
    /// - x: `[n, hidden]` → `[n, hidden]`
    pub fn forward_many(
        &self,
        x: Tensor<B, 2>,
        ctxs: &mut [ForwardCtx<'_, B>],
        caches: &mut [&mut LayerCache<B>],
        obs: Vec<Option<&mut LayerObservation>>,
    ) -> Tensor<B, 2> {
        self.around(x, |a| {
            #[cfg(feature = "flex")]
            if ctxs.iter().all(|c| c.host_kernel) {
                return super::host_attention::forward_many(&self.attention, a, ctxs, caches, obs);
            }
            self.attention.forward_many(a, ctxs, caches, obs)
        })
    }

    /// The block around its attention: `attention` of the normed `x`, the residuals, norms and
    /// the feed-forward (what [`Self::forward`], [`Self::forward_many`] and PoD's own attention
    /// pass share).
    ///
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`; `attention` takes and gives `[t, hidden]`
    pub fn around(
        &self,
        x: Tensor<B, 2>,
        attention: impl FnOnce(Tensor<B, 2>) -> Tensor<B, 2>,
    ) -> Tensor<B, 2> {
        let attn = attention(maybe_norm(&self.attn_norm, x.clone()));
        let h = x + maybe_norm(&self.post_attn_norm, attn);
        let ffn = self.ffn.forward(maybe_norm(&self.ffn_norm, h.clone()));
        h + maybe_norm(&self.post_ffn_norm, ffn)
    }
}
