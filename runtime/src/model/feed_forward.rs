//! Gated feed-forward: `down(act(gate(x)) ⊙ up(x))`, with `act` SiLU (SwiGLU: Llama, Qwen2) or
//! tanh-approximated GELU (GeGLU: Gemma 3). Gate and up stay separate matmuls: their outputs are
//! then contiguous, which keeps the element-wise product on flex's fast path. With quantised
//! weights (the CPU backend) the whole block runs on the host ([`super::host_ffn`]).

use burn::module::Module;
use burn::tensor::activation::{gelu_approximate, silu};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use super::arch::Activation;
use super::linear::Linear;

/// Gated feed-forward block.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `[hidden, ffn]`.
    pub w_gate: Linear<B>,
    /// `[hidden, ffn]`.
    pub w_up: Linear<B>,
    /// `[ffn, hidden]`.
    pub w_down: Linear<B>,
    /// The gate's activation.
    #[module(skip)]
    pub activation: Activation,
}

impl<B: Backend> FeedForward<B> {
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        #[cfg(feature = "flex")]
        if let (Some(gate), Some(up), Some(down)) = (
            self.w_gate.quant.as_deref(),
            self.w_up.quant.as_deref(),
            self.w_down.quant.as_deref(),
        ) {
            return super::host_ffn::forward([gate, up, down], self.activation, x);
        }
        let gate = self.w_gate.forward(x.clone()); // [t, ffn]
        let up = self.w_up.forward(x);
        let gate = match self.activation {
            Activation::Silu => silu(gate),
            Activation::GeluTanh => gelu_approximate(gate),
        };
        self.w_down.forward(gate * up)
    }
}
