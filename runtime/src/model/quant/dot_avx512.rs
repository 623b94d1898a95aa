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
use super::rows::{Lanes, Rows};
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
    let mut rows = Rows::<Avx512, R>::new(xs, sums);
    debug_assert!(out.len() == R && row.len() / bb * bs == rows.cols);
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let blocks = row
        .chunks_exact(bb)
        .inspect(|b| crate::model::prefetch::ahead(b.as_ptr(), b.len()))
        .enumerate();
    match ty {
        GgmlType::Q8_0 => {
            for (n, b) in blocks {
                let q = &b[2..34];
                let at = |o: usize| _mm512_cvtepi8_epi32(_mm_loadu_si128(q.as_ptr().add(o).cast()));
                rows.scaled(half(b, 0), floats([at(0), at(16)]), n * 32);
            }
        }
        GgmlType::Q4_0 => {
            let eight = _mm512_set1_epi32(8);
            for (n, b) in blocks {
                let q = nibbles(&b[2..18]).map(|q| _mm512_sub_epi32(q, eight));
                rows.scaled(half(b, 0), floats(q), n * 32);
            }
        }
        GgmlType::Q4_1 => {
            for (n, b) in blocks {
                rows.scaled(half(b, 0), floats(nibbles(&b[4..20])), n * 32);
                rows.min(half(b, 2), n);
            }
        }
        GgmlType::Q5_0 => {
            for (n, b) in blocks {
                rows.scaled(half(b, 0), q5_0_quants(&b[2..22]), n * 32);
            }
        }
        GgmlType::Q4K => {
            for (n, b) in blocks {
                q4k_block(&mut rows, b, n, (half(b, 0), half(b, 2)));
            }
        }
        GgmlType::Q6K => {
            for (n, b) in blocks {
                q6k_block(&mut rows, b, n, half(b, 208));
            }
        }
        _ => unreachable!("dot_avx512::dot_rows called for {ty:?}"),
    }
    rows.finish(out);
}

/// 16 f32 lanes ([`Rows`]'s width in this kernel).
struct Avx512;

impl Lanes for Avx512 {
    type V = __m512;
    type Block = [__m512; 2];
    type Half = __m512;

    #[inline(always)]
    unsafe fn zero() -> __m512 {
        _mm512_setzero_ps()
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m512 {
        _mm512_set1_ps(x)
    }

    #[inline(always)]
    unsafe fn fmadd(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }

    #[inline(always)]
    unsafe fn dot_block(q: [__m512; 2], x: *const f32) -> __m512 {
        dot2(q, x)
    }

    #[inline(always)]
    unsafe fn dot_half(q: __m512, x: *const f32) -> __m512 {
        _mm512_mul_ps(q, _mm512_loadu_ps(x))
    }

    #[inline(always)]
    unsafe fn sum(v: __m512) -> f32 {
        _mm512_reduce_add_ps(v)
    }
}

/// `Q4_K` super-block `n` (its bytes `b`, its `d` and `dmin`): each sub-block of 32 scaled by
/// `d` times its 6-bit scale, less `dmin` times its 6-bit minimum times `Σx`.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn q4k_block<const R: usize>(
    rows: &mut Rows<'_, Avx512, R>,
    b: &[u8],
    n: usize,
    (d, dmin): (f32, f32),
) {
    let mask = _mm512_set1_epi32(0x0F);
    let scales = &b[4..16];
    for (chunk, qs) in b[16..144].chunks_exact(32).enumerate() {
        let bytes =
            [0, 16].map(|o| _mm512_cvtepu8_epi32(_mm_loadu_si128(qs.as_ptr().add(o).cast())));
        // Sub-block 2·chunk: the low nibbles of the 32 bytes; 2·chunk + 1: the high.
        let planes = [
            bytes.map(|v| _mm512_and_si512(v, mask)),
            bytes.map(|v| _mm512_srli_epi32::<4>(v)),
        ];
        for (plane, q) in planes.into_iter().enumerate() {
            let sub = 2 * chunk + plane;
            let (sc, m) = scale_min_k4(sub, scales);
            rows.scaled(d * sc, floats(q), n * 256 + sub * 32);
            rows.min(-(dmin * m), n * 8 + sub);
        }
    }
}

/// `Q6_K` super-block `n` (its bytes `b`, its `d`): each sub-block of 16 scaled by `d` times its
/// signed 8-bit scale.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn q6k_block<const R: usize>(rows: &mut Rows<'_, Avx512, R>, b: &[u8], n: usize, d: f32) {
    let (mask4, mask2, bias) = (
        _mm512_set1_epi32(0x0F),
        _mm512_set1_epi32(3),
        _mm512_set1_epi32(32),
    );
    for part in 0..2 {
        let ql = &b[part * 64..part * 64 + 64];
        let qh = &b[128 + part * 32..128 + part * 32 + 32];
        let sc = &b[192 + part * 8..192 + part * 8 + 8];
        let load = |bytes: &[u8], o: usize| {
            _mm512_cvtepu8_epi32(_mm_loadu_si128(bytes.as_ptr().add(o).cast()))
        };
        let highs = [load(qh, 0), load(qh, 16)];
        for (j, &scale) in sc.iter().enumerate() {
            // Sub-block j: elements 16j..16j+16 of the half, plane k = j / 2: the nibble at
            // 4·(k div 2) of ql[l + 32·(k mod 2)], bits 2k of qh[l] above it, less 32.
            let (k, l) = (j / 2, 16 * (j % 2));
            let lo = load(ql, 32 * (k % 2) + l);
            let lo = _mm512_and_si512(
                _mm512_srlv_epi32(lo, _mm512_set1_epi32(4 * (k / 2) as i32)),
                mask4,
            );
            let hi = _mm512_srlv_epi32(highs[l / 16], _mm512_set1_epi32(2 * k as i32));
            let hi = _mm512_slli_epi32(_mm512_and_si512(hi, mask2), 4);
            let q = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(lo, hi), bias));
            rows.scaled16(d * scale as i8 as f32, q, n * 256 + part * 128 + 32 * k + l);
        }
    }
}

/// A `Q5_0` block's 32 quants (`b`: its 4 bytes of fifth bits, then 16 nibble bytes) as f32,
/// less 16: bit j of the fifth bits is quant j's, `q | 16` (q < 16) where it is set.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn q5_0_quants(b: &[u8]) -> [__m512; 2] {
    let sixteen = _mm512_set1_epi32(16);
    let qh = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let [lo, hi] = nibbles(&b[4..20]);
    let lo = _mm512_mask_add_epi32(lo, qh as u16, lo, sixteen);
    let hi = _mm512_mask_add_epi32(hi, (qh >> 16) as u16, hi, sixteen);
    floats([_mm512_sub_epi32(lo, sixteen), _mm512_sub_epi32(hi, sixteen)])
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
