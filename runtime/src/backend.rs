//! The backend chosen by cargo feature: `cuda` (GPU) over `tch` (LibTorch) over `flex` (CPU,
//! the default). Code elsewhere is generic over `B: Backend`; only binaries pick this alias.
//!
//! **GPU warm start** ([`init`]). burn's CUDA backend compiles each kernel with NVRTC and autotunes
//! each matmul and fused kernel the first time a process meets its shape. cubecl 0.10 can keep
//! both on disk (cubecl-runtime `config/`: `[autotune] cache`, on by default in `target/` of the
//! nearest folder holding a `Cargo.toml`, else `~/.cache/cubecl`; `[compilation] cache`, the PTX
//! of every kernel, off by default). [`init`] turns both on in one folder, `<cache dir>/cubecl`
//! (`$KVPLAN_CUBECL_CACHE`, else `~/.cache/kvplan/cubecl`), unless a `cubecl.toml` (or a
//! `burn.toml` with a `[cubecl]` section) in the working folder or above says otherwise: then that
//! file is used as it is.

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

/// Threads the CPU kernels run on: rayon's pool (`RAYON_NUM_THREADS`, else the CPUs) on the CPU
/// backend, the CPUs elsewhere.
pub fn threads() -> usize {
    #[cfg(feature = "flex")]
    return rayon::current_num_threads();
    #[cfg(not(feature = "flex"))]
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The environment variable naming the folder of cubecl's kernel and autotune caches.
pub const CUBECL_CACHE_ENV: &str = "KVPLAN_CUBECL_CACHE";

/// Sets up the selected backend before its first use: on `cuda`, cubecl's on-disk caches (the
/// module header); nothing on the CPU backends. Call first thing in `main` (later calls do
/// nothing).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    #[cfg(feature = "cuda")]
    ONCE.call_once(cubecl_caches);
    #[cfg(not(feature = "cuda"))]
    ONCE.call_once(|| {});
}

/// The folder of cubecl's caches: `$KVPLAN_CUBECL_CACHE`, else `<cache root>/cubecl`.
pub fn cubecl_cache_dir() -> std::path::PathBuf {
    match std::env::var_os(CUBECL_CACHE_ENV) {
        Some(p) if !p.is_empty() => p.into(),
        _ => kvplan_common::paths::cache_root().join("cubecl"),
    }
}

#[cfg(feature = "cuda")]
fn cubecl_caches() {
    use burn::cubecl::config::cache::CacheConfig;
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    let mut config = CubeClRuntimeConfig::from_current_dir();
    let from_file = ["cubecl.toml", "CubeCL.toml", "burn.toml", "Burn.toml"]
        .iter()
        .any(|f| has_ancestor_file(f));
    if !from_file {
        let dir = cubecl_cache_dir();
        config.compilation.cache = Some(CacheConfig::File(dir.clone()));
        config.autotune.cache = CacheConfig::File(dir);
    }
    // `set` refuses a second configuration (it panics); `init` runs once, before any kernel.
    CubeClRuntimeConfig::set(config.override_from_env());
}

/// Whether `name` exists in the working folder or one above it (cubecl's own lookup).
#[cfg(feature = "cuda")]
fn has_ancestor_file(name: &str) -> bool {
    let Ok(mut dir) = std::env::current_dir() else {
        return false;
    };
    loop {
        if dir.join(name).is_file() {
            return true;
        }
        if !dir.pop() {
            return false;
        }
    }
}
