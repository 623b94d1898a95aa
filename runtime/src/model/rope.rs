//! Rotary position embedding (RoPE), in the rotate-half convention of Hugging Face transformers.
//!
//! The loader ([`super::loader`]) un-permutes the rows of `attn_q`/`attn_k` from llama.cpp's
//! interleaved order into Hugging Face's order, so here dimension `j < d/2` pairs with `j + d/2`:
//! `out = x·cos + rotate_half(x)·sin`, `rotate_half(x) = [−x₂, x₁]`, angle `pos · θ^(−2j/d)`.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Precomputed cos/sin tables for positions `0..max_positions`.
#[derive(Debug, Clone)]
pub struct Rope<B: Backend> {
    cos: Tensor<B, 2>,
    sin: Tensor<B, 2>,
    max_positions: usize,
    head_dim: usize,
    cos_host: Vec<f32>,
    sin_host: Vec<f32>,
}

impl<B: Backend> Rope<B> {
    /// Tables for `head_dim` (even) and base `theta`.
    pub fn new(head_dim: usize, theta: f64, max_positions: usize, device: &B::Device) -> Self {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(max_positions * head_dim);
        let mut sin = Vec::with_capacity(max_positions * head_dim);
        // Frequencies as transformers computes them: inv_freq in float32, then pos · inv_freq.
        let inv_freq: Vec<f32> = (0..half)
            .map(|j| (1.0 / theta.powf(2.0 * j as f64 / head_dim as f64)) as f32)
            .collect();
        for pos in 0..max_positions {
            for _ in 0..2 {
                for f in &inv_freq {
                    let angle = pos as f32 * f;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
        }
        let shape = [max_positions, head_dim];
        Self {
            cos: Tensor::from_data(TensorData::new(cos.clone(), shape), device),
            sin: Tensor::from_data(TensorData::new(sin.clone(), shape), device),
            max_positions,
            head_dim,
            cos_host: cos,
            sin_host: sin,
        }
    }

    /// Largest position + 1 the tables cover.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The tables on the host, `[max_positions, head_dim]` row-major (cos, sin).
    pub fn host_tables(&self) -> (&[f32], &[f32]) {
        (&self.cos_host, &self.sin_host)
    }

    /// Rotates `x` `[heads, t, head_dim]` by the angles of `positions` (`t` of them).
    ///
    /// # Shapes
    /// - x: `[heads, t, head_dim]`, positions: `[t]` → `[heads, t, head_dim]`
    pub fn apply(&self, x: Tensor<B, 3>, positions: Tensor<B, 1, Int>) -> Tensor<B, 3> {
        let half = self.head_dim / 2;
        let cos = self
            .cos
            .clone()
            .select(0, positions.clone())
            .unsqueeze_dim(0); // [1, t, d]
        let sin = self.sin.clone().select(0, positions).unsqueeze_dim(0);
        let x1 = x.clone().narrow(2, 0, half);
        let x2 = x.clone().narrow(2, half, half);
        let rotated = Tensor::cat(vec![x2.neg(), x1], 2);
        x * cos + rotated * sin
    }
}
