//! Weights kept in memory as the GGUF stores them (`Q4_0` … `Q8_0`, `Q4_K` … `Q6_K` blocks, or
//! `F32`/`F16`/`BF16` rows), multiplied on the host without a whole f32 copy ever existing.
//!
//! **Why.** A decode step multiplies one activation row by every weight, so it is bound by
//! reading the weights: 4.5–8.5 bits a weight instead of 32 is what makes decoding fast, and what
//! lets a 1.5B model run in well under 2 GB.
//!
//! **How (few rows, decode).** Each output row is a dot product over its blocks: a block is
//! dequantised into a small buffer ([`GgmlType::dequantize_block`], the values
//! [`GgmlType::dequantize`] gives, bit for bit) and multiplied with the activations at once;
//! output rows are split across threads. Activations stay f32 (llama.cpp quantises them to 8 bits
//! for its integer dot products; this does not), so the result is the f32 product of the exact
//! dequantised weights, up to the order of the sums. For one activation row on a CPU with AVX2
//! and FMA, `Q4_0`, `Q4_1`, `Q5_0`, `Q8_0`, `Q4_K` and `Q6_K` rows skip the buffer: [`dot_avx2`]
//! multiplies each (sub-)block's quants with the activations and scales the sum by the block's
//! scale once (ggml's factoring), a minimum entering as `m·Σx`; with AVX-512F the 32-weight
//! block types take [`dot_avx512`], the same in 16 lanes (`KVPLAN_AVX512=0` keeps AVX2).
//!
//! **How (many rows, prefill).** Tiles of weight rows are dequantised into f32 and multiplied
//! with the `gemm` crate (the kernel burn-flex's matmul uses), one tile per thread at a time, so
//! at most [`TILE_BYTES`] of f32 weights per thread exist at once; each tile's product is written
//! straight into its band of output columns. With [`Kernels::Int8`] ([`set_kernels`],
//! `--kernels int8`) a prefill instead quantises its activations to 8 bits per block of 32, as
//! llama.cpp does, and multiplies them with the weights' integer quants ([`int8`]): faster, and no
//! longer the f32 product of the dequantised weights (docs/speed.md measures what it moves).
//!
//! A [`QuantMatrix`] stacks one or more GGUF tensors along the output dimension (the fused
//! Q/K/V projection is three tensors, possibly of three storage types).

// The host kernels run on the CPU backend only; the other backends build the types, not the calls.
#![cfg_attr(not(feature = "flex"), allow(dead_code))]

use std::fmt;

use crate::gguf::{GgmlType, TensorData};

#[cfg(all(feature = "flex", target_arch = "x86_64"))]
mod dot_avx2;
#[cfg(all(feature = "flex", target_arch = "x86_64"))]
mod dot_avx512;
#[cfg(all(feature = "flex", target_arch = "x86_64"))]
mod int8;
#[cfg(all(feature = "flex", target_arch = "x86_64"))]
mod int8_rows;
#[cfg(all(feature = "flex", target_arch = "x86_64"))]
mod rows;

/// The environment variable that picks the prefill kernels (`f32` or `int8`) where no command
/// line chose ([`set_kernels`]).
pub const KERNELS_ENV: &str = "KVPLAN_KERNELS";

/// How quantised weights multiply many activation rows (a prefill) on the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernels {
    /// Tiles dequantised to f32 and multiplied with `gemm`: the exact dequantised weights times
    /// the f32 activations (the parity tests' numbers; the profiler's).
    F32,
    /// Activations quantised to 8 bits per block of 32 and integer dot products with the
    /// weights' quants ([`int8`]'s equation (1)): a prefill where the CPU has AVX-512 VNNI or
    /// AVX2 and every part of the matrix has integer quants (elsewhere the f32 tiles); decode's
    /// `Q4_K`, `Q5_K` and `Q6_K` rows, in activation blocks of 256, where it has AVX-512 VNNI
    /// and VL ([`int8_rows`]; other rows: the f32 kernels).
    Int8,
}

impl std::str::FromStr for Kernels {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "f32" => Ok(Self::F32),
            "int8" => Ok(Self::Int8),
            other => Err(format!("kernels `{other}`: expected `f32` or `int8`")),
        }
    }
}

impl fmt::Display for Kernels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::F32 => "f32",
            Self::Int8 => "int8",
        })
    }
}

/// 0: not decided (read [`KERNELS_ENV`]), 1: f32, 2: int8.
static KERNELS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Chooses the prefill kernels for this process, over the environment.
pub fn set_kernels(k: Kernels) {
    let v = match k {
        Kernels::F32 => 1,
        Kernels::Int8 => 2,
    };
    KERNELS.store(v, std::sync::atomic::Ordering::Relaxed);
}

/// The kernels [`KERNELS_ENV`] names, if it is set to `f32` or `int8`.
pub fn kernels_from_env() -> Option<Kernels> {
    std::env::var(KERNELS_ENV).ok().and_then(|v| v.parse().ok())
}

/// The prefill kernels: [`set_kernels`]'s choice, else [`KERNELS_ENV`], else f32.
pub fn kernels() -> Kernels {
    match KERNELS.load(std::sync::atomic::Ordering::Relaxed) {
        1 => Kernels::F32,
        2 => Kernels::Int8,
        _ => {
            let k = kernels_from_env().unwrap_or(Kernels::F32);
            set_kernels(k);
            k
        }
    }
}

/// Whether the integer kernels run in this process: [`Kernels::Int8`] chosen, on the CPU
/// backend, on a CPU that has one of them.
pub fn int8_in_use() -> bool {
    cfg!(feature = "flex") && kernels() == Kernels::Int8 && int8_available()
}

/// The prefill kernels in use, as reports name them: `f32`, `int8 (AVX-512 VNNI)`,
/// `int8 (AVX2; Q8_0 parts keep f32)` ([`int8_multiplies`]), or `f32 (int8 asked; this CPU has
/// neither AVX-512 VNNI nor AVX2)`.
pub fn kernels_in_use() -> String {
    if !cfg!(feature = "flex") {
        return "the backend's own (GPU or LibTorch)".into();
    }
    #[cfg(all(feature = "flex", target_arch = "x86_64"))]
    if let (true, Some(isa)) = (int8_in_use(), int8::isa()) {
        let kept = if int8::supports(GgmlType::Q8_0, isa) {
            ""
        } else {
            "; Q8_0 parts keep f32"
        };
        return format!("int8 ({}{kept})", isa.name());
    }
    match kernels() {
        Kernels::F32 => "f32".into(),
        Kernels::Int8 => "f32 (int8 asked; this CPU has neither AVX-512 VNNI nor AVX2)".into(),
    }
}

/// Whether this CPU's integer kernel is the one measured faster than the f32 tiles: AVX-512
/// VNNI. (The AVX2 kernel, forced on the AVX-512 machine of docs/speed.md, ran at 0.8× its f32
/// gemm; on an AVX2-only CPU it was not measured, so the f32 tiles stay the default there.)
pub fn int8_preferred() -> bool {
    #[cfg(all(feature = "flex", target_arch = "x86_64"))]
    return int8::isa() == Some(int8::Isa::Vnni);
    #[cfg(not(all(feature = "flex", target_arch = "x86_64")))]
    false
}

/// Whether [`Kernels::Int8`] has an integer kernel on this CPU (AVX-512 VNNI or AVX2).
pub fn int8_available() -> bool {
    #[cfg(all(feature = "flex", target_arch = "x86_64"))]
    return int8::isa().is_some();
    #[cfg(not(all(feature = "flex", target_arch = "x86_64")))]
    false
}

/// Whether the integer prefill kernels multiply a part stored as `ty` on this CPU, once
/// [`Kernels::Int8`] is chosen: the integer quants on AVX-512 VNNI, all but `Q8_0` on AVX2 alone
/// (its unsigned quants overflow `vpmaddubsw`'s pair sums, [`int8`]); float parts never. A
/// matrix with a part it does not multiply keeps the f32 path.
pub fn int8_multiplies(ty: GgmlType) -> bool {
    #[cfg(all(feature = "flex", target_arch = "x86_64"))]
    return int8::isa().is_some_and(|isa| int8::supports(ty, isa));
    #[cfg(not(all(feature = "flex", target_arch = "x86_64")))]
    {
        let _ = ty;
        false
    }
}

/// Set to `0` to keep the one-row dot products on their AVX2 kernels on a CPU with AVX-512
/// (an A/B switch for benchmarks; read once per process).
pub const AVX512_ENV: &str = "KVPLAN_AVX512";

/// Whether the one-row kernels of [`dot_avx512`] run: the CPU has AVX-512F and
/// [`AVX512_ENV`] is not `0`.
#[cfg(all(feature = "flex", target_arch = "x86_64"))]
fn wide_dots() -> bool {
    static WIDE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WIDE.get_or_init(|| {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::env::var(AVX512_ENV).map_or(true, |v| v.trim() != "0")
    })
}

/// Rows of activations up to which the fused dot-product kernel runs (decode, short steps);
/// beyond, weight tiles are dequantised and multiplied with `gemm`, whose fixed cost (every
/// weight dequantised to f32 once per call) a short forward does not repay. One thread, every
/// other job paused (results/notes/2026-11-26-speed-amd-epyc.md): a forward of 8 tokens takes
/// 0.065 s fused against 0.17 s tiled on SmolLM2 (0.22 against 0.33–0.38 on Qwen 0.5B), 16
/// tokens 0.11–0.16 against 0.19 (0.34 against 0.40–0.44); at 32 the tiles win (0.22 against
/// 0.19–0.20, 0.51 against 0.60).
pub const FUSED_MAX_ROWS: usize = 16;

/// Bytes of f32 weights one prefill tile holds at most.
pub const TILE_BYTES: usize = 8 << 20;

/// Weights per thread task in the fused kernel, at least (a task is whole rows): rayon's cost
/// per task is then small beside the work.
const WEIGHTS_PER_TASK: usize = 1 << 17;

/// Weights per dequantised step: one block, or 32 single-element blocks (`F32`/`F16`/`BF16`);
/// [`QuantRows::dot_rows`] names the same steps per type.
fn step_of(ty: GgmlType) -> usize {
    ty.block_size().max(32)
}

/// The rows `[out, in]` of one GGUF tensor, in its storage type.
#[derive(Clone)]
pub struct QuantRows {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    bytes: TensorData,
}

impl fmt::Debug for QuantRows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QuantRows({:?}, {}×{})", self.ty, self.rows, self.cols)
    }
}

impl QuantRows {
    /// `rows` rows of `cols` weights stored as `ty` in `bytes` (row-major, as in the file).
    /// Refuses a row length that is not a whole number of steps, or the wrong byte count.
    pub fn new(
        ty: GgmlType,
        rows: usize,
        cols: usize,
        bytes: impl Into<TensorData>,
    ) -> Result<Self, String> {
        let bytes = bytes.into();
        let step = step_of(ty);
        if cols == 0 || !cols.is_multiple_of(step) {
            return Err(format!(
                "{ty:?} rows of {cols} weights: kept quantised only in whole steps of {step}"
            ));
        }
        let need = rows * ty.row_bytes(cols as u64) as usize;
        if bytes.len() != need {
            return Err(format!(
                "{ty:?} {rows}×{cols} needs {need} bytes, found {}",
                bytes.len()
            ));
        }
        Ok(Self {
            ty,
            rows,
            cols,
            bytes,
        })
    }

    /// The storage type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    fn row_bytes(&self) -> usize {
        self.ty.row_bytes(self.cols as u64) as usize
    }

    fn row(&self, r: usize) -> &[u8] {
        let n = self.row_bytes();
        &self.bytes[r * n..(r + 1) * n]
    }

    /// The same rows reordered: row `j` of the result is row `from[j]` (a permutation).
    pub fn permuted(&self, from: &[usize]) -> Self {
        let bytes: Vec<u8> = from.iter().flat_map(|&r| self.row(r)).copied().collect();
        Self {
            bytes: bytes.into(),
            ..self.clone()
        }
    }

    /// Rows `from..from + n` alone (one half of a fused tensor, e.g. Phi-3's gate ‖ up), sharing
    /// the bytes.
    pub fn rows_range(&self, from: usize, n: usize) -> Self {
        let b = self.row_bytes();
        Self {
            bytes: self.bytes.slice(from * b, n * b),
            rows: n,
            ..self.clone()
        }
    }

    /// Row `r` as f32 into `y` (`cols` values), the loop compiled once per storage type.
    #[inline(always)]
    fn dequantize_row(&self, r: usize, y: &mut [f32]) {
        use GgmlType::*;
        let row = self.row(r);
        match self.ty {
            Q4_0 => dequantize_blocks(Q4_0, row, y),
            Q4_1 => dequantize_blocks(Q4_1, row, y),
            Q5_0 => dequantize_blocks(Q5_0, row, y),
            Q5_1 => dequantize_blocks(Q5_1, row, y),
            Q8_0 => dequantize_blocks(Q8_0, row, y),
            Q4K => dequantize_blocks(Q4K, row, y),
            Q5K => dequantize_blocks(Q5K, row, y),
            Q6K => dequantize_blocks(Q6K, row, y),
            F32 | F16 | BF16 => dequantize_blocks(self.ty, row, y),
        }
    }

    /// `out[i] = Σ_j w[r][j]·x[i][j]` for the `out.len()` rows of `x` (`[rows][cols]`), `out.len()
    /// ≤ FUSED_MAX_ROWS`, the loop compiled once per storage type ([`dot_steps`]).
    #[inline(always)]
    fn dot_rows(&self, r: usize, x: &[f32], out: &mut [f32]) {
        use GgmlType::*;
        let (row, cols) = (self.row(r), self.cols);
        match self.ty {
            Q4_0 => dot_steps::<32>(Q4_0, row, x, cols, out),
            Q4_1 => dot_steps::<32>(Q4_1, row, x, cols, out),
            Q5_0 => dot_steps::<32>(Q5_0, row, x, cols, out),
            Q5_1 => dot_steps::<32>(Q5_1, row, x, cols, out),
            Q8_0 => dot_steps::<32>(Q8_0, row, x, cols, out),
            Q4K => dot_steps::<256>(Q4K, row, x, cols, out),
            Q5K => dot_steps::<256>(Q5K, row, x, cols, out),
            Q6K => dot_steps::<256>(Q6K, row, x, cols, out),
            F32 | F16 | BF16 => dot_steps::<32>(self.ty, row, x, cols, out),
        }
    }
}

/// Every block of `row` (type `ty`) into `y`; inlined per call site, so `ty` is a constant.
#[inline(always)]
fn dequantize_blocks(ty: GgmlType, row: &[u8], y: &mut [f32]) {
    let (bs, bb) = (ty.block_size(), ty.block_bytes());
    for (b, y) in row.chunks_exact(bb).zip(y.chunks_exact_mut(bs)) {
        ty.dequantize_block(b, y);
    }
}

/// The fused dot products of one row (`row`: its bytes) of type `ty`, `STEP` weights at a time:
/// each step is dequantised once into a buffer ([`GgmlType::dequantize_block`]) and multiplied
/// with every row of `x`, in eight running sums per row. Inlined per call site, so `ty` is a
/// constant and the block decoder inlines into the loop.
#[inline(always)]
fn dot_steps<const STEP: usize>(ty: GgmlType, row: &[u8], x: &[f32], cols: usize, out: &mut [f32]) {
    let (bs, bb) = (ty.block_size(), ty.block_bytes());
    let mut w = [0f32; STEP];
    let mut acc = [[0f32; 8]; FUSED_MAX_ROWS];
    for (s, bytes) in row.chunks_exact(bb * (STEP / bs)).enumerate() {
        for (b, y) in bytes.chunks_exact(bb).zip(w.chunks_exact_mut(bs)) {
            ty.dequantize_block(b, y);
        }
        for (i, a) in acc.iter_mut().enumerate().take(out.len()) {
            let xs = &x[i * cols + s * STEP..i * cols + (s + 1) * STEP];
            for (wc, xc) in w.chunks_exact(8).zip(xs.chunks_exact(8)) {
                for l in 0..8 {
                    a[l] += wc[l] * xc[l];
                }
            }
        }
    }
    for (o, a) in out.iter_mut().zip(&acc) {
        *o = a.iter().sum();
    }
}

/// A weight `[rows, cols]` stacked from GGUF tensors along its rows (the output features).
#[derive(Clone)]
pub struct QuantMatrix {
    parts: Vec<QuantRows>,
    /// Output features (rows of all parts).
    rows: usize,
    /// Input features.
    cols: usize,
}

impl fmt::Debug for QuantMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantMatrix")
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("parts", &self.parts)
            .finish()
    }
}

impl QuantMatrix {
    /// The rows of `parts`, in order; refuses parts of different row lengths.
    pub fn stack(parts: Vec<QuantRows>) -> Result<Self, String> {
        let cols = parts.first().map_or(0, |p| p.cols);
        if let Some(p) = parts.iter().find(|p| p.cols != cols) {
            return Err(format!(
                "stacked weights have rows of {cols} and of {} weights",
                p.cols
            ));
        }
        let rows = parts.iter().map(|p| p.rows).sum();
        Ok(Self { parts, rows, cols })
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.bytes.len()).sum()
    }

    /// The part holding row `r` and the row's index in it.
    fn locate(&self, mut r: usize) -> (&QuantRows, usize) {
        for p in &self.parts {
            if r < p.rows {
                return (p, r);
            }
            r -= p.rows;
        }
        unreachable!("row index below `rows` (callers iterate 0..rows)")
    }

    /// Rows `ids` as f32, `[ids.len()][cols]` (an embedding lookup).
    pub fn dequantize_rows(&self, ids: &[usize]) -> Vec<f32> {
        let mut out = vec![0f32; ids.len() * self.cols];
        self.dequantize_rows_into(ids, &mut out);
        out
    }

    /// Rows `ids` as f32 into `out` (`[ids.len()][cols]`), with AVX2 where the CPU has it (the
    /// same values either way).
    pub fn dequantize_rows_into(&self, ids: &[usize], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has the feature the function is compiled for.
            unsafe { self.dequantize_into_avx2(ids, out) };
            return;
        }
        self.dequantize_into(ids, out);
    }

    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn dequantize_into_avx2(&self, ids: &[usize], out: &mut [f32]) {
        self.dequantize_into(ids, out)
    }

    #[inline(always)]
    fn dequantize_into(&self, ids: &[usize], out: &mut [f32]) {
        for (&r, y) in ids.iter().zip(out.chunks_exact_mut(self.cols.max(1))) {
            let (p, pr) = self.locate(r);
            p.dequantize_row(pr, y);
        }
    }

    /// Every row as f32, `[rows][cols]`.
    pub fn dequantize(&self) -> Vec<f32> {
        let ids: Vec<usize> = (0..self.rows).collect();
        self.dequantize_rows(&ids)
    }
}

#[cfg(feature = "flex")]
mod kernels {
    use rayon::prelude::*;

    use std::cell::RefCell;

    #[cfg(target_arch = "x86_64")]
    use super::int8_rows::{self, RowActivations as Activations};
    #[cfg(target_arch = "x86_64")]
    use super::{dot_avx2, dot_avx512};
    /// Stands in for the integer kernels' activations where they are not built.
    #[cfg(not(target_arch = "x86_64"))]
    enum Activations {}
    use super::{QuantMatrix, FUSED_MAX_ROWS, TILE_BYTES, WEIGHTS_PER_TASK};
    use crate::model::gemm::{gemm_into, Gemm};

    /// The output buffer, shared by the tile tasks, each writing its own band of columns.
    struct Bands(*mut f32);
    // SAFETY: tasks write disjoint column bands (see `tiled`), and the buffer outlives them.
    unsafe impl Send for Bands {}
    // SAFETY: as for `Send`: no two tasks touch the same element, so shared access is sound.
    unsafe impl Sync for Bands {}
    impl Bands {
        fn ptr(&self) -> *mut f32 {
            self.0
        }
    }

    thread_local! {
        /// Each thread's prefill tile of f32 weights.
        static TILE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    }

    impl QuantMatrix {
        /// `x · Wᵀ` for the `t` rows of `x` (`[t][cols]`), returned `[t][rows]`: fused dot
        /// products for up to [`FUSED_MAX_ROWS`] rows, dequantised tiles and `gemm` beyond.
        pub fn matmul(&self, x: &[f32], t: usize) -> Vec<f32> {
            assert_eq!(
                x.len(),
                t * self.cols,
                "quantised matmul: x is not [t, cols]"
            );
            if t > FUSED_MAX_ROWS {
                #[cfg(target_arch = "x86_64")]
                if super::kernels() == super::Kernels::Int8 {
                    if let Some(y) = self.int8(x, t) {
                        return y;
                    }
                }
                return self.tiled(x, t);
            }
            let by_row = self.fused(x, t);
            if t == 1 {
                return by_row;
            }
            let mut out = vec![0f32; t * self.rows];
            for (r, row) in by_row.chunks_exact(t).enumerate() {
                for (i, &v) in row.iter().enumerate() {
                    out[i * self.rows + r] = v;
                }
            }
            out
        }

        /// `[rows][t]`: each output row's dot products with the `t ≤ FUSED_MAX_ROWS` rows of `x`,
        /// whole rows per task.
        fn fused(&self, x: &[f32], t: usize) -> Vec<f32> {
            let rows_per_task = (WEIGHTS_PER_TASK / self.cols.max(1))
                .min(self.rows.div_ceil(2 * rayon::current_num_threads().max(1)))
                .max(1);
            let mut by_row = vec![0f32; self.rows * t];
            let act = self.one_row_activations(x);
            by_row
                .par_chunks_mut(rows_per_task * t)
                .enumerate()
                .for_each(|(c, chunk)| self.fused_task(c * rows_per_task, x, act.as_ref(), chunk));
            by_row
        }

        /// With [`super::Kernels::Int8`] on a CPU that runs [`int8_rows::dot_rows`] and a part it
        /// multiplies, the activations quantised for it (blocks of 256, llama.cpp's `Q8_K`).
        #[cfg(target_arch = "x86_64")]
        fn one_row_activations(&self, x: &[f32]) -> Option<Activations> {
            let on = super::kernels() == super::Kernels::Int8
                && int8_rows::available()
                && self.cols.is_multiple_of(256)
                && self.parts.iter().any(|p| int8_rows::supports(p.ty));
            on.then(|| Activations::quantize(x, self.cols))
        }

        #[cfg(not(target_arch = "x86_64"))]
        fn one_row_activations(&self, _x: &[f32]) -> Option<Activations> {
            None
        }

        /// Rows `first..` into `chunk` (`[n][t]`), with AVX2 and FMA where the CPU has them.
        fn fused_task(
            &self,
            first: usize,
            x: &[f32],
            act: Option<&Activations>,
            chunk: &mut [f32],
        ) {
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                // SAFETY: the CPU has the features the function is compiled for.
                return unsafe { self.fused_rows_avx2(first, x, act, chunk) };
            }
            let _ = act;
            self.fused_rows(first, x, chunk)
        }

        /// [`Self::fused_rows`] compiled for AVX2 and FMA (the same operations: dequantised
        /// values are unchanged; only the dot products' sums may round differently).
        /// Rows of the types [`dot_avx2`] knows take its kernel (the block scale factored out;
        /// AVX-512 where [`super::wide_dots`]), the activation rows in groups of 8, 4, 2, 1
        /// ([`Self::group_rows`]): each activation row gets the result it gets alone. The other
        /// types take [`Self::fused_rows`] compiled for AVX2 and FMA.
        ///
        /// # Safety
        /// The CPU must have AVX2 and FMA.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fused_rows_avx2(
            &self,
            first: usize,
            x: &[f32],
            act: Option<&Activations>,
            chunk: &mut [f32],
        ) {
            let t = x.len() / self.cols;
            if !self.cols.is_multiple_of(dot_avx2::BLOCK) {
                return self.fused_rows(first, x, chunk);
            }
            // The f32 kernels' block sums, unless the integer one-row kernels take every part.
            let all_int8 = act.is_some() && self.parts.iter().all(|p| int8_rows::supports(p.ty));
            let sums = if all_int8 {
                vec![0f32; x.len() / dot_avx2::BLOCK]
            } else {
                dot_avx2::block_sums(x)
            };
            let (cols, per) = (self.cols, self.cols / dot_avx2::BLOCK);
            let mut i = 0;
            while i < t {
                let n = [8, 4, 2, 1].into_iter().find(|&n| n <= t - i).unwrap_or(1);
                let (xs, ss) = (&x[i * cols..(i + n) * cols], &sums[i * per..(i + n) * per]);
                // SAFETY: the CPU has AVX2 and FMA (this function's own features).
                unsafe {
                    match n {
                        8 => self.group_rows::<8>(first, xs, ss, act, chunk, (i, t)),
                        4 => self.group_rows::<4>(first, xs, ss, act, chunk, (i, t)),
                        2 => self.group_rows::<2>(first, xs, ss, act, chunk, (i, t)),
                        _ => self.group_rows::<1>(first, xs, ss, act, chunk, (i, t)),
                    }
                }
                i += n;
            }
        }

        /// Activation rows `i..i + R` of `t` (`xs`, their block sums `sums`) against weight rows
        /// `first..` into `chunk` (`[n][t]`), one kernel call per weight row.
        ///
        /// # Safety
        /// The CPU must have AVX2 and FMA.
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn group_rows<const R: usize>(
            &self,
            first: usize,
            xs: &[f32],
            sums: &[f32],
            act: Option<&Activations>,
            chunk: &mut [f32],
            (i, t): (usize, usize),
        ) {
            let f16 = crate::gguf::f16_table();
            let wide = super::wide_dots();
            for (k, out) in chunk.chunks_exact_mut(t).enumerate() {
                let (part, r) = self.locate(first + k);
                let out = &mut out[i..i + R];
                if let Some(act) = act.filter(|_| int8_rows::supports(part.ty)) {
                    // SAFETY: `one_row_activations` made `act` only where
                    // `int8_rows::available()`.
                    unsafe { int8_rows::dot_rows::<R>(part.ty, part.row(r), act, i, out) };
                } else if wide && dot_avx512::supports(part.ty) {
                    // SAFETY: `wide_dots` found AVX-512F on this CPU.
                    unsafe { dot_avx512::dot_rows::<R>(part.ty, part.row(r), xs, sums, f16, out) };
                } else if dot_avx2::supports(part.ty) {
                    // SAFETY: the CPU has AVX2 and FMA (this function's own features).
                    unsafe { dot_avx2::dot_rows::<R>(part.ty, part.row(r), xs, sums, f16, out) };
                } else {
                    part.dot_rows(r, xs, out);
                }
            }
        }

        #[inline(always)]
        fn fused_rows(&self, first: usize, x: &[f32], chunk: &mut [f32]) {
            let t = x.len() / self.cols;
            for (k, out) in chunk.chunks_exact_mut(t).enumerate() {
                let (part, r) = self.locate(first + k);
                part.dot_rows(r, x, out);
            }
        }

        /// `[t][rows]`: tiles of rows dequantised and multiplied with `gemm`, one tile per task,
        /// each writing its band of output columns.
        fn tiled(&self, x: &[f32], t: usize) -> Vec<f32> {
            let (rows, cols) = (self.rows, self.cols);
            let tasks = 2 * rayon::current_num_threads().max(1);
            let tile = (rows.div_ceil(tasks))
                .clamp(16, (TILE_BYTES / (4 * cols)).max(16))
                .min(rows);
            let mut out = vec![0f32; t * rows];
            let bands = Bands(out.as_mut_ptr());
            (0..rows.div_ceil(tile)).into_par_iter().for_each(|c| {
                let first = c * tile;
                let n = tile.min(rows - first);
                // One tile buffer per thread, reused: a fresh one would cost its page faults on
                // every call.
                TILE.with_borrow_mut(|w| {
                    w.resize(n * cols, 0.0);
                    let ids: Vec<usize> = (first..first + n).collect();
                    self.dequantize_rows_into(&ids, w); // [n][cols]
                                                        // out[i][first + j] = Σ_k x[i][k]·w[j][k]: x `[t][cols]` times w read as
                                                        // its transpose, into columns first..first + n of every output row.
                    let g = Gemm { m: t, n, k: cols };
                    // SAFETY: out holds t rows of `rows`; this task alone writes columns
                    // first..first + n < rows of them, and out outlives the parallel loop.
                    unsafe {
                        gemm_into(g, bands.ptr().add(first), rows, x, w, (cols as isize, 1));
                    }
                });
            });
            out
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A `Q8_0` block: scale `d` (f16 bits), then 32 signed quants.
    fn q8_block(d: f32, q: impl Fn(usize) -> i8) -> Vec<u8> {
        let mut b = half::f16::from_f32(d).to_le_bytes().to_vec();
        b.extend((0..32).map(|i| q(i) as u8));
        b
    }

    #[test]
    fn rows_of_the_wrong_length_or_size_are_refused() {
        assert!(QuantRows::new(GgmlType::Q8_0, 1, 48, vec![0; 34]).is_err());
        assert!(QuantRows::new(GgmlType::Q8_0, 1, 32, vec![0; 33]).is_err());
        assert!(QuantRows::new(GgmlType::Q8_0, 2, 32, vec![0; 68]).is_ok());
    }

    #[test]
    fn stacked_rows_dequantise_in_order_and_permute() {
        // Part 1: two Q8_0 rows (d = 0.5: q·0.5); part 2: one F32 row of 32 weights.
        let mut a = q8_block(0.5, |i| i as i8);
        a.extend(q8_block(0.5, |i| -(i as i8)));
        let b: Vec<u8> = (0..32)
            .flat_map(|i| (i as f32 * 2.0).to_le_bytes())
            .collect();
        let m = QuantMatrix::stack(vec![
            QuantRows::new(GgmlType::Q8_0, 2, 32, a).unwrap(),
            QuantRows::new(GgmlType::F32, 1, 32, b).unwrap(),
        ])
        .unwrap();
        let w = m.dequantize();
        assert_eq!((m.rows(), w.len()), (3, 96));
        assert_eq!((w[3], w[32 + 3], w[64 + 3]), (1.5, -1.5, 6.0));
        let swapped = m.parts[0].permuted(&[1, 0]);
        let mut y = vec![0f32; 32];
        swapped.dequantize_row(0, &mut y);
        assert_eq!(y[3], -1.5);
    }

    #[test]
    fn fused_dot_equals_the_dequantised_product() {
        // One Q8_0 row of 64 weights (two blocks): w_j = (j mod 32 − 16)·0.25 (exact in f16);
        // x_j = 1 for j < 32, 2 after. Σ (j−16)·0.25 over j < 32 = 0.25·(496 − 512) = −4;
        // the second block doubles it: −8. Total −12.
        let mut bytes = q8_block(0.25, |i| i as i8 - 16);
        bytes.extend(q8_block(0.25, |i| i as i8 - 16));
        let rows = QuantRows::new(GgmlType::Q8_0, 1, 64, bytes).unwrap();
        let x: Vec<f32> = (0..64).map(|j| if j < 32 { 1.0 } else { 2.0 }).collect();
        // Two activation rows: x and 2x.
        let x2: Vec<f32> = x
            .iter()
            .chain(x.iter())
            .enumerate()
            .map(|(i, v)| if i < 64 { *v } else { 2.0 * v })
            .collect();
        let mut out = [0f32; 2];
        rows.dot_rows(0, &x2, &mut out);
        assert_eq!(out, [-12.0, -24.0]);
    }

    /// Every weight type a [`QuantMatrix`] holds.
    #[cfg(feature = "flex")]
    const TYPES: [GgmlType; 11] = {
        use GgmlType::*;
        [F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4K, Q5K, Q6K]
    };

    /// Row `r` of the weights `w` (rows of `cols`) times row `i` of the activations `x`, in f64:
    /// the product and the sum of its terms' magnitudes (the scale its rounding is measured by).
    pub(crate) fn exact_product(
        w: &[f32],
        x: &[f32],
        cols: usize,
        r: usize,
        i: usize,
    ) -> (f64, f64) {
        let terms = (0..cols).map(|j| w[r * cols + j] as f64 * x[i * cols + j] as f64);
        (terms.clone().sum(), terms.map(f64::abs).sum())
    }

    /// `rows` random rows of `cols` weights of type `ty`: random bytes, with every f16 scale
    /// (and minimum) set to a finite value, so each block decodes to finite weights.
    pub(crate) fn random_rows(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> QuantRows {
        let mut rng = crate::generate::SplitMix64::new(seed);
        let n = rows * ty.row_bytes(cols as u64) as usize;
        let mut bytes: Vec<u8> = (0..n).map(|_| (rng.next_u64() >> 24) as u8).collect();
        let half = |v: f64| half::f16::from_f64(v).to_le_bytes();
        let scales: &[usize] = match ty {
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
            GgmlType::Q6K => &[208],
            GgmlType::F32 => {
                for w in bytes.chunks_exact_mut(4) {
                    w.copy_from_slice(&((rng.next_f64() - 0.5) as f32).to_le_bytes());
                }
                &[]
            }
            GgmlType::F16 | GgmlType::BF16 => &[0],
        };
        for b in bytes.chunks_exact_mut(ty.block_bytes()) {
            for &at in scales {
                let v = (rng.next_f64() - 0.5) * 0.1;
                let h = match ty {
                    GgmlType::BF16 => half::bf16::from_f64(v).to_le_bytes(),
                    _ => half(v),
                };
                b[at..at + 2].copy_from_slice(&h);
            }
        }
        QuantRows::new(ty, rows, cols, bytes).unwrap()
    }

    #[cfg(feature = "flex")]
    #[test]
    fn every_type_multiplies_as_its_dequantised_weights() {
        let (rows, cols) = (37, 512);
        for (i, ty) in TYPES.into_iter().enumerate() {
            // Two parts of one type stacked, as the fused Q/K/V projection is.
            let parts = vec![
                random_rows(ty, rows, cols, i as u64),
                random_rows(ty, 5, cols, 99),
            ];
            let m = QuantMatrix::stack(parts).unwrap();
            let w = m.dequantize(); // [42][512], the reference weights
            let mut rng = crate::generate::SplitMix64::new(7);
            for t in [1, 3, FUSED_MAX_ROWS, FUSED_MAX_ROWS + 5] {
                let x: Vec<f32> = (0..t * cols)
                    .map(|_| (rng.next_f64() - 0.5) as f32)
                    .collect();
                let y = m.matmul(&x, t);
                for (k, got) in y.iter().enumerate() {
                    let (i, r) = (k / m.rows(), k % m.rows());
                    let (want, scale) = exact_product(&w, &x, cols, r, i);
                    assert!(
                        (*got as f64 - want).abs() <= 1e-5 * scale.max(1e-3),
                        "{ty:?} t={t} [{i},{r}]: {got} vs {want}"
                    );
                }
            }
        }
    }

    /// A product over several activation rows (up to the fused rows) gives each row the bits it
    /// gets alone, for every type: what lets decode steps of several sequences share one
    /// product ([`crate::model::Model::forward_many`]).
    #[cfg(feature = "flex")]
    #[test]
    fn each_activation_row_gets_its_own_numbers_in_any_company() {
        let (rows, cols) = (21, 512);
        for (i, ty) in TYPES.into_iter().enumerate() {
            let m = QuantMatrix::stack(vec![random_rows(ty, rows, cols, 40 + i as u64)]).unwrap();
            let mut rng = crate::generate::SplitMix64::new(11);
            let x: Vec<f32> = (0..FUSED_MAX_ROWS * cols)
                .map(|_| (rng.next_f64() - 0.5) as f32)
                .collect();
            let alone: Vec<Vec<f32>> = x.chunks_exact(cols).map(|r| m.matmul(r, 1)).collect();
            for t in 1..=FUSED_MAX_ROWS {
                let y = m.matmul(&x[..t * cols], t);
                for (k, (got, want)) in y.chunks_exact(rows).zip(&alone).enumerate() {
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{ty:?}: row {k} of {t} differs from the row alone");
                }
            }
        }
    }
}
