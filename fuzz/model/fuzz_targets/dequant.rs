//! Every dequantiser on random blocks: `GgmlType::dequantize` (what the loader uses) against
//! `QuantMatrix::dequantize_rows` (the model's row path, AVX2 where the CPU has it) bit for bit,
//! and for the types whose formula is one line in ggml's reference C code (`ggml-quants.c`:
//! `dequantize_row_q4_0` …) against that formula written out here.
#![no_main]

use half::{bf16, f16};
use kvplan_runtime::gguf::GgmlType::{self, *};
use kvplan_runtime::model::quant::{QuantMatrix, QuantRows};
use libfuzzer_sys::fuzz_target;

const TYPES: [GgmlType; 11] = [F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4K, Q5K, Q6K];

fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn h(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// The 32 five-bit quants of a Q5 block: nibbles `qs`, fifth bits in `qh`.
fn q5(qh: &[u8], qs: &[u8]) -> Vec<i32> {
    let high = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    (0..32)
        .map(|j| {
            let nib = if j < 16 {
                qs[j] & 0x0F
            } else {
                qs[j - 16] >> 4
            };
            i32::from(nib) | ((((high >> j) & 1) as i32) << 4)
        })
        .collect()
}

/// ggml's reference formula for one block, where it is one line.
fn reference(ty: GgmlType, b: &[u8]) -> Option<Vec<f32>> {
    let nib = |j: usize, qs: &[u8]| -> i32 {
        if j < 16 {
            i32::from(qs[j] & 0x0F)
        } else {
            i32::from(qs[j - 16] >> 4)
        }
    };
    Some(match ty {
        F32 => vec![f32::from_le_bytes([b[0], b[1], b[2], b[3]])],
        F16 => vec![h(b, 0)],
        BF16 => vec![bf16::from_le_bytes([b[0], b[1]]).to_f32()],
        Q8_0 => (0..32)
            .map(|j| f32::from(b[2 + j] as i8) * h(b, 0))
            .collect(),
        Q4_0 => (0..32)
            .map(|j| (nib(j, &b[2..]) - 8) as f32 * h(b, 0))
            .collect(),
        Q4_1 => (0..32)
            .map(|j| nib(j, &b[4..]) as f32 * h(b, 0) + h(b, 2))
            .collect(),
        Q5_0 => q5(&b[2..6], &b[6..22])
            .into_iter()
            .map(|q| (q - 16) as f32 * h(b, 0))
            .collect(),
        Q5_1 => q5(&b[4..8], &b[8..24])
            .into_iter()
            .map(|q| q as f32 * h(b, 0) + h(b, 2))
            .collect(),
        Q4K | Q5K | Q6K => return None,
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let ty = TYPES[data[0] as usize % TYPES.len()];
    let rows = 1 + data[1] as usize % 3;
    let body = &data[2..];
    // Rows of whole model steps (32 weights, or one 256-weight super-block).
    let step = ty.block_size().max(32);
    let step_bytes = ty.row_bytes(step as u64) as usize;
    let steps = body.len() / rows / step_bytes;
    if steps == 0 {
        return;
    }
    let cols = steps * step;
    let bytes = &body[..rows * steps * step_bytes];
    let whole = ty
        .dequantize(bytes, rows * cols)
        .unwrap_or_else(|e| panic!("{ty:?}: {e}"));
    let q = QuantRows::new(ty, rows, cols, bytes.to_vec()).unwrap_or_else(|e| panic!("{e}"));
    let q = QuantMatrix::stack(vec![q]).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<usize> = (0..rows).rev().collect();
    let got = q.dequantize_rows(&ids);
    for (k, &r) in ids.iter().enumerate() {
        for c in 0..cols {
            let (a, b) = (got[k * cols + c], whole[r * cols + c]);
            assert!(
                same(a, b),
                "{ty:?} row {r} col {c}: rows path {a}, dequantize {b}"
            );
        }
    }
    let bb = ty.block_bytes();
    for (i, block) in bytes.chunks_exact(bb).enumerate() {
        if let Some(want) = reference(ty, block) {
            let n = want.len();
            for (j, (&a, &b)) in whole[i * n..(i + 1) * n].iter().zip(&want).enumerate() {
                assert!(
                    same(a, b),
                    "{ty:?} block {i} value {j}: {a}, ggml's formula {b}"
                );
            }
        }
    }
});
