//! The gated feed-forward on the host, for quantised weights on the CPU backend (`flex`): the
//! activations go to the host once, the gate and up products read them there
//! ([`super::quant::QuantMatrix::matmul`]), `act(gate) ⊙ up` is one vectorised pass, and only the
//! down projection's output goes back to burn — instead of a host round trip per product and
//! one burn pass per element-wise operation (GELU alone is eight).
//!
//! Both activations are `x·σ(z)`: SiLU with `z = x`; tanh-approximated GELU with
//! `z = 2·√(2/π)·(x + 0.044715·x³)`, since `½(1 + tanh(u)) = σ(2u)`. `σ(z)` is `1/(1 + e)` for
//! `z ≥ 0` and `e/(1 + e)` below, `e = e^(−|z|)` from the attention softmax's exponential
//! ([`super::softmax::exp_nonpositive`], within 10⁻⁶ relative), so no exponential overflows.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::arch::Activation;
use super::quant::QuantMatrix;
use super::softmax::exp_nonpositive;
use crate::cache::host_vec;

/// `down(act(gate(x)) ⊙ up(x))` with the three weights held quantised.
///
/// # Shapes
/// - x: `[t, hidden]` → `[t, hidden]`
pub fn forward<B: Backend>(
    [gate, up, down]: [&QuantMatrix; 3],
    activation: Activation,
    x: Tensor<B, 2>,
) -> Tensor<B, 2> {
    let [t, _] = x.dims();
    let device = x.device();
    let x = host_vec(x);
    let mut g = gate.matmul(&x, t); // [t][ffn]
    let u = up.matmul(&x, t);
    gated(&mut g, &u, activation);
    let out = down.matmul(&g, t); // [t][hidden]
    Tensor::from_data(TensorData::new(out, [t, down.rows()]), &device)
}

multiversioned! {
    /// `g ← act(g) ⊙ u`, element-wise; AVX-512F or AVX2 + FMA where the CPU has them (the same
    /// arithmetic: no FMA contraction in Rust).
    pub(crate) fn gated(g: &mut [f32], u: &[f32], activation: Activation) = gated_body;
}

#[inline(always)]
fn gated_body(g: &mut [f32], u: &[f32], activation: Activation) {
    match activation {
        Activation::Silu => {
            for (g, &u) in g.iter_mut().zip(u) {
                *g = *g * sigmoid(*g) * u;
            }
        }
        Activation::GeluTanh => {
            // 2·√(2/π), as burn's `gelu_approximate` forms √(2/π).
            const TWO_SQRT_2_OVER_PI: f32 =
                (2.0 * std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::FRAC_1_SQRT_2) as f32;
            for (g, &u) in g.iter_mut().zip(u) {
                let x = *g;
                let z = TWO_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x));
                *g = x * sigmoid(z) * u;
            }
        }
    }
}

/// `σ(z) = 1/(1 + e^(−z))`, branch-free.
#[inline(always)]
fn sigmoid(z: f32) -> f32 {
    let e = exp_nonpositive(-z.abs());
    let r = 1.0 / (1.0 + e);
    if z >= 0.0 {
        r
    } else {
        e * r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SiLU and tanh-GELU against their definitions in f64, over both signs and the tails.
    #[test]
    fn gated_activations_match_their_definitions() {
        let xs: Vec<f32> = (-400..=400).map(|i| i as f32 * 0.05).collect();
        let ups: Vec<f32> = xs.iter().map(|x| 1.0 + 0.1 * x).collect();
        for activation in [Activation::Silu, Activation::GeluTanh] {
            let mut got = xs.clone();
            gated(&mut got, &ups, activation);
            for ((&x, &u), g) in xs.iter().zip(&ups).zip(&got) {
                let x64 = x as f64;
                let act = match activation {
                    Activation::Silu => x64 / (1.0 + (-x64).exp()),
                    Activation::GeluTanh => {
                        let k = (2.0 / std::f64::consts::PI).sqrt();
                        0.5 * x64 * (1.0 + (k * (x64 + 0.044715 * x64.powi(3))).tanh())
                    }
                };
                let want = act * u as f64;
                assert!(
                    (*g as f64 - want).abs() <= 2e-6 * want.abs() + 1e-7,
                    "{activation:?}({x})·{u} = {g}, want {want}"
                );
            }
        }
    }
}
