//! Times the quantised host kernels against an f32 matmul of the same shape (developer aid):
//! `RAYON_NUM_THREADS=1 cargo run --release --example quant_bench` (one thread: per-core numbers).

use std::time::Instant;

use kvplan_runtime::gguf::GgmlType;
use kvplan_runtime::model::quant::{QuantMatrix, QuantRows};

fn matrix(ty: GgmlType, rows: usize, cols: usize) -> QuantMatrix {
    let n = rows * ty.row_bytes(cols as u64) as usize;
    let mut bytes: Vec<u8> = (0..n).map(|i| ((i * 2_654_435_761) >> 13) as u8).collect();
    for b in bytes.chunks_exact_mut(ty.block_bytes()) {
        let at = if ty == GgmlType::Q6K { 208 } else { 0 };
        b[at..at + 2].copy_from_slice(&0x211Fu16.to_le_bytes() /* 0.01 as f16 */);
        if matches!(ty, GgmlType::Q4_1 | GgmlType::Q4K | GgmlType::Q5K) {
            b[2..4].copy_from_slice(&0x211Fu16.to_le_bytes() /* 0.01 as f16 */);
        }
    }
    QuantMatrix::stack(vec![QuantRows::new(ty, rows, cols, bytes).unwrap()]).unwrap()
}

fn time(what: &str, weights: usize, reps: usize, mut f: impl FnMut()) {
    f();
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    let s = start.elapsed().as_secs_f64() / reps as f64;
    println!(
        "{what:40} {:8.3} ms  {:6.2} Gweights/s",
        s * 1e3,
        weights as f64 / s / 1e9
    );
}

fn main() {
    {
        let (rows, cols) = (576, 1536);
        let x: Vec<f32> = (0..cols * 64).map(|i| (i % 7) as f32 * 0.1).collect();
        let w: Vec<f32> = (0..rows * cols).map(|i| (i % 5) as f32).collect();
        time("f32 matvec (plain loop)", rows * cols, 200, || {
            let y: Vec<f32> = w
                .chunks_exact(cols)
                .map(|r| r.iter().zip(&x[..cols]).map(|(a, b)| a * b).sum())
                .collect();
            std::hint::black_box(y);
        });
        for ty in [
            GgmlType::Q4_1,
            GgmlType::Q8_0,
            GgmlType::Q4K,
            GgmlType::Q6K,
            GgmlType::Q5_0,
        ] {
            let m = matrix(ty, rows, cols);
            time(
                &format!("{ty:?} matvec {rows}x{cols}"),
                rows * cols,
                200,
                || {
                    std::hint::black_box(m.matmul(&x[..cols], 1));
                },
            );
            time(
                &format!("{ty:?} dequantize {rows}x{cols}"),
                rows * cols,
                50,
                || {
                    std::hint::black_box(m.dequantize());
                },
            );
            time(&format!("{ty:?} matmul t=64"), rows * cols * 64, 10, || {
                std::hint::black_box(m.matmul(&x, 64));
            });
        }
    }
}
