//! The row softmax of the host attention kernel ([`super::host_attention`]), vectorised: one
//! body written in 16 independent lanes, compiled for AVX-512F and for AVX2 + FMA and chosen at
//! run time (`is_x86_feature_detected!`), the portable build otherwise.
//!
//! **Why.** Written element by element, the exponential's float→int conversion (`n as i32`
//! saturates) and the running sum (a float sum is not reassociated) kept the loop scalar: a 2K
//! SmolLM2 prefill spent about a fifth of its time in it. Here the exponent comes from the bits
//! of the rounded float, and the sum is kept in 16 lanes added at the end, so the loop
//! vectorises. Every element's exponential is the same arithmetic in every build (no FMA
//! contraction: Rust does not contract `a·b + c`), so the builds differ only in the order of the
//! row sum.

/// Lanes of the running maximum and sum (one AVX-512 register of f32).
const LANES: usize = 16;

/// `1.5·2²³`: adding it rounds an f32 in `[−2²², 2²²]` to the nearest integer, which the sum's
/// low mantissa bits then hold (two's complement, offset by this constant's bits).
const ROUND: f32 = 12_582_912.0;

/// `eˣ` for `x ≤ 0` (what softmax needs after subtracting the row maximum), branch-free so the
/// loop vectorises: `eˣ = 2ⁿ·e^r` with `n = round(x·log₂e)`, `|r| ≤ ln2/2`, and `e^r` from its
/// Taylor polynomial to degree 6 (truncation error `0.347⁷/7! < 1.3·10⁻⁷`; with f32 rounding of
/// `x·log₂e` the result is within 10⁻⁶ relative plus 10⁻⁹ absolute). Arguments below −87 give 0
/// after clamping to `2⁻¹²⁶`-scale, far under f32 softmax resolution. `n` is read from the bits
/// of `y + ROUND` (an integer conversion that vectorises, unlike `as i32`).
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2: f32 = std::f32::consts::LN_2;
    let y = x * LOG2E;
    let y = if y > -126.0 { y } else { -126.0 };
    let rounded = y + ROUND;
    let n = rounded - ROUND;
    let r = (y - n) * LN2;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    // n ∈ [−126, 0]: the biased exponent n + 127 ∈ [1, 127].
    let n_bits = rounded.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(n_bits.wrapping_add(127) << 23);
    p * scale
}

multiversioned! {
    /// Numerically stable softmax of one row, in place; an empty row is left as it is.
    pub(crate) fn softmax_in_place(x: &mut [f32]) = softmax_body;
}

#[inline(always)]
fn softmax_body(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let (_, sum) = exp_body(x);
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

multiversioned! {
    /// `x ← e^(x − max)` in place, returning `(max, Σ e^(x − max))`: the softmax before its
    /// normalisation, for rows whose keys are split across tasks and joined after
    /// (`host_attention`'s decode). An empty row gives `(−∞, 0)`.
    pub(crate) fn exp_in_place(x: &mut [f32]) -> (f32, f32) = exp_body;
}

#[inline(always)]
fn exp_body(x: &mut [f32]) -> (f32, f32) {
    if x.is_empty() {
        return (f32::NEG_INFINITY, 0.0);
    }
    let max = max_body(x);
    let mut sums = [0f32; LANES];
    let mut chunks = x.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            let e = exp_nonpositive(c[l] - max);
            c[l] = e;
            sums[l] += e;
        }
    }
    let mut tail = 0f32;
    for v in chunks.into_remainder() {
        *v = exp_nonpositive(*v - max);
        tail += *v;
    }
    (max, sums.iter().sum::<f32>() + tail)
}

multiversioned! {
    /// `dst[i] ← e^(src[i] − max)` for `src[i] ≤ max`, each element the same arithmetic as
    /// [`exp_nonpositive`] in every build (so bit for bit what a scalar loop gives), vectorised:
    /// PoD's kernel writes a row's exponentials by position this way and sums them in its own
    /// order.
    pub(crate) fn exp_shifted_into(dst: &mut [f32], src: &[f32], max: f32) = exp_shifted_body;
}

#[inline(always)]
fn exp_shifted_body(dst: &mut [f32], src: &[f32], max: f32) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = exp_nonpositive(x - max);
    }
}

/// The largest element (−∞ for none; a maximum is exact in any order), in 16 lanes so the loop
/// vectorises where the build allows.
pub(crate) fn max_of(x: &[f32]) -> f32 {
    max_body(x)
}

/// [`max_of`], inlined into the callers compiled for a wider instruction set ([`exp_body`]).
#[inline(always)]
fn max_body(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            lanes[l] = if c[l] > lanes[l] { c[l] } else { lanes[l] };
        }
    }
    chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_exp_matches_std_exp() {
        let mut x = 0.0f32;
        while x > -100.0 {
            let (got, want) = (exp_nonpositive(x), x.exp());
            assert!(
                (got - want).abs() <= 1e-6 * want + 1e-9,
                "exp({x}) = {got}, want {want}"
            );
            x -= 0.01;
        }
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(-200.0) < 1e-37);
    }

    #[test]
    fn softmax_of_known_row() {
        let mut x = [0.0, 2f32.ln(), 0.0];
        softmax_in_place(&mut x);
        assert!((x[0] - 0.25).abs() < 1e-6 && (x[1] - 0.5).abs() < 1e-6);
    }

    /// A row longer than the lanes, with a tail: each entry `e^(x−max)/Σ`, from `f64` by hand.
    #[test]
    fn long_row_matches_the_f64_softmax() {
        let row: Vec<f32> = (0..53)
            .map(|i| ((i * 37) % 23) as f32 * 0.31 - 3.0)
            .collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        let mut got = row.clone();
        softmax_in_place(&mut got);
        for (g, &v) in got.iter().zip(&row) {
            let want = (v as f64 - max).exp() / z;
            assert!(
                (*g as f64 - want).abs() <= 2e-6 * want + 1e-9,
                "{g} vs {want}"
            );
        }
        let mut empty: [f32; 0] = [];
        softmax_in_place(&mut empty);
    }

    /// The vectorised shifted exponentials are the scalar ones bit for bit, and the lane
    /// maximum the maximum.
    #[test]
    fn shifted_exponentials_are_the_scalar_ones_bit_for_bit() {
        let src: Vec<f32> = (0..77)
            .map(|i| ((i * 53) % 41) as f32 * -0.37 + 1.5)
            .collect();
        let max = max_of(&src);
        assert_eq!(max, src.iter().copied().fold(f32::NEG_INFINITY, f32::max));
        assert_eq!(max_of(&[]), f32::NEG_INFINITY);
        let mut got = vec![0f32; src.len()];
        exp_shifted_into(&mut got, &src, max);
        for (g, &x) in got.iter().zip(&src) {
            assert_eq!(g.to_bits(), exp_nonpositive(x - max).to_bits(), "{x}");
        }
    }
}
