//! The `gemm` crate's single-threaded product, row-major, for the host kernels (attention, the
//! quantised projections' tiles, PoD's blocked attention, SpindleKV's codebook).

use gemm::{gemm, Parallelism};

/// Sizes of one product `dst[m × n] = lhs[m × k] · rhs[k × n]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gemm {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
}

/// `dst = lhs · rhs`, single-threaded: `dst` `[m][n]` and `lhs` `[m][k]` row-major; `rhs`
/// element (row `i < k`, column `j < n`) at `i·row_stride + j·col_stride`, `strides =
/// (col_stride, row_stride)` — a row-major `[k][n]` matrix has `(1, n)`, a row-major `[n][k]`
/// matrix read as its transpose `(k, 1)`.
pub(crate) fn gemm_row_major(
    g: Gemm,
    dst: &mut [f32],
    lhs: &[f32],
    rhs: &[f32],
    strides: (isize, isize),
) {
    let Gemm { m, n, .. } = g;
    assert!(
        dst.len() >= m * n,
        "host attention: gemm destination shorter than {m}×{n}"
    );
    // SAFETY: `dst` covers the m rows of n written, and the borrow keeps it ours.
    unsafe { gemm_into(g, dst.as_mut_ptr(), n, lhs, rhs, strides) }
}

/// [`gemm_row_major`] into rows `dst_row_stride` apart: `dst[i·dst_row_stride + j]` for `i < m`,
/// `j < n` (a band of columns of a wider row-major matrix).
///
/// # Safety
/// `dst` must be valid for writes at every such element, and no other thread may read or write
/// them during the call.
pub(crate) unsafe fn gemm_into(
    g: Gemm,
    dst: *mut f32,
    dst_row_stride: usize,
    lhs: &[f32],
    rhs: &[f32],
    strides: (isize, isize),
) {
    let Gemm { m, n, k } = g;
    let (rhs_cs, rhs_rs) = strides;
    let rhs_extent = (k.saturating_sub(1) as isize * rhs_rs + n.saturating_sub(1) as isize * rhs_cs)
        as usize
        + 1;
    assert!(
        lhs.len() >= m * k && (k * n == 0 || rhs.len() >= rhs_extent),
        "host attention: gemm operands shorter than {m}×{k}·{k}×{n}"
    );
    // SAFETY: the assertion above checks that lhs and rhs cover the strided extent gemm reads;
    // the caller vouches for dst.
    unsafe {
        gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_row_stride as isize,
            false,
            lhs.as_ptr(),
            1,
            k as isize,
            rhs.as_ptr(),
            rhs_cs,
            rhs_rs,
            0.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
}
