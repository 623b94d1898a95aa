//! A linear projection and the token embedding, each holding its weights either as an f32 tensor
//! or as the GGUF's quantised blocks ([`super::quant`]).
//!
//! f32 tensors are what training and `--weights` use; f16 tensors are the GPU backends' default,
//! upcast to f32 by each product (one matrix at a time: the f32 copy lives for that product only);
//! quantised blocks are the CPU backend's default ([`super::WeightStorage`]), multiplied on the
//! host without a whole f32 copy. A tied output projection shares the embedding's blocks.
//! Products go through [`crate::precision::matmul`] (exact mode: no TF32).

use std::sync::Arc;

use burn::module::{Module, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, FloatDType, Int, Tensor, TensorData};

use super::quant::QuantMatrix;

/// `x · W` with `W` `[in, out]`.
#[derive(Module, Debug)]
pub struct Linear<B: Backend> {
    /// `[in, out]` f32 or f16 weights; `None` while they stay quantised.
    pub weight: Option<Param<Tensor<B, 2>>>,
    /// The GGUF's blocks, `[out, in]` rows (CPU backend only).
    pub quant: Option<Arc<QuantMatrix>>,
}

impl<B: Backend> Linear<B> {
    /// f32 (or f16) weights `[in, out]`.
    pub fn dense(w: Tensor<B, 2>) -> Self {
        Self {
            weight: Some(Param::from_tensor(w)),
            quant: None,
        }
    }

    /// Quantised weights `[out, in]`, multiplied on the host.
    #[cfg(feature = "flex")]
    pub fn quantised(q: Arc<QuantMatrix>) -> Self {
        Self {
            weight: None,
            quant: Some(q),
        }
    }

    /// Whether the weights are an f32 tensor (trainable, on any backend).
    pub fn is_dense(&self) -> bool {
        self.weight
            .as_ref()
            .is_some_and(|w| w.dtype() == DType::F32)
    }

    /// Bytes the weights take where they live (device tensor or host blocks).
    pub fn bytes(&self) -> usize {
        match (&self.weight, &self.quant) {
            (Some(w), _) => w.shape().num_elements() * w.dtype().size(),
            (None, Some(q)) => q.bytes(),
            (None, None) => 0,
        }
    }

    /// The f32 weights `[in, out]`, dequantised when held quantised (tests, conversions).
    pub fn to_dense(&self, device: &B::Device) -> Tensor<B, 2> {
        if let Some(w) = &self.weight {
            return w.val().cast(FloatDType::F32);
        }
        let q = self.quant_matrix();
        let w = Tensor::<B, 2>::from_data(
            TensorData::new(q.dequantize(), [q.rows(), q.cols()]),
            device,
        );
        w.transpose()
    }

    fn quant_matrix(&self) -> &QuantMatrix {
        self.quant
            .as_deref()
            .expect("a Linear holds f32 or quantised weights (its constructors)")
    }

    /// # Shapes
    /// - x: `[t, in]` → `[t, out]`
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        match &self.weight {
            Some(w) => crate::precision::matmul(x, w.val().cast(FloatDType::F32)),
            None => quantised_product(self.quant_matrix(), x),
        }
    }
}

/// `x · Wᵀ` on the host for weights `W` `[out, in]` held quantised.
///
/// # Shapes
/// - x: `[t, in]` → `[t, out]`
fn quantised_product<B: Backend>(q: &QuantMatrix, x: Tensor<B, 2>) -> Tensor<B, 2> {
    #[cfg(feature = "flex")]
    {
        let [t, _] = x.dims();
        let device = x.device();
        let host = crate::cache::host_vec(x);
        let out = q.matmul(&host, t);
        Tensor::from_data(TensorData::new(out, [t, q.rows()]), &device)
    }
    #[cfg(not(feature = "flex"))]
    {
        let _ = (q, x);
        unreachable!("quantised weights are only built for the CPU backend")
    }
}

/// The token embedding `[vocab, hidden]`.
#[derive(Module, Debug)]
pub struct Embedding<B: Backend> {
    /// `[vocab, hidden]` f32 or f16 rows; `None` while they stay quantised.
    pub weight: Option<Param<Tensor<B, 2>>>,
    /// The GGUF's blocks (CPU backend only).
    pub quant: Option<Arc<QuantMatrix>>,
}

impl<B: Backend> Embedding<B> {
    /// f32 rows `[vocab, hidden]`.
    pub fn dense(w: Tensor<B, 2>) -> Self {
        Self {
            weight: Some(Param::from_tensor(w)),
            quant: None,
        }
    }

    /// Quantised rows, dequantised one looked-up row at a time.
    #[cfg(feature = "flex")]
    pub fn quantised(q: Arc<QuantMatrix>) -> Self {
        Self {
            weight: None,
            quant: Some(q),
        }
    }

    /// Bytes the rows take where they live (device tensor or host blocks).
    pub fn bytes(&self) -> usize {
        match (&self.weight, &self.quant) {
            (Some(w), _) => w.shape().num_elements() * w.dtype().size(),
            (None, Some(q)) => q.bytes(),
            (None, None) => 0,
        }
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        match (&self.weight, &self.quant) {
            (Some(w), _) => w.dims()[0],
            (None, Some(q)) => q.rows(),
            (None, None) => 0,
        }
    }

    /// The rows of `ids`.
    ///
    /// # Shapes
    /// - ids: `t` tokens → `[t, hidden]`
    pub fn forward(&self, ids: &[u32], device: &B::Device) -> Tensor<B, 2> {
        let t = ids.len();
        if let Some(w) = &self.weight {
            let idx: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
            let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [t]), device);
            return w.val().select(0, idx).cast(FloatDType::F32);
        }
        let q = self
            .quant
            .as_deref()
            .expect("an Embedding holds f32 or quantised rows (its constructors)");
        let rows: Vec<usize> = ids.iter().map(|&i| i as usize).collect();
        Tensor::from_data(
            TensorData::new(q.dequantize_rows(&rows), [t, q.cols()]),
            device,
        )
    }
}
