//! The backend chosen by cargo feature: `cuda` (GPU) over `tch` (LibTorch) over `flex` (CPU,
//! the default). Code elsewhere is generic over `B: Backend`; only binaries pick this alias.

#[cfg(feature = "cuda")]
/// The selected backend.
pub type Selected = burn::backend::Cuda;

#[cfg(all(feature = "tch", not(feature = "cuda")))]
/// The selected backend.
pub type Selected = burn::backend::LibTorch;

#[cfg(all(feature = "flex", not(feature = "tch"), not(feature = "cuda")))]
/// The selected backend.
pub type Selected = burn::backend::Flex;

#[cfg(not(any(feature = "flex", feature = "tch", feature = "cuda")))]
compile_error!("kvplan-runtime needs one backend feature: flex (default), cuda or tch");

/// The selected backend's default device.
pub fn device() -> burn::tensor::Device<Selected> {
    Default::default()
}

/// Name of the selected backend, for reports.
pub fn name() -> &'static str {
    if cfg!(feature = "cuda") {
        "cuda"
    } else if cfg!(feature = "tch") {
        "tch"
    } else {
        "flex"
    }
}
