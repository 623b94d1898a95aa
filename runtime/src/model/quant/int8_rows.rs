//! Decode's integer products: one weight row of a K-quant super-block type against a few
//! activation rows quantised in blocks of 256, the super-block's scales applied to integer sums.
//!
//! **What is computed.** Activations as llama.cpp's `quantize_row_q8_K` (`ggml-quants.c`): per
//! block of 256, `q = round(x·127/max|x|)` (half to even, `|q| ≤ 127`), the scale `d_x = 1/(127/
//! max|x|)` kept in f32, and the sums of `q` per 16 (`bsums`). llama.cpp picks the signed element
//! of largest magnitude and scales by `−127/max`; that negates `q` and `d_x` together, so every
//! product below is the same number. A super-block of weights is `w = d·sc_j·q − dmin·m_j`
//! (`Q4_K`, `Q5_K`: eight sub-blocks of 32, six-bit `sc_j`, `m_j`) or `w = d·sc_k·(q − 32)`
//! (`Q6_K`: sixteen sub-blocks of 16, signed eight-bit `sc_k`), so
//!
//! `Σ w·x = d_x·(d·Σ_j sc_j·Σ q·q_x − dmin·Σ_j m_j·bsum_j)` (K4/K5) and
//! `Σ w·x = d_x·d·(Σ_k sc_k·Σ q·q_x − 32·Σ_k sc_k·bsum_k)` (K6) — equation (2)
//!
//! with every inner sum an exact `i32` and two float operations per super-block — llama.cpp's
//! `ggml_vec_dot_q4_K_q8_K`, `…q5_K…`, `…q6_K…` factor the same way. The error against the f32
//! product is the activations' rounding alone (at most `d_x/2` an element).
//!
//! **How.** A super-block's quants are unpacked in registers once for the `R` activation rows;
//! `vpmaddubsw` multiplies 32 unsigned weight quants by 32 signed activation quants into 16
//! pair sums (at most 2·63·127 < 2¹⁵: never saturates), and `vpdpwssd` (AVX-512 VNNI on 256-bit
//! vectors) multiplies those by the sub-block's scale and adds them into `i32` lanes. Each row's
//! sums are its own, so a row's result does not depend on `R` or its company.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

use crate::gguf::GgmlType;

/// Columns per activation block (llama.cpp's `QK_K`).
const BLOCK: usize = 256;

/// Whether [`dot_rows`] has a kernel for `ty`.
pub(crate) fn supports(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K)
}

/// Whether this CPU runs [`dot_rows`]: AVX-512F, VL and VNNI (256-bit `vpdpwssd`), AVX2, FMA.
pub(crate) fn available() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
    })
}

/// Activation rows quantised for [`dot_rows`]: `q` `[t][cols]`, `d` `[t][cols/256]`, `bsums`
/// `[t][cols/16]`.
pub(crate) struct RowActivations {
    q: Vec<i8>,
    d: Vec<f32>,
    bsums: Vec<i16>,
    cols: usize,
}

impl RowActivations {
    /// `x` (`[t][cols]`, `cols` a multiple of 256) as the module header says. The CPU must have
    /// AVX2 ([`available`]).
    pub(crate) fn quantize(x: &[f32], cols: usize) -> Self {
        assert!(cols.is_multiple_of(BLOCK) && available());
        let t = x.len() / cols;
        let mut a = Self {
            q: vec![0; t * cols],
            d: vec![0.0; t * cols / BLOCK],
            bsums: vec![0; t * cols / 16],
            cols,
        };
        let blocks = x.chunks_exact(BLOCK).zip(a.q.chunks_exact_mut(BLOCK));
        let per = a.d.iter_mut().zip(a.bsums.chunks_exact_mut(BLOCK / 16));
        for ((x, q), (d, bsums)) in blocks.zip(per) {
            // SAFETY: `available` checked AVX2.
            *d = unsafe { quantize_block(x, q, bsums) };
        }
        a
    }
}

/// One block of 256: its quants into `q`, sums per 16 into `bsums`; returns `d_x` (0 for an
/// all-zero block, whose quants stay 0).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn quantize_block(x: &[f32], q: &mut [i8], bsums: &mut [i16]) -> f32 {
    let amax = super::int8::amax_avx2(x);
    if amax == 0.0 {
        q.fill(0);
        bsums.fill(0);
        return 0.0;
    }
    let iscale = 127.0 / amax;
    for ((x, q), s) in x
        .chunks_exact(32)
        .zip(q.chunks_exact_mut(32))
        .zip(bsums.chunks_exact_mut(2))
    {
        let sums =
            super::int8::quantize_32_avx2(x.try_into().unwrap(), iscale, q.try_into().unwrap());
        s[0] = sums[0] as i16;
        s[1] = sums[1] as i16;
    }
    1.0 / iscale
}

/// A `Q4_K`/`Q5_K` super-block's 8 six-bit scales and 8 minimums from its 12 packed bytes (ggml's
/// packing: for `j < 4` the low six bits of bytes `j` and `j + 4`; for `j ≥ 4` four bits of byte
/// `j + 4` and the top two bits of bytes `j − 4` and `j`), as two little-endian `u64`s.
#[inline(always)]
fn scales_mins(p: &[u8]) -> (u64, u64) {
    let w = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
    let (a, b, c) = (w(0), w(4), w(8));
    const LOW6: u32 = 0x3F3F_3F3F;
    const LOW4: u32 = 0x0F0F_0F0F;
    const TOP2: u32 = 0x0303_0303;
    let sc_hi = (c & LOW4) | (((a >> 6) & TOP2) << 4);
    let mn_hi = ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4);
    (
        (a & LOW6) as u64 | (sc_hi as u64) << 32,
        (b & LOW6) as u64 | (mn_hi as u64) << 32,
    )
}

/// `Σ_j scale_j·(quants_j · x_j)` in i32 lanes over a super-block's 8 groups of 32 weight quants
/// (unsigned, at most 63) and the activation quants at `x`: `vpmaddubsw` pair sums times the
/// group's 16-bit scales by `vpdpwssd`, in two accumulators so each chain is half as long.
#[inline(always)]
unsafe fn scaled_sums(quants: &[__m256i; 8], scale: &[__m256i; 8], x: *const i8) -> __m256i {
    let at = |j: usize| _mm256_loadu_si256(x.add(32 * j) as *const __m256i);
    let (mut s0, mut s1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for j in (0..8).step_by(2) {
        s0 = _mm256_dpwssd_epi32(s0, _mm256_maddubs_epi16(quants[j], at(j)), scale[j]);
        s1 = _mm256_dpwssd_epi32(
            s1,
            _mm256_maddubs_epi16(quants[j + 1], at(j + 1)),
            scale[j + 1],
        );
    }
    _mm256_add_epi32(s0, s1)
}

/// `out[r] = Σ_j w[j]·x_{i+r}[j]` for the weight row `row` (its bytes, type `ty`, one of
/// [`supports`]) and the `R` activation rows `i..i + R` of `act`, by equation (2).
///
/// # Safety
/// The CPU must have what [`available`] checks; `row` is a whole row of `act.cols` weights;
/// `out.len() == R`.
#[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2,fma")]
#[allow(clippy::needless_range_loop)] // r indexes the sums and names the activation row
pub(crate) unsafe fn dot_rows<const R: usize>(
    ty: GgmlType,
    row: &[u8],
    act: &RowActivations,
    i: usize,
    out: &mut [f32],
) {
    debug_assert!(out.len() == R);
    let cols = act.cols;
    let f16 = crate::gguf::f16_table();
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let mut acc = [_mm256_setzero_ps(); R];
    // Row `r`'s quants at super-block `n`, and its `d_x` and 16 `bsums` there.
    let xq = |r: usize, n: usize| act.q.as_ptr().add((i + r) * cols + n * BLOCK);
    let block = |r: usize, n: usize| {
        let k = (i + r) * (cols / BLOCK) + n;
        let bsums = _mm256_loadu_si256(act.bsums.as_ptr().add(k * 16) as *const __m256i);
        (act.d[k], bsums)
    };
    match ty {
        GgmlType::Q4K | GgmlType::Q5K => {
            for (n, b) in row.chunks_exact(ty.block_bytes()).enumerate() {
                crate::model::prefetch::ahead(b.as_ptr(), b.len());
                let (d, dmin) = (half(b, 0), half(b, 2));
                let (quants, scale, mn) = k4_k5_block(b, ty == GgmlType::Q5K);
                for r in 0..R {
                    let sums = scaled_sums(&quants, &scale, xq(r, n));
                    let (dx, bsums) = block(r, n);
                    let mins = _mm256_madd_epi16(bsums, mn);
                    let sums = _mm256_cvtepi32_ps(sums);
                    acc[r] = _mm256_fmadd_ps(sums, _mm256_set1_ps(d * dx), acc[r]);
                    acc[r] = _mm256_fnmadd_ps(
                        _mm256_cvtepi32_ps(mins),
                        _mm256_set1_ps(dmin * dx),
                        acc[r],
                    );
                }
            }
        }
        GgmlType::Q6K => {
            for (n, b) in row.chunks_exact(ty.block_bytes()).enumerate() {
                crate::model::prefetch::ahead(b.as_ptr(), b.len());
                let d = half(b, 208);
                let (quants, scale, sc) = q6k_block(b);
                for r in 0..R {
                    let sums = scaled_sums(&quants, &scale, xq(r, n));
                    let (dx, bsums) = block(r, n);
                    // − 32·Σ_k sc_k·bsum_k, in the same integer lanes.
                    let offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, sc), 5);
                    let sums = _mm256_sub_epi32(sums, offset);
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_set1_ps(d * dx), acc[r]);
                }
            }
        }
        _ => unreachable!("int8_rows::supports: Q4_K, Q5_K and Q6_K"),
    }
    for (o, a) in out.iter_mut().zip(acc) {
        *o = super::dot_avx2::hsum(a);
    }
}

/// A `Q4_K` (or, `five`, `Q5_K`) super-block's 8 sub-blocks of 32 unsigned quants, their 16-bit
/// scales, and the minima `m_j` as i16 pairs for the bsums (lane j of the i32 view: `m_j` in
/// both halves).
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX-512 VNNI, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2,fma")]
#[inline]
unsafe fn k4_k5_block(b: &[u8], five: bool) -> ([__m256i; 8], [__m256i; 8], __m256i) {
    let (nib, one) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1));
    let (sc, mn) = scales_mins(&b[4..16]);
    let scale: [__m256i; 8] =
        std::array::from_fn(|j| _mm256_set1_epi16((sc >> (8 * j)) as u8 as i16));
    let mn = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mn as i64));
    let mn = _mm256_or_si256(mn, _mm256_slli_epi32(mn, 16));
    // Sub-block j's 32 quants: the low (even j) or high (odd j) nibbles of chunk j/2, with bit
    // j of each `qh` byte as the fifth bit for Q5_K.
    let (qs, qh) = if five {
        (
            48,
            Some(_mm256_loadu_si256(b.as_ptr().add(16) as *const __m256i)),
        )
    } else {
        (16, None)
    };
    let quants: [__m256i; 8] = std::array::from_fn(|j| {
        let q = _mm256_loadu_si256(b.as_ptr().add(qs + 32 * (j / 2)) as *const __m256i);
        let q = if j % 2 == 0 {
            q
        } else {
            _mm256_srli_epi16(q, 4)
        };
        let q = _mm256_and_si256(q, nib);
        match qh {
            None => q,
            Some(h) => {
                let bit = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(j as i32)), one);
                _mm256_or_si256(q, _mm256_slli_epi16(bit, 4))
            }
        }
    });
    (quants, scale, mn)
}

/// A `Q6_K` super-block's 8 groups of 32 quants (0..=63; group g of half h: elements h·128 +
/// 32g + l, ggml's layout), each group's scales (sub-blocks 2g and 2g + 1 in its two halves),
/// and the 16 signed scales as i16.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX-512 VNNI, AVX2 and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx512vnni,avx2,fma")]
#[inline]
unsafe fn q6k_block(b: &[u8]) -> ([__m256i; 8], [__m256i; 8], __m256i) {
    let (nib, three) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(3));
    let sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(b.as_ptr().add(192) as *const __m128i));
    let sc_at = |k: usize| b[192 + k] as i8 as i16;
    let scale: [__m256i; 8] = std::array::from_fn(|g| {
        _mm256_set_m128i(
            _mm_set1_epi16(sc_at(2 * g + 1)),
            _mm_set1_epi16(sc_at(2 * g)),
        )
    });
    let mut quants = [_mm256_setzero_si256(); 8];
    for h in 0..2 {
        let ld = |at: usize| _mm256_loadu_si256(b.as_ptr().add(at) as *const __m256i);
        let (a, c, qh) = (ld(h * 64), ld(h * 64 + 32), ld(128 + h * 32));
        let high = |bits: __m256i| _mm256_slli_epi16(_mm256_and_si256(bits, three), 4);
        let low = |v: __m256i| _mm256_and_si256(v, nib);
        quants[4 * h] = _mm256_or_si256(low(a), high(qh));
        quants[4 * h + 1] = _mm256_or_si256(low(c), high(_mm256_srli_epi16(qh, 2)));
        quants[4 * h + 2] =
            _mm256_or_si256(low(_mm256_srli_epi16(a, 4)), high(_mm256_srli_epi16(qh, 4)));
        quants[4 * h + 3] =
            _mm256_or_si256(low(_mm256_srli_epi16(c, 4)), high(_mm256_srli_epi16(qh, 6)));
    }
    (quants, scale, sc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quant::tests::exact_product;
    use crate::model::quant::QuantMatrix;

    /// The types the row kernel takes.
    const TYPES: [GgmlType; 3] = [GgmlType::Q4K, GgmlType::Q5K, GgmlType::Q6K];

    /// `rows` rows of `cols` activations drawn from `seed` in `±scale/2`, and their quantisation.
    fn activations(rows: usize, cols: usize, seed: u64, scale: f32) -> (Vec<f32>, RowActivations) {
        let mut rng = crate::generate::SplitMix64::new(seed);
        let x: Vec<f32> = (0..rows * cols)
            .map(|_| (rng.next_f64() - 0.5) as f32 * scale)
            .collect();
        let act = RowActivations::quantize(&x, cols);
        (x, act)
    }

    /// Equation (2) in f64: the dequantised weights times the dequantised activations (`d_x·q`),
    /// what the kernel computes up to f32 rounding of its per-super-block terms.
    fn equation_two(dense: &[f32], act: &RowActivations, r: usize, i: usize) -> f64 {
        let cols = act.cols;
        (0..cols)
            .map(|j| {
                let x = act.d[(i * cols + j) / BLOCK] as f64 * act.q[i * cols + j] as f64;
                dense[r * cols + j] as f64 * x
            })
            .sum()
    }

    #[test]
    fn activations_round_as_llama_cpp_q8_k() {
        // A block worked by hand: max|x| = 2.54 → iscale = 127/2.54 = 50; 0.01·50 = 0.5 rounds
        // to 0 (even), 0.03·50 = 1.5 to 2, −0.05·50 = −2.5 to −2, 1.27·50 = 63.5 to 64.
        if !available() {
            return;
        }
        let mut x = vec![0f32; 512];
        x[..5].copy_from_slice(&[2.54, 0.01, 0.03, -0.05, 1.27]);
        x[300] = -1.0; // the second block: max|x| = 1 → iscale 127
        let a = RowActivations::quantize(&x, 512);
        let iscale = 127.0f32 / 2.54;
        let want = |v: f32| (v * iscale).round_ties_even() as i8;
        assert_eq!(
            &a.q[..5],
            &[127, want(0.01), want(0.03), want(-0.05), want(1.27)]
        );
        assert_eq!(&a.q[1..5], &[0, 2, -2, 64]);
        assert_eq!(a.d[0], 1.0 / iscale);
        assert_eq!(a.bsums[0], 127 + 2 - 2 + 64);
        assert_eq!(
            (a.q[300], a.d[1], a.bsums[16 + 2]),
            (-127, 1.0 / 127.0, -127)
        );
        // An all-zero row: d = 0, quants 0.
        let z = RowActivations::quantize(&[0.0; 256], 256);
        assert!(z.d[0] == 0.0 && z.q.iter().all(|&q| q == 0));
    }

    #[test]
    fn scales_and_minimums_unpack_as_the_dequantiser_reads_them() {
        let mut rng = crate::generate::SplitMix64::new(5);
        for _ in 0..50 {
            let p: Vec<u8> = (0..12).map(|_| rng.next_u64() as u8).collect();
            let (sc, mn) = scales_mins(&p);
            for j in 0..8 {
                let (s, m) = crate::model::quant::dot_avx2::scale_min_k4(j, &p);
                assert_eq!(
                    ((sc >> (8 * j)) as u8 as f32, (mn >> (8 * j)) as u8 as f32),
                    (s, m)
                );
            }
        }
    }

    #[test]
    fn every_type_computes_equation_two_row_by_row() {
        // Q4_K, Q5_K and Q6_K rows against 1..=16 activation rows: each result is equation (2)
        // within f32 rounding, and the same bits in any company.
        if !available() {
            return;
        }
        let cols = 768;
        let (x, act) = activations(16, cols, 12, 3.0);
        for (k, ty) in TYPES.into_iter().enumerate() {
            let rows = crate::model::quant::tests::random_rows(ty, 5, cols, 30 + k as u64);
            let w = QuantMatrix::stack(vec![rows]).unwrap();
            let dense = w.dequantize();
            for r in 0..5 {
                let row = w.parts[0].row(r);
                let mut alone = [0f32; 16];
                for (i, a) in alone.iter_mut().enumerate() {
                    // SAFETY: `available` was checked above.
                    unsafe { dot_rows::<1>(ty, row, &act, i, std::slice::from_mut(a)) };
                    let scale: f64 = (0..cols)
                        .map(|j| (dense[r * cols + j] * x[i * cols + j]).abs() as f64)
                        .sum();
                    let e = equation_two(&dense, &act, r, i);
                    assert!(
                        (*a as f64 - e).abs() <= 1e-5 * scale,
                        "{ty:?} [{i},{r}]: {a} vs {e}"
                    );
                }
                let mut eight = [0f32; 8];
                // SAFETY: as above.
                unsafe { dot_rows::<8>(ty, row, &act, 8, &mut eight) };
                let same = eight
                    .iter()
                    .zip(&alone[8..])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{ty:?} row {r}: rows 8..16 differ in company");
            }
        }
    }

    #[test]
    fn the_product_is_within_the_activations_rounding_of_the_f32_one() {
        // |Σ w·(x − d_x·q)| ≤ Σ |w|·d_x/2: the whole error is the activations' rounding.
        if !available() {
            return;
        }
        let cols = 512;
        let (x, act) = activations(1, cols, 3, 1.0);
        for (k, ty) in TYPES.into_iter().enumerate() {
            let w = QuantMatrix::stack(vec![crate::model::quant::tests::random_rows(
                ty,
                3,
                cols,
                50 + k as u64,
            )])
            .unwrap();
            let dense = w.dequantize();
            for r in 0..3 {
                let mut got = 0f32;
                // SAFETY: `available` was checked above.
                unsafe {
                    dot_rows::<1>(
                        ty,
                        w.parts[0].row(r),
                        &act,
                        0,
                        std::slice::from_mut(&mut got),
                    )
                };
                let (exact, _) = exact_product(&dense, &x, cols, r, 0);
                let bound: f64 = (0..cols)
                    .map(|j| dense[r * cols + j].abs() as f64 * act.d[j / BLOCK] as f64 / 2.0)
                    .sum();
                assert!(
                    (got as f64 - exact).abs() <= bound * 1.001 + 1e-6,
                    "{ty:?} row {r}"
                );
            }
        }
    }
}
