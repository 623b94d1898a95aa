//! [`super::dot_avx2`]'s one-row dot products in 16 lanes, for the 32-weight block types
//! (`Q4_0`, `Q4_1`, `Q5_0`, `Q8_0`: the bulk of the committed models' weights and their
//! output heads): a block is two vectors of 16 quants, unpacked straight to `i32` (the nibbles
//! of 16 bytes are the block's first and second halves; a `Q5_0` block's fifth bits are a
//! 16-bit mask per half), converted to f32 and multiplied with the activations; the block scale
//! is applied once per block and a minimum (`Q4_1`) as `m·Σx` ([`super::dot_avx2::block_sums`]),
//! as there. The other types stay with the AVX2 kernels.
//!
//! Activations stay f32: the result is the f32 product of the exact dequantised weights, up to
//! the order and grouping of the sums (16 lane sums instead of 8).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::gguf::GgmlType;

/// Whether [`dot_row`] has a kernel for `ty`.
pub(super) fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q8_0
    )
}

/// `Σ_j w[j]·x[j]` for the row `row` (its bytes, type `ty`, one of [`supports`]) and the
/// activations `x` (`sums`: their block sums); `f16`: the f16→f32 table.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn dot_row(
    ty: GgmlType,
    row: &[u8],
    x: &[f32],
    sums: &[f32],
    f16: &[f32],
) -> f32 {
    let blocks = row
        .chunks_exact(ty.block_bytes())
        .zip(x.chunks_exact(ty.block_size()));
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let mut acc = _mm512_setzero_ps();
    let mut mins = 0f32;
    match ty {
        GgmlType::Q8_0 => {
            for (b, x) in blocks {
                let q = &b[2..34];
                let at = |o: usize| _mm512_cvtepi8_epi32(_mm_loadu_si128(q.as_ptr().add(o).cast()));
                let p = dot2([at(0), at(16)], x);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(half(b, 0)), p, acc);
            }
        }
        GgmlType::Q4_0 => {
            let eight = _mm512_set1_epi32(8);
            for (b, x) in blocks {
                let [lo, hi] = nibbles(&b[2..18]);
                let p = dot2(
                    [_mm512_sub_epi32(lo, eight), _mm512_sub_epi32(hi, eight)],
                    x,
                );
                acc = _mm512_fmadd_ps(_mm512_set1_ps(half(b, 0)), p, acc);
            }
        }
        GgmlType::Q4_1 => {
            for ((b, x), &s) in blocks.zip(sums) {
                let p = dot2(nibbles(&b[4..20]), x);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(half(b, 0)), p, acc);
                mins = half(b, 2).mul_add(s, mins);
            }
        }
        GgmlType::Q5_0 => {
            let sixteen = _mm512_set1_epi32(16);
            for (b, x) in blocks {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                let [lo, hi] = nibbles(&b[6..22]);
                // Bit j of qh is the fifth bit of quant j: `q | 16` (q < 16) where it is set.
                let lo = _mm512_mask_add_epi32(lo, qh as u16, lo, sixteen);
                let hi = _mm512_mask_add_epi32(hi, (qh >> 16) as u16, hi, sixteen);
                let q = [_mm512_sub_epi32(lo, sixteen), _mm512_sub_epi32(hi, sixteen)];
                acc = _mm512_fmadd_ps(_mm512_set1_ps(half(b, 0)), dot2(q, x), acc);
            }
        }
        _ => unreachable!("dot_avx512::dot_row called for {ty:?}"),
    }
    _mm512_reduce_add_ps(acc) + mins
}

/// The 32 nibbles of 16 bytes as two groups of 16 `i32`: the low nibbles (quants 0–15), then
/// the high ones (16–31), ggml's order.
#[inline(always)]
unsafe fn nibbles(qs: &[u8]) -> [__m512i; 2] {
    debug_assert!(qs.len() >= 16);
    let bytes = _mm_loadu_si128(qs.as_ptr().cast());
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(bytes, mask);
    let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    [_mm512_cvtepu8_epi32(lo), _mm512_cvtepu8_epi32(hi)]
}

/// `Σ q·x` over one block in 16 lanes, `q` the block's 32 quants in two groups of 16.
#[inline(always)]
unsafe fn dot2(q: [__m512i; 2], x: &[f32]) -> __m512 {
    debug_assert!(x.len() >= 32);
    let xp = x.as_ptr();
    let p = _mm512_mul_ps(_mm512_cvtepi32_ps(q[0]), _mm512_loadu_ps(xp));
    _mm512_fmadd_ps(_mm512_cvtepi32_ps(q[1]), _mm512_loadu_ps(xp.add(16)), p)
}
