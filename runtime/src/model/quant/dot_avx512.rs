//! [`super::dot_avx2`]'s dot products in 16 lanes, for every type it has: a 32-weight
//! block (`Q4_0`, `Q4_1`, `Q5_0`, `Q8_0`) is two vectors of 16 quants, unpacked straight to `i32`
//! (the nibbles of 16 bytes are the block's first and second halves; a `Q5_0` block's fifth bits
//! are a 16-bit mask per half); a `Q4_K` sub-block of 32 is two vectors, a `Q6_K` sub-block of 16
//! one. Quants are converted to f32 and multiplied with the activations; the (sub-)block scale is
//! applied once per (sub-)block and a minimum (`Q4_1`, `Q4_K`) as `m·Σx`
//! ([`super::dot_avx2::block_sums`]), as there.
//!
//! Activations stay f32: the result is the f32 product of the exact dequantised weights, up to
//! the order and grouping of the sums (16 lane sums instead of 8).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::dot_avx2::scale_min_k4;
use crate::gguf::GgmlType;

/// Whether [`dot_rows`] has a kernel for `ty`.
pub(super) fn supports(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q8_0
            | GgmlType::Q4K
            | GgmlType::Q6K
    )
}

/// `out[i] = Σ_j w[j]·x_i[j]` for the row `row` (its bytes, type `ty`, one of [`supports`]) and
/// the `R` activation rows `x_i` of `xs` (`[R][cols]`; `sums`: their block sums, `[R][cols/32]`);
/// `f16`: the f16→f32 table. The quants of a block are decoded once for the `R` rows; each row
/// then takes the operations of the one-row kernel in its order, so a row's result does not
/// depend on `R` or on the other rows (a batch of decode steps gives each step's own numbers).
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn dot_rows<const R: usize>(
    ty: GgmlType,
    row: &[u8],
    xs: &[f32],
    sums: &[f32],
    f16: &[f32],
    out: &mut [f32],
) {
    let (bs, bb) = (ty.block_size(), ty.block_bytes());
    let cols = xs.len() / R;
    let per_row = sums.len() / R;
    debug_assert!(xs.len() == R * cols && out.len() == R && row.len() / bb * bs == cols);
    let x = |i: usize, at: usize| xs.as_ptr().add(i * cols + at);
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let mut acc = [_mm512_setzero_ps(); R];
    let mut mins = [0f32; R];
    let blocks = row
        .chunks_exact(bb)
        .inspect(|b| crate::model::prefetch::ahead(b.as_ptr(), b.len()))
        .enumerate();
    match ty {
        GgmlType::Q8_0 => {
            for (n, b) in blocks {
                let q = &b[2..34];
                let at = |o: usize| _mm512_cvtepi8_epi32(_mm_loadu_si128(q.as_ptr().add(o).cast()));
                let q = floats([at(0), at(16)]);
                let d = _mm512_set1_ps(half(b, 0));
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(d, dot2(q, x(i, n * 32)), *a);
                }
            }
        }
        GgmlType::Q4_0 => {
            let eight = _mm512_set1_epi32(8);
            for (n, b) in blocks {
                let [lo, hi] = nibbles(&b[2..18]);
                let q = floats([_mm512_sub_epi32(lo, eight), _mm512_sub_epi32(hi, eight)]);
                let d = _mm512_set1_ps(half(b, 0));
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(d, dot2(q, x(i, n * 32)), *a);
                }
            }
        }
        GgmlType::Q4_1 => {
            for (n, b) in blocks {
                let q = floats(nibbles(&b[4..20]));
                let (d, m) = (_mm512_set1_ps(half(b, 0)), half(b, 2));
                for (i, (a, mi)) in acc.iter_mut().zip(&mut mins).enumerate() {
                    *a = _mm512_fmadd_ps(d, dot2(q, x(i, n * 32)), *a);
                    *mi = m.mul_add(sums[i * per_row + n], *mi);
                }
            }
        }
        GgmlType::Q5_0 => {
            let sixteen = _mm512_set1_epi32(16);
            for (n, b) in blocks {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                let [lo, hi] = nibbles(&b[6..22]);
                // Bit j of qh is the fifth bit of quant j: `q | 16` (q < 16) where it is set.
                let lo = _mm512_mask_add_epi32(lo, qh as u16, lo, sixteen);
                let hi = _mm512_mask_add_epi32(hi, (qh >> 16) as u16, hi, sixteen);
                let q = floats([_mm512_sub_epi32(lo, sixteen), _mm512_sub_epi32(hi, sixteen)]);
                let d = _mm512_set1_ps(half(b, 0));
                for (i, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(d, dot2(q, x(i, n * 32)), *a);
                }
            }
        }
        GgmlType::Q4K => {
            let mask = _mm512_set1_epi32(0x0F);
            for (n, b) in blocks {
                let (d, dmin) = (half(b, 0), half(b, 2));
                let scales = &b[4..16];
                for (chunk, qs) in b[16..144].chunks_exact(32).enumerate() {
                    let bytes = [0, 16]
                        .map(|o| _mm512_cvtepu8_epi32(_mm_loadu_si128(qs.as_ptr().add(o).cast())));
                    // Sub-block 2·chunk: the low nibbles of the 32 bytes; 2·chunk + 1: the high.
                    let planes = [
                        bytes.map(|v| _mm512_and_si512(v, mask)),
                        bytes.map(|v| _mm512_srli_epi32::<4>(v)),
                    ];
                    for (plane, q) in planes.into_iter().enumerate() {
                        let sub = 2 * chunk + plane;
                        let (sc, m) = scale_min_k4(sub, scales);
                        let (q, scale, min) = (floats(q), _mm512_set1_ps(d * sc), -(dmin * m));
                        let at = n * 256 + sub * 32;
                        for (i, (a, mi)) in acc.iter_mut().zip(&mut mins).enumerate() {
                            *a = _mm512_fmadd_ps(scale, dot2(q, x(i, at)), *a);
                            *mi = min.mul_add(sums[i * per_row + n * 8 + sub], *mi);
                        }
                    }
                }
            }
        }
        GgmlType::Q6K => {
            let (mask4, mask2, bias) = (
                _mm512_set1_epi32(0x0F),
                _mm512_set1_epi32(3),
                _mm512_set1_epi32(32),
            );
            for (n, b) in blocks {
                let d = half(b, 208);
                for part in 0..2 {
                    let ql = &b[part * 64..part * 64 + 64];
                    let qh = &b[128 + part * 32..128 + part * 32 + 32];
                    let sc = &b[192 + part * 8..192 + part * 8 + 8];
                    let load = |bytes: &[u8], o: usize| {
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr().add(o).cast()))
                    };
                    let highs = [load(qh, 0), load(qh, 16)];
                    for (j, &scale) in sc.iter().enumerate() {
                        // Sub-block j: elements 16j..16j+16 of the half, plane k = j / 2: the
                        // nibble at 4·(k div 2) of ql[l + 32·(k mod 2)], bits 2k of qh[l] above
                        // it, less 32.
                        let (k, l) = (j / 2, 16 * (j % 2));
                        let lo = load(ql, 32 * (k % 2) + l);
                        let lo = _mm512_and_si512(
                            _mm512_srlv_epi32(lo, _mm512_set1_epi32(4 * (k / 2) as i32)),
                            mask4,
                        );
                        let hi = _mm512_srlv_epi32(highs[l / 16], _mm512_set1_epi32(2 * k as i32));
                        let hi = _mm512_slli_epi32(_mm512_and_si512(hi, mask2), 4);
                        let q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(lo, hi), bias));
                        let scale = _mm512_set1_ps(d * scale as i8 as f32);
                        let at = n * 256 + part * 128 + 32 * k + l;
                        for (i, a) in acc.iter_mut().enumerate() {
                            let p = _mm512_mul_ps(q, _mm512_loadu_ps(x(i, at)));
                            *a = _mm512_fmadd_ps(scale, p, *a);
                        }
                    }
                }
            }
        }
        _ => unreachable!("dot_avx512::dot_rows called for {ty:?}"),
    }
    for ((o, a), m) in out.iter_mut().zip(acc).zip(mins) {
        *o = _mm512_reduce_add_ps(a) + m;
    }
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

/// A block's quants as f32 (exact: small integers).
#[inline(always)]
unsafe fn floats(q: [__m512i; 2]) -> [__m512; 2] {
    q.map(|q| _mm512_cvtepi32_ps(q))
}

/// `Σ q·x` over one block in 16 lanes, `q` the block's 32 quants in two groups of 16, `x` its 32
/// activations.
#[inline(always)]
unsafe fn dot2(q: [__m512; 2], x: *const f32) -> __m512 {
    let p = _mm512_mul_ps(q[0], _mm512_loadu_ps(x));
    _mm512_fmadd_ps(q[1], _mm512_loadu_ps(x.add(16)), p)
}
