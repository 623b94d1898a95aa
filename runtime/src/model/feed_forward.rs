//! SwiGLU feed-forward: `down(silu(gate(x)) ⊙ up(x))`, with gate and up fused into one matmul.

use burn::module::{Module, Param};
use burn::tensor::activation::silu;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// SwiGLU feed-forward block.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `[hidden, 2·ffn]`: columns `0..ffn` are the gate, `ffn..2·ffn` the up projection.
    pub w_gate_up: Param<Tensor<B, 2>>,
    /// `[ffn, hidden]`.
    pub w_down: Param<Tensor<B, 2>>,
    /// Inner size.
    pub ffn: usize,
}

impl<B: Backend> FeedForward<B> {
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let gate_up = x.matmul(self.w_gate_up.val()); // [t, 2·ffn]
        let gate = gate_up.clone().narrow(1, 0, self.ffn);
        let up = gate_up.narrow(1, self.ffn, self.ffn);
        (silu(gate) * up).matmul(self.w_down.val())
    }
}
