//! The f32 matrix-product rate this CPU reaches through the `gemm` crate kvplan's CPU kernels use
//! (x86-v4 microkernels where the CPU has AVX-512), on a prefill-shaped product: `tokens × hidden`
//! times `hidden × width` (default 2048 × 896 × 4864, Qwen2.5-Coder-0.5B's feed-forward at a
//! 2K prefill), one thread and all of rayon's, best of `REPEATS`. A ceiling to set a prefill's
//! GFLOP/s against (docs/speed.md).
//!
//! `cargo run --release -p kvplan-runtime --example gemm_peak -- [M K N] [REPEATS]`
use gemm::{gemm, Parallelism};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let (m, k, n) = match args[..] {
        [m, k, n, ..] => (m, k, n),
        _ => (2048, 896, 4864),
    };
    let repeats = args.get(3).copied().unwrap_or(5).max(1);
    let lhs: Vec<f32> = (0..m * k)
        .map(|i| ((i % 97) as f32 - 48.0) / 97.0)
        .collect();
    let rhs: Vec<f32> = (0..k * n)
        .map(|i| ((i % 89) as f32 - 44.0) / 89.0)
        .collect();
    let mut dst = vec![0.0f32; m * n];
    let threads = rayon::current_num_threads();
    println!("f32 product {m} × {k} · {k} × {n}, best of {repeats} after a warm-up");
    for (name, par) in [
        ("1 thread", Parallelism::None),
        ("rayon", Parallelism::Rayon(threads)),
    ] {
        let mut best = f64::INFINITY;
        for run in 0..=repeats {
            let t = Instant::now();
            // SAFETY: dst is m × n, lhs m × k and rhs k × n, all row-major and owned here.
            unsafe {
                gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    lhs.as_ptr(),
                    1,
                    k as isize,
                    rhs.as_ptr(),
                    1,
                    n as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    par,
                );
            }
            if run > 0 {
                best = best.min(t.elapsed().as_secs_f64());
            }
        }
        let gflops = 2.0 * (m * k * n) as f64 / best / 1e9;
        let label = if name == "rayon" {
            format!("{threads} threads")
        } else {
            name.to_string()
        };
        println!("{label:>10}: {:.2} ms, {gflops:.1} GFLOP/s", best * 1e3);
    }
    std::hint::black_box(&dst);
    Ok(())
}
