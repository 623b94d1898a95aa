//! Software prefetch for the loops that stream memory once per decode step (a weight row's
//! blocks, a head's cached keys and values): each asks for the bytes [`AHEAD`] past the ones in
//! hand to be on their way into the cache.
//!
//! **Why.** A decode step reads every weight and every cached key and value once; the CPU's own
//! prefetchers alone left the loads waiting on memory. Measured on the 2-core Intel Xeon (family
//! 6 model 207; docs/speed.md, "Decode prefetch"): the Llama-3.2-3B-shaped Q4_K_M decode at 1K
//! context ran 5.11 tokens/s without, 6.02 / 6.65 / 7.33 / 7.35 at 512 / 1024 / 2048 / 4096
//! bytes ahead; 4 KiB sits on the plateau. A prefetch reads nothing the program sees and never
//! faults, so one past the end of a buffer costs a wasted line and nothing else.

/// Bytes ahead of the data in hand that the loops ask for.
pub(crate) const AHEAD: usize = 4096;

/// Asks for the cache lines of `[p + AHEAD, p + AHEAD + len)` (one line at least): for a block
/// of at most 64 bytes that is one line, its successors covering the lines between.
#[inline(always)]
pub(crate) fn ahead<T>(p: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (p as *const i8).wrapping_add(AHEAD);
        for line in 0..len.div_ceil(64).max(1) {
            // SAFETY: a prefetch is a hint: it reads nothing and never faults, whatever the
            // address.
            unsafe { _mm_prefetch(p.wrapping_add(64 * line), _MM_HINT_T0) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}
