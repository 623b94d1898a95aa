//! Integer prefill products: 8-bit activations against the GGUF's integer quants, summed in
//! `i32`, each (sub-)block's scales applied once.
//!
//! **Why.** A prefill multiplies thousands of activation rows by every weight; in f32 that runs
//! at the f32 multiply-add's peak at best, while a CPU with AVX-512 VNNI does four 8-bit
//! multiply-adds per lane in one `vpdpbusd` (AVX2: `vpmaddubsw` + `vpmaddwd`). llama.cpp's CPU
//! products work this way (`ggml-cpu/quants.c`, `ggml_vec_dot_q4_0_q8_0` and kin: activations
//! quantised to `Q8_0`/`Q8_K` blocks, integer dot products, one float scale per block).
//!
//! **What is computed.** Activations: each block of 32 becomes `x ≈ d_x·q_x` with `q_x =
//! round(x·127/max|x|)` in `−127..=127` and `d_x = max|x|/127` rounded to f16 (llama.cpp's
//! `quantize_row_q8_0`, bit for bit: the `Q8_0` activations its integer products take). Weights: a
//! (sub-)block of `S` weights (`S` = 32, or 16 where a part is `Q6_K`) is `w = D·q + M` with `q`
//! unsigned (`0..=15` for `Q4_*`, `0..=31` for `Q5_*`, `0..=63` for `Q6_K`, `q + 128` for
//! `Q8_0`), so that
//!
//! `Σ_j w_j·x_j ≈ Σ_sub D·d_x·Σ_j q_j·q_x,j + M·d_x·Σ_j q_x,j` — equation (1)
//!
//! with the integer sum exact. The per-type `(D, M)`: `Q4_0` `(d, −8d)`, `Q4_1` `(d, m)`, `Q5_0`
//! `(d, −16d)`, `Q5_1` `(d, m)`, `Q8_0` `(d, −128d)`, `Q4_K`/`Q5_K` `(d·sc, −dmin·m)` per
//! sub-block of 32, `Q6_K` `(d·sc, −32·d·sc)` per sub-block of 16 — the same products the f32
//! dequantiser forms ([`crate::gguf::GgmlType::dequantize_block`]), so the only error is the
//! activations' rounding (at most `d_x/2` an element).
//!
//! **How.** A tile of weight rows is unpacked once per call into groups of 16 rows laid out
//! `[cols/4][16 rows][4 quants]` (one 64-byte vector per 4 columns), with `D` and `M` as
//! `[subs][16]`; each group is multiplied with the activations 8 tokens at a time (AVX2: 8 rows
//! and 4 tokens), tokens in chunks that stay in the core's cache. `Q8_0`'s unsigned quants reach
//! 255, over what `vpmaddubsw`'s 16-bit pair sums hold, so on AVX2 alone a matrix with a `Q8_0`
//! part keeps the f32 path; `F32`/`F16`/`BF16` parts always do.
//!
//! **Decode** (≤ 16 rows) takes no tile: `Q4_K`, `Q5_K` and `Q6_K` rows go through
//! [`super::int8_rows`] (activations in blocks of 256 as llama.cpp's `Q8_K`), the other types
//! through the f32 one-row kernels.

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;
use std::cell::RefCell;

use rayon::prelude::*;

use super::QuantMatrix;
use crate::gguf::GgmlType;

/// Rows of one unpacked group (the 16 lanes of an AVX-512 vector of `i32`).
const GROUP: usize = 16;

/// Bytes of unpacked weights one task holds at most (a tile: whole groups).
const TILE_QUANT_BYTES: usize = 1 << 20;

/// Bytes of quantised activations one token chunk holds at most (kept in the core's L2).
const CHUNK_QUANT_BYTES: usize = 512 << 10;

/// The integer kernel a CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F + AVX-512 VNNI: `vpdpbusd`, 16 rows by 8 tokens.
    Vnni,
    /// AVX2 + FMA: `vpmaddubsw` and `vpmaddwd`, 8 rows by 4 tokens.
    Avx2,
}

impl Isa {
    /// The instruction set's name, as reports give it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Vnni => "AVX-512 VNNI",
            Self::Avx2 => "AVX2",
        }
    }
}

/// The best integer kernel this CPU has, if any (`KVPLAN_INT8_ISA=avx2` keeps AVX2 on a VNNI CPU,
/// for benchmarks and tests).
pub(crate) fn isa() -> Option<Isa> {
    static ISA: std::sync::OnceLock<Option<Isa>> = std::sync::OnceLock::new();
    *ISA.get_or_init(|| {
        let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma");
        let vnni = is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni");
        let forced_avx2 = std::env::var("KVPLAN_INT8_ISA").is_ok_and(|v| v.trim() == "avx2");
        if vnni && !forced_avx2 {
            Some(Isa::Vnni)
        } else if avx2 {
            Some(Isa::Avx2)
        } else {
            None
        }
    })
}

/// Whether a part of type `ty` has integer quants the kernel `isa` multiplies.
pub(crate) fn supports(ty: GgmlType, isa: Isa) -> bool {
    use GgmlType::*;
    match ty {
        Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q4K | Q5K | Q6K => true,
        Q8_0 => isa == Isa::Vnni,
        F32 | F16 | BF16 => false,
    }
}

/// The activations of one product, quantised: `q` `[t][cols]`; per (sub-)block of `sub` columns
/// the scale `d` (`d_x`) and `s = d_x·Σ q` (`[t][cols/sub]`).
pub(crate) struct Activations {
    q: Vec<i8>,
    d: Vec<f32>,
    s: Vec<f32>,
    cols: usize,
    sub: usize,
}

impl Activations {
    /// `x` (`[t][cols]`, `cols` a multiple of 32) in blocks of 32 as llama.cpp's
    /// `quantize_row_q8_0` (its SIMD paths: `q = x·127/max|x|` rounded half to even, the scale
    /// `max|x|/127` kept as f16 — [`scales`]),
    /// scales and sums per `sub` (16 or 32), in vector code where the CPU has AVX2.
    pub(crate) fn quantize(x: &[f32], cols: usize, sub: usize) -> Self {
        let t = x.len() / cols;
        let subs = cols / sub;
        let mut q = vec![0i8; t * cols];
        let mut d = vec![0f32; t * subs];
        let mut s = vec![0f32; t * subs];
        let avx2 = is_x86_feature_detected!("avx2");
        q.par_chunks_mut(cols)
            .zip(d.par_chunks_mut(subs))
            .zip(s.par_chunks_mut(subs))
            .zip(x.par_chunks(cols))
            .for_each(|(((q, d), s), x)| {
                let per = 32 / sub;
                for (b, (qb, xb)) in q.chunks_exact_mut(32).zip(x.chunks_exact(32)).enumerate() {
                    let (qb, xb): (&mut [i8; 32], &[f32; 32]) =
                        (qb.try_into().unwrap(), xb.try_into().unwrap());
                    let (db, sums) = if avx2 {
                        // SAFETY: the CPU has AVX2 (checked above).
                        unsafe { quantize_block_avx2(xb, qb) }
                    } else {
                        quantize_block(xb, qb)
                    };
                    for k in 0..per {
                        d[b * per + k] = db;
                        let sum = if per == 1 { sums[0] + sums[1] } else { sums[k] };
                        s[b * per + k] = db * sum as f32;
                    }
                }
            });
        Self { q, d, s, cols, sub }
    }

    fn subs(&self) -> usize {
        self.cols / self.sub
    }

    /// Row `i`'s quants, scales and sums (the kernels read rows `i..` from there).
    fn row_at(&self, i: usize) -> (*const i8, *const f32, *const f32) {
        let subs = self.subs();
        (
            self.q[i * self.cols..].as_ptr(),
            self.d[i * subs..].as_ptr(),
            self.s[i * subs..].as_ptr(),
        )
    }
}

/// A block's scale and inverse scale from its largest magnitude, as `quantize_row_q8_0`: `d =
/// amax/127` stored as f16 (a `block_q8_0`'s `d`), `id = 127/amax` (0 for an all-zero block).
fn scales(amax: f32) -> (f32, f32) {
    let d = half::f16::from_f32(amax / 127.0).to_f32();
    (d, if amax > 0.0 { 127.0 / amax } else { 0.0 })
}

/// One block of 32 as [`Activations::quantize`] describes: `q`, and returns the scale and the
/// sums of `q`'s two halves.
fn quantize_block(x: &[f32; 32], q: &mut [i8; 32]) -> (f32, [i32; 2]) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let (d, id) = scales(amax);
    for (qv, &xv) in q.iter_mut().zip(x) {
        *qv = (xv * id).round_ties_even() as i8;
    }
    let half = |h: &[i8]| h.iter().map(|&v| v as i32).sum();
    (d, [half(&q[..16]), half(&q[16..])])
}

/// [`quantize_block`] in AVX2: the same values (`vcvtps2dq` rounds half to even).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
unsafe fn quantize_block_avx2(x: &[f32; 32], q: &mut [i8; 32]) -> (f32, [i32; 2]) {
    let (d, id) = scales(amax_avx2(x));
    (d, quantize_32_avx2(x, id, q))
}

/// The largest magnitude in `x` (a multiple of 8 long).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn amax_avx2(x: &[f32]) -> f32 {
    let sign = _mm256_set1_ps(-0.0);
    let mut m = _mm256_setzero_ps();
    for v in x.chunks_exact(8) {
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(v.as_ptr())));
    }
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// `q = x·id` rounded half to even (`|x·id| ≤ 127`); returns the sums of `q`'s two halves.
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn quantize_32_avx2(x: &[f32; 32], id: f32, q: &mut [i8; 32]) -> [i32; 2] {
    let id = _mm256_set1_ps(id);
    let i = [0, 8, 16, 24]
        .map(|k| _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x.as_ptr().add(k)), id)));
    // Pack 4×8 i32 → 32 i8 (saturation never bites: |q| ≤ 127); the packs interleave lanes,
    // undone by the final permutation.
    let p = _mm256_packs_epi16(
        _mm256_packs_epi32(i[0], i[1]),
        _mm256_packs_epi32(i[2], i[3]),
    );
    let p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(q.as_mut_ptr() as *mut __m256i, p);
    let sum = |a: __m256i, b: __m256i| {
        let s = _mm256_add_epi32(a, b);
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01)))
    };
    [sum(i[0], i[1]), sum(i[2], i[3])]
}

/// One row of a part as unsigned quants `q` (`cols`) and `(D, M)` per 16 columns (`cols/16`
/// each): `w = D·q + M`, equation (1)'s form.
fn unpack_row(ty: GgmlType, row: &[u8], q: &mut [u8], dd: &mut [f32], mm: &mut [f32]) {
    use GgmlType::*;
    let f16 = crate::gguf::f16_table();
    let half = |b: &[u8], at: usize| f16[u16::from_le_bytes([b[at], b[at + 1]]) as usize];
    let (bs, bb) = (ty.block_size(), ty.block_bytes());
    for (n, b) in row.chunks_exact(bb).enumerate() {
        let q = &mut q[n * bs..(n + 1) * bs];
        let (dd, mm) = (&mut dd[n * bs / 16..], &mut mm[n * bs / 16..]);
        match ty {
            Q4_0 | Q4_1 => {
                let d = half(b, 0);
                let (m, qs) = if ty == Q4_0 {
                    (-8.0 * d, &b[2..18])
                } else {
                    (half(b, 2), &b[4..20])
                };
                for (j, &v) in qs.iter().enumerate() {
                    q[j] = v & 0x0F;
                    q[j + 16] = v >> 4;
                }
                dd[..2].fill(d);
                mm[..2].fill(m);
            }
            Q5_0 | Q5_1 => {
                let d = half(b, 0);
                let (m, at) = if ty == Q5_0 {
                    (-16.0 * d, 2)
                } else {
                    (half(b, 2), 4)
                };
                q.copy_from_slice(&crate::gguf::q5_quants(&b[at..at + 4], &b[at + 4..at + 20]));
                dd[..2].fill(d);
                mm[..2].fill(m);
            }
            Q8_0 => {
                let d = half(b, 0);
                for (qv, &v) in q.iter_mut().zip(&b[2..34]) {
                    *qv = (v as i8 as i16 + 128) as u8;
                }
                dd[..2].fill(d);
                mm[..2].fill(-128.0 * d);
            }
            Q4K | Q5K => unpack_k4_k5(ty == Q5K, b, q, dd, mm, half),
            Q6K => unpack_q6k(b, q, dd, mm, half(b, 208)),
            F32 | F16 | BF16 => unreachable!("float parts keep the f32 path (`supports`)"),
        }
    }
}

/// A `Q4_K` (or, `five`, `Q5_K`) super-block `b` unpacked into [`unpack_row`]'s form: 256
/// quants, `(D, M)` per 16 columns from each sub-block's 6-bit scale and minimum.
fn unpack_k4_k5(
    five: bool,
    b: &[u8],
    q: &mut [u8],
    dd: &mut [f32],
    mm: &mut [f32],
    half: impl Fn(&[u8], usize) -> f32,
) {
    let (d, dmin) = (half(b, 0), half(b, 2));
    let scales = &b[4..16];
    let (qh, qs) = if five {
        (Some(&b[16..48]), &b[48..176])
    } else {
        (None, &b[16..144])
    };
    for (chunk, qs) in qs.chunks_exact(32).enumerate() {
        for (sub, shift) in [(2 * chunk, 0), (2 * chunk + 1, 4)] {
            let (sc, m) = super::dot_avx2::scale_min_k4(sub, scales);
            dd[2 * sub..2 * sub + 2].fill(d * sc);
            mm[2 * sub..2 * sub + 2].fill(-(dmin * m));
            for (l, &v) in qs.iter().enumerate() {
                let high = qh.map_or(0, |h| ((h[l] >> sub) & 1) << 4);
                q[sub * 32 + l] = ((v >> shift) & 0x0F) | high;
            }
        }
    }
}

/// A `Q6_K` super-block `b` (its scale `d`) unpacked into [`unpack_row`]'s form: 256 unsigned
/// quants (the signed 6-bit ones + 32), `(D, M)` per 16 columns from each sub-block's 8-bit scale.
fn unpack_q6k(b: &[u8], q: &mut [u8], dd: &mut [f32], mm: &mut [f32], d: f32) {
    for h in 0..2 {
        let ql = &b[h * 64..h * 64 + 64];
        let qh = &b[128 + h * 32..128 + h * 32 + 32];
        let sc = &b[192 + h * 8..192 + h * 8 + 8];
        let q = &mut q[h * 128..h * 128 + 128];
        for l in 0..32 {
            q[l] = (ql[l] & 0x0F) | ((qh[l] & 3) << 4);
            q[l + 32] = (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4);
            q[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
        // Sub-block i of 16 in this half: columns 16i..16i + 16, scale sc[i].
        for (i, &s) in sc.iter().enumerate() {
            let scale = d * s as i8 as f32;
            dd[h * 8 + i] = scale;
            mm[h * 8 + i] = -32.0 * scale;
        }
    }
}

/// One thread's unpacked tile: groups of 16 rows, quants `[group][cols/4][16][4]`, `D` and `M`
/// `[group][subs][16]`, plus one row's scratch.
#[derive(Default)]
struct Tile {
    q: Vec<u8>,
    d: Vec<f32>,
    m: Vec<f32>,
    row_q: Vec<u8>,
    row_d: Vec<f32>,
    row_m: Vec<f32>,
}

thread_local! {
    static TILE: RefCell<Tile> = RefCell::new(Tile::default());
}

impl Tile {
    /// Rows `first..first + n` of `w`, unpacked in groups of 16 (the last group padded with zero
    /// weights), `D`/`M` per `sub` columns.
    fn unpack(&mut self, w: &QuantMatrix, first: usize, n: usize, sub: usize) {
        let cols = w.cols;
        let (groups, subs) = (n.div_ceil(GROUP), cols / sub);
        self.q.clear();
        self.q.resize(groups * GROUP * cols, 0);
        self.d.clear();
        self.d.resize(groups * subs * GROUP, 0.0);
        self.m.clear();
        self.m.resize(groups * subs * GROUP, 0.0);
        self.row_q.resize(cols, 0);
        self.row_d.resize(cols / 16, 0.0);
        self.row_m.resize(cols / 16, 0.0);
        for k in 0..n {
            let (part, r) = w.locate(first + k);
            unpack_row(
                part.ty,
                part.row(r),
                &mut self.row_q,
                &mut self.row_d,
                &mut self.row_m,
            );
            let (g, lane) = (k / GROUP, k % GROUP);
            let q = &mut self.q[g * GROUP * cols..(g + 1) * GROUP * cols];
            for (c, four) in self.row_q.chunks_exact(4).enumerate() {
                let at = (c * GROUP + lane) * 4;
                q[at..at + 4].copy_from_slice(four);
            }
            for s in 0..subs {
                let at = (g * subs + s) * GROUP + lane;
                self.d[at] = self.row_d[s * sub / 16];
                self.m[at] = self.row_m[s * sub / 16];
            }
        }
    }
}

/// The output buffer, shared by the tile tasks, each writing its own band of columns.
struct Bands(*mut f32);
// SAFETY: tasks write disjoint column bands (see `QuantMatrix::int8`), and the buffer outlives them.
unsafe impl Send for Bands {}
// SAFETY: as for `Send`: no two tasks touch the same element.
unsafe impl Sync for Bands {}

impl QuantMatrix {
    /// `x · Wᵀ` (`x` `[t][cols]`, returned `[t][rows]`) by equation (1), if every part's type has
    /// integer quants this CPU's kernel multiplies; `None` leaves it to the f32 path.
    pub(crate) fn int8(&self, x: &[f32], t: usize) -> Option<Vec<f32>> {
        let isa = isa()?;
        if !self.parts.iter().all(|p| supports(p.ty, isa)) || !self.cols.is_multiple_of(32) {
            return None;
        }
        let sub = if self.parts.iter().any(|p| p.ty == GgmlType::Q6K) {
            16
        } else {
            32
        };
        let act = Activations::quantize(x, self.cols, sub);
        Some(self.int8_with(&act, t, isa))
    }

    /// The product of [`Self::int8`] on quantised activations, with kernel `isa`.
    pub(crate) fn int8_with(&self, act: &Activations, t: usize, isa: Isa) -> Vec<f32> {
        let (rows, cols) = (self.rows, self.cols);
        let tasks = 2 * rayon::current_num_threads().max(1);
        let tile = rows
            .div_ceil(tasks)
            .min((TILE_QUANT_BYTES / cols).max(GROUP))
            .next_multiple_of(GROUP);
        let chunk = (CHUNK_QUANT_BYTES / cols).clamp(8, 1024) / 8 * 8;
        let mut out = vec![0f32; t * rows];
        let bands = Bands(out.as_mut_ptr());
        let bands = &bands;
        (0..rows.div_ceil(tile)).into_par_iter().for_each(|c| {
            let first = c * tile;
            let n = tile.min(rows - first);
            TILE.with_borrow_mut(|w| {
                w.unpack(self, first, n, act.sub);
                let subs = act.subs();
                for t0 in (0..t).step_by(chunk) {
                    let nt = chunk.min(t - t0);
                    for g in (0..n.div_ceil(GROUP)).step_by(2) {
                        let span = (n.div_ceil(GROUP) - g).min(2);
                        let group = Group {
                            q: &w.q[g * GROUP * cols..(g + span) * GROUP * cols],
                            d: &w.d[g * subs * GROUP..(g + span) * subs * GROUP],
                            m: &w.m[g * subs * GROUP..(g + span) * subs * GROUP],
                            span,
                        };
                        let lanes = (span * GROUP).min(n - g * GROUP);
                        let col = first + g * GROUP;
                        let dst = Out {
                            // SAFETY: `out` holds t rows of `rows`, so column `col < rows` of
                            // row 0 is inside it.
                            at: unsafe { bands.0.add(col) },
                            stride: rows,
                            lanes,
                        };
                        // SAFETY: this task alone writes columns first..first + n of `out`'s t
                        // rows (`dst` names `lanes` of them, rows t0..t0 + nt < t), and `out`
                        // outlives the parallel loop.
                        unsafe { group.multiply(act, t0, nt, isa, &dst) };
                    }
                }
            });
        });
        out
    }
}

/// Where a group's outputs go: token `i`'s `lanes` values at `at + i·stride`.
struct Out {
    at: *mut f32,
    stride: usize,
    lanes: usize,
}

/// One or two unpacked groups of 16 rows (see [`Tile`]), side by side.
struct Group<'a> {
    q: &'a [u8],
    d: &'a [f32],
    m: &'a [f32],
    /// Groups: 1 or 2.
    span: usize,
}

impl Group<'_> {
    /// The group's outputs for tokens `t0..t0 + nt` into `dst`.
    ///
    /// # Safety
    /// `isa` must have been detected on this CPU ([`isa`]); the group and activations have the
    /// shapes [`Tile::unpack`] and [`Activations::quantize`] give; `dst` must be valid for
    /// writes of `dst.lanes` values at every token row `t0..t0 + nt`, and no one else may touch
    /// them during the call.
    unsafe fn multiply(&self, act: &Activations, t0: usize, nt: usize, isa: Isa, dst: &Out) {
        let mut i = t0;
        while i < t0 + nt {
            let left = t0 + nt - i;
            // SAFETY: the caller's conditions, for tokens i..i + n ≤ t0 + nt.
            i += unsafe {
                match (isa, act.sub, self.span) {
                    (Isa::Vnni, 32, 2) if left >= 6 => self.vnni::<32, 2, 6>(act, i, dst),
                    (Isa::Vnni, 32, 2) => self.vnni::<32, 2, 1>(act, i, dst),
                    (Isa::Vnni, 32, _) if left >= 8 => self.vnni::<32, 1, 8>(act, i, dst),
                    (Isa::Vnni, 32, _) => self.vnni::<32, 1, 1>(act, i, dst),
                    (Isa::Vnni, _, 2) if left >= 6 => self.vnni::<16, 2, 6>(act, i, dst),
                    (Isa::Vnni, _, 2) => self.vnni::<16, 2, 1>(act, i, dst),
                    (Isa::Vnni, _, _) if left >= 8 => self.vnni::<16, 1, 8>(act, i, dst),
                    (Isa::Vnni, _, _) => self.vnni::<16, 1, 1>(act, i, dst),
                    (Isa::Avx2, 32, _) if left >= 4 => self.avx2::<32, 4>(act, i, dst),
                    (Isa::Avx2, 32, _) => self.avx2::<32, 1>(act, i, dst),
                    (Isa::Avx2, _, _) if left >= 4 => self.avx2::<16, 4>(act, i, dst),
                    (Isa::Avx2, _, _) => self.avx2::<16, 1>(act, i, dst),
                }
            };
        }
    }

    /// Tokens `i..i + T` by equation (1) with `vpdpbusd` (16 rows a vector, `G` groups), into
    /// `dst`. Returns `T`.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512 VNNI.
    #[target_feature(enable = "avx512f,avx512vnni")]
    #[allow(clippy::needless_range_loop)] // n and g index three arrays each
    unsafe fn vnni<const S: usize, const G: usize, const T: usize>(
        &self,
        act: &Activations,
        i: usize,
        dst: &Out,
    ) -> usize {
        let (cols, subs) = (act.cols, act.subs());
        let (xq, xd, xs) = act.row_at(i);
        let w: [*const u8; G] = std::array::from_fn(|g| self.q.as_ptr().add(g * GROUP * cols));
        let sc: [usize; G] = std::array::from_fn(|g| g * subs * GROUP);
        let mut f = [[_mm512_setzero_ps(); T]; G];
        for s in 0..subs {
            let mut acc = [[_mm512_setzero_si512(); T]; G];
            for k in 0..S / 4 {
                let c = s * S + 4 * k;
                let wv: [__m512i; G] =
                    std::array::from_fn(|g| _mm512_loadu_si512(w[g].add(c * GROUP) as *const _));
                for n in 0..T {
                    let xv = (xq.add(n * cols + c) as *const i32).read_unaligned();
                    let xv = _mm512_set1_epi32(xv);
                    for g in 0..G {
                        acc[g][n] = _mm512_dpbusd_epi32(acc[g][n], wv[g], xv);
                    }
                }
            }
            for g in 0..G {
                let d = _mm512_loadu_ps(self.d.as_ptr().add(sc[g] + s * GROUP));
                let m = _mm512_loadu_ps(self.m.as_ptr().add(sc[g] + s * GROUP));
                for n in 0..T {
                    let scale = _mm512_mul_ps(d, _mm512_set1_ps(*xd.add(n * subs + s)));
                    f[g][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[g][n]), scale, f[g][n]);
                    f[g][n] = _mm512_fmadd_ps(m, _mm512_set1_ps(*xs.add(n * subs + s)), f[g][n]);
                }
            }
        }
        for (g, f) in f.iter().enumerate() {
            let lanes = dst.lanes.saturating_sub(g * GROUP).min(GROUP);
            let mask: __mmask16 = ((1u32 << lanes) - 1) as __mmask16;
            for (n, f) in f.iter().enumerate() {
                _mm512_mask_storeu_ps(dst.at.add((i + n) * dst.stride + g * GROUP), mask, *f);
            }
        }
        T
    }

    /// Tokens `i..i + T` by equation (1) with `vpmaddubsw` and `vpmaddwd` (8 rows a vector, the
    /// group's two halves in turn), into `dst`. Returns `T`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2<const S: usize, const T: usize>(
        &self,
        act: &Activations,
        i: usize,
        dst: &Out,
    ) -> usize {
        let (cols, subs) = (act.cols, act.subs());
        let (xq, xd, xs) = act.row_at(i);
        let ones = _mm256_set1_epi16(1);
        for half in 0..2 * self.span {
            let lanes = dst.lanes.saturating_sub(half * 8).min(8);
            if lanes == 0 {
                break;
            }
            let (g, h) = (half / 2, half % 2);
            let w = self.q.as_ptr().add(g * GROUP * cols + h * 32);
            let mut f = [_mm256_setzero_ps(); T];
            for s in 0..subs {
                let mut acc = [_mm256_setzero_si256(); T];
                for k in 0..S / 4 {
                    let c = s * S + 4 * k;
                    let wv = _mm256_loadu_si256(w.add(c * GROUP) as *const _);
                    for (n, a) in acc.iter_mut().enumerate() {
                        let xv = (xq.add(n * cols + c) as *const i32).read_unaligned();
                        // Pairs of u8·i8 products: |q|·127·2 ≤ 63·254 fits i16 (`supports`).
                        let p = _mm256_maddubs_epi16(wv, _mm256_set1_epi32(xv));
                        *a = _mm256_add_epi32(*a, _mm256_madd_epi16(p, ones));
                    }
                }
                let at = (g * subs + s) * GROUP + h * 8;
                let d = _mm256_loadu_ps(self.d.as_ptr().add(at));
                let m = _mm256_loadu_ps(self.m.as_ptr().add(at));
                for (n, (a, f)) in acc.iter().zip(f.iter_mut()).enumerate() {
                    let scale = _mm256_mul_ps(d, _mm256_set1_ps(*xd.add(n * subs + s)));
                    *f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*a), scale, *f);
                    *f = _mm256_fmadd_ps(m, _mm256_set1_ps(*xs.add(n * subs + s)), *f);
                }
            }
            for (n, f) in f.iter().enumerate() {
                let to = dst.at.add((i + n) * dst.stride + half * 8);
                if lanes == 8 {
                    _mm256_storeu_ps(to, *f);
                } else {
                    let mut v = [0f32; 8];
                    _mm256_storeu_ps(v.as_mut_ptr(), *f);
                    std::ptr::copy_nonoverlapping(v.as_ptr(), to, lanes);
                }
            }
        }
        T
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::quant::tests::exact_product;
    use crate::model::quant::QuantRows;

    /// Equation (1) in f64 from the unpacked quants (the integer sums exact): what the kernels
    /// compute up to f32 rounding.
    fn equation_one(w: &QuantMatrix, act: &Activations, t: usize) -> Vec<f64> {
        let (rows, cols, sub) = (w.rows, w.cols, act.sub);
        let mut out = vec![0f64; t * rows];
        let (mut q, mut d, mut m) = (
            vec![0u8; cols],
            vec![0f32; cols / 16],
            vec![0f32; cols / 16],
        );
        for r in 0..rows {
            let (part, pr) = w.locate(r);
            unpack_row(part.ty, part.row(pr), &mut q, &mut d, &mut m);
            for i in 0..t {
                let mut y = 0f64;
                for s in 0..cols / sub {
                    let idot: i64 = (s * sub..(s + 1) * sub)
                        .map(|j| q[j] as i64 * act.q[i * cols + j] as i64)
                        .sum();
                    let at = i * (cols / sub) + s;
                    let (dw, mw) = (d[s * sub / 16] as f64, m[s * sub / 16] as f64);
                    y += dw * act.d[at] as f64 * idot as f64 + mw * act.s[at] as f64;
                }
                out[i * rows + r] = y;
            }
        }
        out
    }

    #[test]
    fn unpacked_quants_are_the_dequantised_weights() {
        // w = D·q + M must give back every dequantised weight (to an f32 rounding): the
        // unpacking is the dequantiser's algebra, per type.
        use GgmlType::*;
        for (i, ty) in [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4K, Q5K, Q6K]
            .into_iter()
            .enumerate()
        {
            let rows = crate::model::quant::tests::random_rows(ty, 3, 512, 70 + i as u64);
            let m = QuantMatrix::stack(vec![rows]).unwrap();
            let want = m.dequantize();
            let (mut q, mut d, mut mm) = (vec![0u8; 512], vec![0f32; 32], vec![0f32; 32]);
            for r in 0..3 {
                unpack_row(ty, m.parts[0].row(r), &mut q, &mut d, &mut mm);
                for j in 0..512 {
                    let got = d[j / 16] * q[j] as f32 + mm[j / 16];
                    let w = want[r * 512 + j];
                    assert!(
                        (got - w).abs() <= 1e-6 * w.abs().max(1e-3),
                        "{ty:?} [{r},{j}]: {got} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn activations_round_as_llama_cpp_q8_0() {
        // One block of 32 with max |x| = 127, so d = 1 and q = x rounded half to even: 63.5 →
        // 64, 0.5 → 0, 2.5 → 2, −1.5 → −2, −127 stays; the last element (16th on) 3.25 → 3.
        // Σq: first half 64 + 0 + 2 − 2 − 127 = −63, second half 3.
        let mut x = vec![0f32; 32];
        x[..5].copy_from_slice(&[63.5, 0.5, 2.5, -1.5, -127.0]);
        x[31] = 3.25;
        for avx2 in [false, true] {
            let mut q = [0i8; 32];
            let (d, sums) = if avx2 {
                if !is_x86_feature_detected!("avx2") {
                    continue;
                }
                // SAFETY: checked just above.
                unsafe { quantize_block_avx2(x[..].try_into().unwrap(), &mut q) }
            } else {
                quantize_block(x[..].try_into().unwrap(), &mut q)
            };
            assert_eq!(d, 1.0);
            assert_eq!(
                (&q[..5], q[31], sums),
                (&[64, 0, 2, -2, -127][..], 3, [-63, 3])
            );
        }
        let a = Activations::quantize(&x, 32, 32);
        assert_eq!((a.d[0], a.s[0]), (1.0, -60.0));
        let a = Activations::quantize(&x, 32, 16);
        assert_eq!((&a.d[..], &a.s[..]), (&[1.0, 1.0][..], &[-63.0, 3.0][..]));
    }

    #[test]
    fn a_q8_0_row_times_exact_activations_is_worked_by_hand() {
        // One Q8_0 row, d = 0.5, q_j = j − 16; activations x_j = 1 (j < 16), −1 after: max 1 so
        // d_x = 1/127 and q_x = ±127 exactly. Σ w·x = 0.5·(Σ_{j<16}(j−16) − Σ_{j≥16}(j−16)) =
        // 0.5·(−136 − 120) = −128; the integer path gives 0.5·127·(−256)·d_x with d_x = 1/127
        // rounded to f16 (0.0078735…), so −128·127·d_x = −127.992….
        let mut b = half::f16::from_f32(0.5).to_le_bytes().to_vec();
        b.extend((0..32).map(|j| (j as i8 - 16) as u8));
        let w =
            QuantMatrix::stack(vec![QuantRows::new(GgmlType::Q8_0, 1, 32, b).unwrap()]).unwrap();
        let x: Vec<f32> = (0..32).map(|j| if j < 16 { 1.0 } else { -1.0 }).collect();
        let Some(isa) = isa() else { return };
        let act = Activations::quantize(&x, 32, 32);
        if supports(GgmlType::Q8_0, isa) {
            let y = w.int8_with(&act, 1, isa);
            let dx = half::f16::from_f32(1.0 / 127.0).to_f32();
            assert!((y[0] + 128.0 * 127.0 * dx).abs() < 1e-4, "{}", y[0]);
            assert!((y[0] + 128.0).abs() < 1e-2, "{}", y[0]);
        }
    }

    #[test]
    fn every_kernel_computes_equation_one_on_every_type() {
        use GgmlType::*;
        let Some(best) = isa() else { return };
        let isas: &[Isa] = if best == Isa::Vnni {
            &[Isa::Vnni, Isa::Avx2]
        } else {
            &[Isa::Avx2]
        };
        let cols = 512;
        let mut rng = crate::generate::SplitMix64::new(3);
        // 37 rows: two groups and a partial one; 21 tokens: chunks of 8 (4) and a tail.
        let types = [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4K, Q5K, Q6K];
        for (i, ty) in types.into_iter().enumerate() {
            // Stacked with a Q4_K part, as a fused projection with mixed types is.
            let parts = vec![
                crate::model::quant::tests::random_rows(ty, 30, cols, 90 + i as u64),
                crate::model::quant::tests::random_rows(Q4K, 7, cols, 9),
            ];
            let w = QuantMatrix::stack(parts).unwrap();
            let t = 21;
            let x: Vec<f32> = (0..t * cols)
                .map(|_| (rng.next_f64() - 0.5) as f32 * 4.0)
                .collect();
            let sub = if ty == Q6K { 16 } else { 32 };
            let act = Activations::quantize(&x, cols, sub);
            let want = equation_one(&w, &act, t);
            let dense = w.dequantize();
            for &isa in isas {
                if !supports(ty, isa) {
                    continue;
                }
                let got = w.int8_with(&act, t, isa);
                for (k, (&g, &e)) in got.iter().zip(&want).enumerate() {
                    let (tok, r) = (k / w.rows, k % w.rows);
                    let scale: f64 = (0..cols)
                        .map(|j| (dense[r * cols + j] * x[tok * cols + j]).abs() as f64)
                        .sum();
                    assert!(
                        (g as f64 - e).abs() <= 1e-5 * scale,
                        "{ty:?} {isa:?} [{tok},{r}]: {g} vs {e}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_integer_product_is_within_the_activations_rounding_of_the_f32_one() {
        // Each activation moves by at most d_x/2, so |Σ w·x − Σ w·x̂| ≤ Σ_j |w_j|·d_x,j/2.
        use GgmlType::*;
        let Some(isa) = isa() else { return };
        let cols = 256;
        let w = QuantMatrix::stack(vec![crate::model::quant::tests::random_rows(
            Q4K, 20, cols, 5,
        )])
        .unwrap();
        let dense = w.dequantize();
        let mut rng = crate::generate::SplitMix64::new(8);
        let t = 9;
        let x: Vec<f32> = (0..t * cols)
            .map(|_| (rng.next_f64() - 0.5) as f32)
            .collect();
        let y = w.int8(&x, t).expect("Q4_K has integer kernels");
        let act = Activations::quantize(&x, cols, 32);
        let _ = isa;
        // d_x is stored as f16: the bound allows its rounding too (2⁻¹¹ of each product).
        for i in 0..t {
            for r in 0..20 {
                let (exact, magnitude) = exact_product(&dense, &x, cols, r, i);
                let bound: f64 = (0..cols)
                    .map(|j| {
                        dense[r * cols + j].abs() as f64 * act.d[i * cols / 32 + j / 32] as f64
                            / 2.0
                    })
                    .sum();
                let got = y[i * 20 + r] as f64;
                assert!(
                    (got - exact).abs() <= bound * 1.001 + magnitude * 1e-3 + 1e-5,
                    "[{i},{r}]: {got} vs {exact} (bound {bound})"
                );
            }
        }
    }
}
