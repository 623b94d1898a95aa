//! SwiGLU feed-forward: `down(silu(gate(x)) ⊙ up(x))`. Gate and up stay separate matmuls: their
//! outputs are then contiguous, which keeps the element-wise product on flex's fast path.

use burn::module::{Module, Param};
use burn::tensor::activation::silu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// SwiGLU feed-forward block.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `[hidden, ffn]`.
    pub w_gate: Param<Tensor<B, 2>>,
    /// `[hidden, ffn]`.
    pub w_up: Param<Tensor<B, 2>>,
    /// `[ffn, hidden]`.
    pub w_down: Param<Tensor<B, 2>>,
}

impl<B: Backend> FeedForward<B> {
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let gate = x.clone().matmul(self.w_gate.val()); // [t, ffn]
        let up = x.matmul(self.w_up.val());
        (silu(gate) * up).matmul(self.w_down.val())
    }
}
