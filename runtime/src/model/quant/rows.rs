//! The running sums of [`super::dot_avx2`]'s and [`super::dot_avx512`]'s `dot_rows`: one weight
//! row against `R` activation rows, each row's scaled quant products in vector lanes and its
//! minima's `m·Σx` apart. The arithmetic is the kernels'; the lane width is a [`Lanes`] type
//! (8 lanes of AVX2, 16 of AVX-512), so both kernels keep their own operations in their own order
//! while sharing this bookkeeping.
//!
//! Everything here is `#[inline(always)]` and free of closures: it is inlined into the kernels'
//! `#[target_feature]` functions, where the intrinsics of the [`Lanes`] methods inline in turn.

/// A lane width: its vector type, a block of 32 quants and a sub-block of 16 as it holds them,
/// and the operations the sums take.
pub(super) trait Lanes {
    /// A vector of f32 lanes.
    type V: Copy;
    /// A block's 32 quants as f32.
    type Block: Copy;
    /// A `Q6_K` sub-block's 16 quants as f32.
    type Half: Copy;
    /// Every lane 0.
    ///
    /// # Safety
    /// The CPU must have the lane type's instructions.
    unsafe fn zero() -> Self::V;
    /// Every lane `x`.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn splat(x: f32) -> Self::V;
    /// `a·b + c`, lane by lane, fused.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `Σ q·x` over a block's 32 activations at `x`, in lanes.
    ///
    /// # Safety
    /// As [`Lanes::zero`]; `x` points at 32 readable f32.
    unsafe fn dot_block(q: Self::Block, x: *const f32) -> Self::V;
    /// `Σ q·x` over a sub-block's 16 activations at `x`, in lanes.
    ///
    /// # Safety
    /// As [`Lanes::zero`]; `x` points at 16 readable f32.
    unsafe fn dot_half(q: Self::Half, x: *const f32) -> Self::V;
    /// The sum of the lanes.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn sum(v: Self::V) -> f32;
}

/// `R` activation rows (`[R][cols]`, their block sums `[R][cols / 32]`) and each row's running
/// sums: lanes of scaled quant products, and the minima's `m·Σx`.
pub(super) struct Rows<'a, L: Lanes, const R: usize> {
    xs: &'a [f32],
    sums: &'a [f32],
    /// Columns of a row.
    pub(super) cols: usize,
    per_row: usize,
    acc: [L::V; R],
    mins: [f32; R],
}

impl<'a, L: Lanes, const R: usize> Rows<'a, L, R> {
    /// The `R` rows, their sums zero.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    #[inline(always)]
    pub(super) unsafe fn new(xs: &'a [f32], sums: &'a [f32]) -> Self {
        let cols = xs.len() / R;
        debug_assert!(xs.len() == R * cols);
        Self {
            xs,
            sums,
            cols,
            per_row: sums.len() / R,
            acc: [L::zero(); R],
            mins: [0f32; R],
        }
    }

    /// Activation row `i` from column `at`.
    ///
    /// # Safety
    /// `i < R` and `at` within the row.
    #[inline(always)]
    unsafe fn x(&self, i: usize, at: usize) -> *const f32 {
        self.xs.as_ptr().add(i * self.cols + at)
    }

    /// Each row: `acc += d·(q·x)` over the block of 32 at column `at`.
    ///
    /// # Safety
    /// As [`Lanes::zero`]; the block lies within the rows.
    #[inline(always)]
    pub(super) unsafe fn scaled(&mut self, d: f32, q: L::Block, at: usize) {
        let d = L::splat(d);
        for i in 0..R {
            self.acc[i] = L::fmadd(d, L::dot_block(q, self.x(i, at)), self.acc[i]);
        }
    }

    /// Each row: `acc += scale·(q·x)` over the 16 columns from `at` (a `Q6_K` sub-block).
    ///
    /// # Safety
    /// As [`Lanes::zero`]; the sub-block lies within the rows.
    #[inline(always)]
    pub(super) unsafe fn scaled16(&mut self, scale: f32, q: L::Half, at: usize) {
        let scale = L::splat(scale);
        for i in 0..R {
            self.acc[i] = L::fmadd(scale, L::dot_half(q, self.x(i, at)), self.acc[i]);
        }
    }

    /// Each row: `min += m·Σx` over its activation block `k`.
    #[inline(always)]
    pub(super) fn min(&mut self, m: f32, k: usize) {
        for i in 0..R {
            self.mins[i] = m.mul_add(self.sums[i * self.per_row + k], self.mins[i]);
        }
    }

    /// Each row's dot product: its lanes summed, plus its minima.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    #[inline(always)]
    pub(super) unsafe fn finish(self, out: &mut [f32]) {
        for ((o, a), m) in out.iter_mut().zip(self.acc).zip(self.mins) {
            *o = L::sum(a) + m;
        }
    }
}
