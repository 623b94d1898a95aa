//! The rate of the quantised-weight prefill product on this CPU, f32 tiles against the integer
//! kernels (`--kernels f32|int8`), on a prefill-shaped product: `tokens × cols` activations times
//! a `rows × cols` weight of one GGUF type with random quants (default 2048 × 896 → 4864 in
//! `Q4_K`, Qwen2.5-Coder-0.5B's feed-forward at a 2K prefill), best of `REPEATS`, in multiply-adds
//! per second (docs/speed.md). Set `RAYON_NUM_THREADS=1` for one core.
//!
//! `cargo run --release -p kvplan-runtime --example quant_peak -- [TYPE] [TOKENS COLS ROWS] [REPEATS]`
use std::time::Instant;

use kvplan_runtime::gguf::GgmlType;
use kvplan_runtime::model::quant::{set_kernels, Kernels, QuantMatrix, QuantRows};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).peekable();
    let ty = match args.peek().map(|s| s.as_str()) {
        Some("q4_0") => GgmlType::Q4_0,
        Some("q5_0") => GgmlType::Q5_0,
        Some("q8_0") => GgmlType::Q8_0,
        Some("q6_k") => GgmlType::Q6K,
        Some("q4_k") => GgmlType::Q4K,
        _ => GgmlType::Q4K,
    };
    if args.peek().is_some_and(|s| s.starts_with('q')) {
        args.next();
    }
    let n: Vec<usize> = args.map(|s| s.parse()).collect::<Result<_, _>>()?;
    let (t, cols, rows) = match n[..] {
        [t, c, r, ..] => (t, c, r),
        _ => (2048, 896, 4864),
    };
    let repeats = n.get(3).copied().unwrap_or(3).max(1);
    // Random bytes; every f16 scale (offsets by type) set to a small finite value.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut bytes: Vec<u8> = (0..rows * ty.row_bytes(cols as u64) as usize)
        .map(|_| next() as u8)
        .collect();
    let scales: &[usize] = match ty {
        GgmlType::Q6K => &[208],
        GgmlType::Q4K => &[0, 2],
        _ => &[0],
    };
    for b in bytes.chunks_exact_mut(ty.block_bytes()) {
        for &at in scales {
            let v = half::f16::from_f32(((next() % 1000) as f32 - 500.0) * 1e-5);
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    let w = QuantMatrix::stack(vec![QuantRows::new(ty, rows, cols, bytes)?])?;
    let x: Vec<f32> = (0..t * cols)
        .map(|_| (next() % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let macs = (t * cols * rows) as f64;
    println!(
        "{ty:?} {t} × {cols} → {rows}, {} threads, best of {repeats} after a warm-up",
        rayon::current_num_threads()
    );
    for k in [Kernels::F32, Kernels::Int8] {
        set_kernels(k);
        let mut best = f64::INFINITY;
        for run in 0..=repeats {
            let start = Instant::now();
            let y = w.matmul(&x, t);
            let s = start.elapsed().as_secs_f64();
            std::hint::black_box(y);
            if run > 0 {
                best = best.min(s);
            }
        }
        println!(
            "{k:>5}: {:.3} s  {:.1} G multiply-adds/s",
            best,
            macs / best / 1e9
        );
    }
    Ok(())
}
