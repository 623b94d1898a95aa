//! The two products of a task with few stacked query rows (a decode step: the query heads of one
//! KV head, one row each), reading each key and each value once for all the rows, in storage
//! order, instead of `gemm`, which would pack the keys first. Compiled for AVX-512F and for AVX2 +
//! FMA and chosen at run time (the same sums, in lanes of 16), the portable build otherwise.

multiversioned! {
    /// `s[i][j] = q[i]·k[j]` for the rows of `q` (`[m][d]`) and `s` (`[m][cols]`), `k` `[cols][d]`.
    pub(crate) fn scores(s: &mut [f32], q: &[f32], k: &[f32], d: usize) = scores_body;
}

multiversioned! {
    /// `out[i] += Σ_j p[i][j]·v[j]` for the rows of `p` (`[m][cols]`) and `out` (`[m][d]`), `v`
    /// `[cols][d]`.
    pub(crate) fn weighted_values(out: &mut [f32], p: &[f32], v: &[f32], d: usize) =
        weighted_values_body;
}

#[inline(always)]
fn scores_body(s: &mut [f32], q: &[f32], k: &[f32], d: usize) {
    let cols = k.len() / d;
    for (j, key) in k.chunks_exact(d).enumerate() {
        crate::model::prefetch::ahead(key.as_ptr(), 4 * d);
        for (i, q) in q.chunks_exact(d).enumerate() {
            s[i * cols + j] = dot(q, key);
        }
    }
}

#[inline(always)]
fn weighted_values_body(out: &mut [f32], p: &[f32], v: &[f32], d: usize) {
    let cols = v.len() / d;
    for (j, value) in v.chunks_exact(d).enumerate() {
        crate::model::prefetch::ahead(value.as_ptr(), 4 * d);
        for (i, o) in out.chunks_exact_mut(d).enumerate() {
            let w = p[i * cols + j];
            if w != 0.0 {
                for (a, &x) in o.iter_mut().zip(value) {
                    *a = w.mul_add(x, *a);
                }
            }
        }
    }
}

/// `a·b` in 16 lanes, then the lanes summed.
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0f32; LANES];
    let (ac, bc) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..LANES {
            lanes[l] = x[l].mul_add(y[l], lanes[l]);
        }
    }
    lanes.iter().sum::<f32>() + tail
}
