//! One weight row's dot product with one f32 activation row, block by block, with each block's
//! scale (and minimum) factored out as ggml's `ggml_vec_dot_*` do: per block the quants
//! (small integers, exact in f32) are multiplied with the activations in 8 lanes, and the lanes
//! are scaled by `d` once per block (per sub-block of `Q4_K` and `Q6_K`, `d` times its 6- or
//! 8-bit scale) — instead of every weight being dequantised to `q·d (+ m)`, stored, and
//! multiplied again. A minimum (`Q4_1`, `Q4_K`) contributes `m·Σx` over its block, with `Σx` per
//! 32 activations computed once per activation row ([`block_sums`]). AVX2 + FMA intrinsics; the
//! callers check the CPU has them.
//!
//! Activations stay f32: the result is the f32 product of the exact dequantised weights, up to
//! the order and grouping of the sums (what [`super::QuantRows::dot_rows`] gives, rounded
//! differently).

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use super::rows::{Lanes, Rows};
use crate::gguf::GgmlType;

/// Weights per activation sum ([`block_sums`]): a block of the 32-weight types, a sub-block of
/// `Q4_K`.
pub(super) const BLOCK: usize = 32;

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

/// `Σx` over each block of [`BLOCK`] activations (`x.len()` a multiple of it).
pub(super) fn block_sums(x: &[f32]) -> Vec<f32> {
    x.chunks_exact(BLOCK).map(|b| b.iter().sum()).collect()
}

/// `out[i] = Σ_j w[j]·x_i[j]` for the row `row` (its bytes, type `ty`, one of [`supports`]) and
/// the `R` activation rows `x_i` of `xs` (`[R][cols]`; `sums`: their [`block_sums`], `[R][cols /
/// BLOCK]`); `f16`: the f16→f32 table. A block's quants are decoded once for the `R` rows; each
/// row then takes the operations of the one-row kernel (`R` = 1) in its order, so a row's result
/// does not depend on `R` or on the other rows.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn dot_rows<const R: usize>(
    ty: GgmlType,
    row: &[u8],
    xs: &[f32],
    sums: &[f32],
    f16: &[f32],
    out: &mut [f32],
) {
    let (bs, bb) = (ty.block_size(), ty.block_bytes());
    let mut rows = Rows::<Avx2, R>::new(xs, sums);
    debug_assert!(out.len() == R && row.len() / bb * bs == rows.cols);
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let blocks = row
        .chunks_exact(bb)
        .inspect(|b| crate::model::prefetch::ahead(b.as_ptr(), b.len()))
        .enumerate();
    match ty {
        GgmlType::Q8_0 => {
            for (n, b) in blocks {
                rows.scaled(half(b, 0), q8_quants(&b[2..34]), n * BLOCK);
            }
        }
        GgmlType::Q4_0 => {
            let eight = _mm256_set1_epi32(8);
            for (n, b) in blocks {
                let q = nibbles(&b[2..18]).map(|q| _mm256_sub_epi32(q, eight));
                rows.scaled(half(b, 0), floats(q), n * BLOCK);
            }
        }
        GgmlType::Q4_1 => {
            for (n, b) in blocks {
                rows.scaled(half(b, 0), floats(nibbles(&b[4..20])), n * BLOCK);
                rows.min(half(b, 2), n);
            }
        }
        GgmlType::Q5_0 => {
            for (n, b) in blocks {
                rows.scaled(half(b, 0), q5_0_quants(&b[2..22]), n * BLOCK);
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
        _ => unreachable!("dot_rows is called for the types `supports` names"),
    }
    rows.finish(out);
}

/// 8 f32 lanes ([`Rows`]'s width in this kernel).
struct Avx2;

impl Lanes for Avx2 {
    type V = __m256;
    type Block = [__m256; 4];
    type Half = [__m256; 2];

    #[inline(always)]
    unsafe fn zero() -> __m256 {
        _mm256_setzero_ps()
    }

    #[inline(always)]
    unsafe fn splat(x: f32) -> __m256 {
        _mm256_set1_ps(x)
    }

    #[inline(always)]
    unsafe fn fmadd(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }

    #[inline(always)]
    unsafe fn dot_block(q: [__m256; 4], x: *const f32) -> __m256 {
        dot4(q, x)
    }

    #[inline(always)]
    unsafe fn dot_half(q: [__m256; 2], x: *const f32) -> __m256 {
        let p = _mm256_mul_ps(q[0], _mm256_loadu_ps(x));
        _mm256_fmadd_ps(q[1], _mm256_loadu_ps(x.add(8)), p)
    }

    #[inline(always)]
    unsafe fn sum(v: __m256) -> f32 {
        hsum(v)
    }
}

/// `Q4_K` super-block `n` (its bytes `b`, its `d` and `dmin`): each sub-block of 32 scaled by
/// `d` times its 6-bit scale, less `dmin` times its 6-bit minimum times `Σx`.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn q4k_block<const R: usize>(
    rows: &mut Rows<'_, Avx2, R>,
    b: &[u8],
    n: usize,
    (d, dmin): (f32, f32),
) {
    let scales = &b[4..16];
    for (chunk, qs) in b[16..144].chunks_exact(32).enumerate() {
        for (sub, shift) in [(2 * chunk, 0), (2 * chunk + 1, 4)] {
            let (sc, m) = scale_min_k4(sub, scales);
            rows.scaled(
                d * sc,
                floats(nibble_plane(qs, shift)),
                n * 256 + sub * BLOCK,
            );
            rows.min(-(dmin * m), n * 8 + sub);
        }
    }
}

/// `Q6_K` super-block `n` (its bytes `b`, its `d`): each sub-block of 16 scaled by `d` times its
/// signed 8-bit scale.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn q6k_block<const R: usize>(rows: &mut Rows<'_, Avx2, R>, b: &[u8], n: usize, d: f32) {
    for part in 0..2 {
        let ql = &b[part * 64..part * 64 + 64];
        let qh = &b[128 + part * 32..128 + part * 32 + 32];
        let sc = &b[192 + part * 8..192 + part * 8 + 8];
        for (j, &scale) in sc.iter().enumerate() {
            // Sub-block j: elements 16j..16j+16 of the half, plane k = j / 2.
            let (k, l) = (j / 2, 16 * (j % 2));
            let at = n * 256 + part * 128 + 32 * k + l;
            rows.scaled16(d * scale as i8 as f32, q6_quants16(ql, qh, k, l), at);
        }
    }
}

/// A `Q5_0` block's 32 quants (`b`: its 4 bytes of fifth bits, then 16 nibble bytes) as f32,
/// less 16.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn q5_0_quants(b: &[u8]) -> [__m256; 4] {
    let sixteen = _mm256_set1_epi32(16);
    let qh = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let [l0, l1, h0, h1] = nibbles(&b[4..20]);
    let q = [
        with_fifth_bit(l0, qh, 0),
        with_fifth_bit(l1, qh, 8),
        with_fifth_bit(h0, qh, 16),
        with_fifth_bit(h1, qh, 24),
    ];
    floats(q.map(|q| _mm256_sub_epi32(q, sixteen)))
}

/// The 32 quants of 16 nibble bytes as four groups of 8 `i32` (elements 0–7, 8–15 from the low
/// nibbles, 16–23, 24–31 from the high ones).
#[inline(always)]
unsafe fn nibbles(qs: &[u8]) -> [__m256i; 4] {
    debug_assert!(qs.len() >= 16);
    let bytes = _mm_loadu_si128(qs.as_ptr().cast());
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(bytes, mask);
    let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    [
        _mm256_cvtepu8_epi32(lo),
        _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)),
        _mm256_cvtepu8_epi32(hi),
        _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)),
    ]
}

/// 6-bit scale and minimum `j` of a `Q4_K` super-block (ggml's `get_scale_min_k4`; the
/// dequantiser's own, [`crate::gguf::GgmlType::dequantize_block`]).
#[inline(always)]
pub(super) fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    if j < 4 {
        ((q[j] & 63) as f32, (q[j + 4] & 63) as f32)
    } else {
        let d = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (d as f32, m as f32)
    }
}

/// The nibbles at `shift` (0: low, 4: high) of 32 bytes, as four groups of 8 `i32`.
#[inline(always)]
unsafe fn nibble_plane(qs: &[u8], shift: i32) -> [__m256i; 4] {
    debug_assert!(qs.len() >= 32);
    let mask = _mm256_set1_epi32(0x0F);
    let shift = _mm_cvtsi32_si128(shift);
    let at = |o: usize| {
        let q = _mm256_cvtepu8_epi32(_mm_loadl_epi64(qs.as_ptr().add(o).cast()));
        _mm256_and_si256(_mm256_srl_epi32(q, shift), mask)
    };
    [at(0), at(8), at(16), at(24)]
}

/// The 16 quants of elements `l..l + 16` of plane `k` of a `Q6_K` half (`ql` 64 bytes, `qh`
/// 32) as f32, in two groups of 8: `(nibble of ql[l + 32·(k mod 2)] at 4·(k div 2)) | (bits 2k of
/// qh[l]) << 4`, less 32.
#[inline(always)]
unsafe fn q6_quants16(ql: &[u8], qh: &[u8], k: usize, l: usize) -> [__m256; 2] {
    debug_assert!(ql.len() >= 64 && qh.len() >= 32 && l + 16 <= 32);
    let (lo_shift, hi_shift) = (
        _mm_cvtsi32_si128(4 * (k / 2) as i32),
        _mm_cvtsi32_si128(2 * k as i32),
    );
    let (mask4, mask2, bias) = (
        _mm256_set1_epi32(0x0F),
        _mm256_set1_epi32(3),
        _mm256_set1_epi32(32),
    );
    let q = |o: usize| {
        let lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(ql.as_ptr().add(32 * (k % 2) + o).cast()));
        let hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(qh.as_ptr().add(o).cast()));
        let lo = _mm256_and_si256(_mm256_srl_epi32(lo, lo_shift), mask4);
        let hi = _mm256_and_si256(_mm256_srl_epi32(hi, hi_shift), mask2);
        _mm256_cvtepi32_ps(_mm256_sub_epi32(
            _mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)),
            bias,
        ))
    };
    [q(l), q(l + 8)]
}

/// `q | 16` where bit `first + lane` of `qh` is set (a `Q5_*` block's fifth bits).
#[inline(always)]
unsafe fn with_fifth_bit(q: __m256i, qh: u32, first: i32) -> __m256i {
    let shifts = _mm256_setr_epi32(
        first,
        first + 1,
        first + 2,
        first + 3,
        first + 4,
        first + 5,
        first + 6,
        first + 7,
    );
    let bits = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(qh as i32), shifts),
        _mm256_set1_epi32(1),
    );
    _mm256_or_si256(q, _mm256_slli_epi32(bits, 4))
}

/// A block's 32 quants as f32 (exact: small integers).
#[inline(always)]
unsafe fn floats(q: [__m256i; 4]) -> [__m256; 4] {
    q.map(|q| _mm256_cvtepi32_ps(q))
}

/// `Σ q·x` over one block in 8 lanes, `q` the block's 32 quants in four groups of 8, `x` its 32
/// activations.
#[inline(always)]
unsafe fn dot4(q: [__m256; 4], x: *const f32) -> __m256 {
    let mut p = _mm256_mul_ps(q[0], _mm256_loadu_ps(x));
    p = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(x.add(8)), p);
    p = _mm256_fmadd_ps(q[2], _mm256_loadu_ps(x.add(16)), p);
    _mm256_fmadd_ps(q[3], _mm256_loadu_ps(x.add(24)), p)
}

/// One `Q8_0` block's 32 signed quants as f32.
#[inline(always)]
unsafe fn q8_quants(qs: &[u8]) -> [__m256; 4] {
    debug_assert!(qs.len() >= BLOCK);
    let at = |o: usize| _mm256_cvtepi8_epi32(_mm_loadl_epi64(qs.as_ptr().add(o).cast()));
    floats([at(0), at(8), at(16), at(24)])
}

/// The sum of the 8 lanes.
#[inline(always)]
pub(super) unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}
