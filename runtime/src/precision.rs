//! How the model's float products run: fast (the backend's own matmul) or exact (float32 results
//! without the GPU's reduced-precision products).
//!
//! **Why.** burn's CUDA backend multiplies `f32` matrices on tensor cores in TF32 (cubek-matmul
//! 0.2, `definition/blueprint.rs`, `adjust_dtypes`: an accelerated tile matmul stages f32 inputs
//! as TF32, 10 mantissa bits, whenever the device supports TF32), and neither burn 0.21 nor cubecl
//! 0.10 has a setting that turns it off: the matmul autotuner (burn-cubecl
//! `kernel/matmul/tune/base.rs`) picks among accelerated and plain kernels by speed alone. Then
//! logits differ from a float32 reference by a few hundredths, which is over the parity tests'
//! float32 tolerances.
//!
//! **Exact mode.** With [`set_exact`] (or `KVPLAN_EXACT=1` in the environment) every product of
//! the model — projections, `Q·Kᵀ`, `P·V` — casts its operands to f64 and the result back to f32.
//! No backend stages f64 as TF32 (`adjust_dtypes` leaves it alone), and an f64 product of f32
//! inputs is at least as accurate as the CPU's f32 one, so the results meet the CPU's float32
//! tolerances. It is slower (f64 is not run on tensor cores) and meant for checks, not for
//! profiling runs. On the CPU backends it changes nothing worth having: their f32 products are
//! already plain f32. Exact mode also keeps the weights in f32 (see
//! [`crate::model::WeightStorage::default_for`]).

use std::sync::atomic::{AtomicU8, Ordering};

use burn::tensor::backend::Backend;
use burn::tensor::{FloatDType, Tensor};

/// The environment variable that turns exact mode on (`1` or `true`).
pub const EXACT_ENV: &str = "KVPLAN_EXACT";

/// 0: not decided yet (read the environment), 1: fast, 2: exact.
static MODE: AtomicU8 = AtomicU8::new(0);

/// Turns exact products on or off for this process, over the environment.
pub fn set_exact(on: bool) {
    MODE.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Whether products run exactly: [`set_exact`]'s choice, else `KVPLAN_EXACT`.
pub fn exact() -> bool {
    match MODE.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let on = std::env::var(EXACT_ENV).is_ok_and(|v| v == "1" || v == "true");
            set_exact(on);
            on
        }
    }
}

/// `a · b` (burn's batched matmul), in f64 when [`exact`], else in the backend's own way.
pub fn matmul<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    matmul_in(exact(), a, b)
}

/// `a · b`, in f64 when `exact`.
fn matmul_in<B: Backend, const D: usize>(
    exact: bool,
    a: Tensor<B, D>,
    b: Tensor<B, D>,
) -> Tensor<B, D> {
    if exact {
        a.cast(FloatDType::F64)
            .matmul(b.cast(FloatDType::F64))
            .cast(FloatDType::F32)
    } else {
        a.matmul(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type B = crate::backend::Selected;

    #[test]
    fn exact_products_equal_the_f64_product_rounded_once() {
        // The exact product is the f64 sum of the f32 operands' products, rounded to f32 once
        // (worked here in f64 by hand); the fast one is within two f32 roundings of it.
        let device = Default::default();
        let a = Tensor::<B, 2>::from_floats([[1.0 / 3.0, 0.1, 0.3]], &device);
        let b = Tensor::<B, 2>::from_floats([[3.0], [0.2], [0.4]], &device);
        let want = ((1.0f32 / 3.0) as f64 * 3.0
            + 0.1f32 as f64 * 0.2f32 as f64
            + 0.3f32 as f64 * 0.4f32 as f64) as f32;
        let got: Vec<f32> = matmul_in(true, a.clone(), b.clone())
            .into_data()
            .iter::<f32>()
            .collect();
        assert_eq!(got, vec![want]);
        let fast: Vec<f32> = matmul_in(false, a, b).into_data().iter::<f32>().collect();
        assert!((fast[0] - want).abs() <= 2.0 * f32::EPSILON * want.abs());
    }
}
