//! Gated feed-forward: `down(act(gate(x)) ⊙ up(x))`, with `act` SiLU (SwiGLU: Llama, Qwen2) or
//! tanh-approximated GELU (GeGLU: Gemma 3). Gate and up stay separate matmuls: their outputs are
//! then contiguous, which keeps the element-wise product on flex's fast path.

use burn::module::{Module, Param};
use burn::tensor::activation::{gelu_approximate, silu};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::arch::Activation;

/// Gated feed-forward block.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `[hidden, ffn]`.
    pub w_gate: Param<Tensor<B, 2>>,
    /// `[hidden, ffn]`.
    pub w_up: Param<Tensor<B, 2>>,
    /// `[ffn, hidden]`.
    pub w_down: Param<Tensor<B, 2>>,
    /// The gate's activation.
    #[module(skip)]
    pub activation: Activation,
}

impl<B: Backend> FeedForward<B> {
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let gate = x.clone().matmul(self.w_gate.val()); // [t, ffn]
        let up = x.matmul(self.w_up.val());
        let gate = match self.activation {
            Activation::Silu => silu(gate),
            Activation::GeluTanh => gelu_approximate(gate),
        };
        (gate * up).matmul(self.w_down.val())
    }
}
