//! Haar multi-level wavelet analysis of the a∘V signal (TreeKV §3.2–3.3).
//!
//! The signal at generation step t is s = a(t)ᵀ ∘ V(t): row i is a(t)(i) · v(i), one row per
//! position, head_dim columns. Decomposition runs along positions, every column alike:
//! A[k] = (s[2k] + s[2k+1]) / √2 and D[k] = (s[2k] − s[2k+1]) / √2 (the paper's filters g, h with
//! 1-based positions 2k−1, 2k), repeated on A for each level. The paper's reconstruction
//! R(A, D) gives s[2k] = (A[k] + D[k]) / √2 and s[2k+1] = (A[k] − D[k]) / √2, and
//! Rec(D_l) = R(⋯R(R(0, D_l), 0)⋯, 0) brings level l's detail back to full length alone. Its
//! "magnitude" at a position is the L2 norm of that row over head_dim. Level 1 is the finest.

use std::f64::consts::FRAC_1_SQRT_2;

/// Rows of equal width (positions × head_dim).
pub type Signal = Vec<Vec<f64>>;

/// `((x + y) / √2, (x − y) / √2)`, row by row: the Haar pair both ways (decomposition takes
/// two positions to A and D, reconstruction A and D back to two positions).
fn butterfly(x: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let sum = x.iter().zip(y).map(|(p, q)| (p + q) * FRAC_1_SQRT_2);
    let difference = x.iter().zip(y).map(|(p, q)| (p - q) * FRAC_1_SQRT_2);
    (sum.collect(), difference.collect())
}

/// One Haar level: (approximation, detail), each half as long. `s` must have even length.
pub fn haar_step(s: &[Vec<f64>]) -> (Signal, Signal) {
    s.chunks_exact(2)
        .map(|pair| butterfly(&pair[0], &pair[1]))
        .unzip()
}

/// The paper's single-level reconstruction R(A, D), twice as long.
pub fn haar_reconstruct(a: &[Vec<f64>], d: &[Vec<f64>]) -> Signal {
    let mut s = Vec::with_capacity(2 * a.len());
    for (x, y) in a.iter().zip(d) {
        let (even, odd) = butterfly(x, y);
        s.push(even);
        s.push(odd);
    }
    s
}

/// `levels`-level decomposition: `(A_L, [D_1, …, D_L])`. The length must be a multiple of
/// 2^levels (see [`truncate_to_levels`]).
pub fn decompose(s: &[Vec<f64>], levels: usize) -> (Signal, Vec<Signal>) {
    let mut approx: Signal = s.to_vec();
    let mut details = Vec::with_capacity(levels);
    for _ in 0..levels {
        let (a, d) = haar_step(&approx);
        details.push(d);
        approx = a;
    }
    (approx, details)
}

fn zeros_like(s: &[Vec<f64>]) -> Signal {
    s.iter().map(|r| vec![0.0; r.len()]).collect()
}

/// Rec(D_l) = R(⋯R(R(0, D_l), 0)⋯, 0): the detail of level `level` (1-based) alone, brought
/// back to the signal's length.
pub fn reconstruct_detail(detail: &[Vec<f64>], level: usize) -> Signal {
    let mut s = haar_reconstruct(&zeros_like(detail), detail);
    for _ in 1..level {
        let z = zeros_like(&s);
        s = haar_reconstruct(&s, &z);
    }
    s
}

/// Rec(A_L): the approximation alone at full length.
pub fn reconstruct_approx(approx: &[Vec<f64>], levels: usize) -> Signal {
    let mut s: Signal = approx.to_vec();
    for _ in 0..levels {
        let z = zeros_like(&s);
        s = haar_reconstruct(&s, &z);
    }
    s
}

/// The last positions of `s` whose count is a multiple of 2^levels (the oldest positions are
/// dropped — they fall inside the excluded first tokens anyway); returns how many were dropped.
pub fn truncate_to_levels(s: &[Vec<f64>], levels: usize) -> (&[Vec<f64>], usize) {
    let unit = 1usize << levels;
    let keep = s.len() / unit * unit;
    let dropped = s.len() - keep;
    (&s[dropped..], dropped)
}

/// L2 norm over head_dim of each row.
pub fn row_norms(s: &[Vec<f64>]) -> Vec<f64> {
    s.iter()
        .map(|r| r.iter().map(|x| x * x).sum::<f64>().sqrt())
        .collect()
}

/// Per level (finest first), the magnitude of Rec(D_l) at every position.
pub fn detail_magnitudes(s: &[Vec<f64>], levels: usize) -> Vec<Vec<f64>> {
    let (_, details) = decompose(s, levels);
    details
        .iter()
        .enumerate()
        .map(|(i, d)| row_norms(&reconstruct_detail(d, i + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(v: &[f64]) -> Signal {
        v.iter().map(|&x| vec![x]).collect()
    }

    fn flat(s: &Signal) -> Vec<f64> {
        s.iter().map(|r| r[0]).collect()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn known_coefficients_of_one_three_five_seven() {
        // s = (1, 3, 5, 7): D1 = ((1−3)/√2, (5−7)/√2) = (−√2, −√2); A1 = (4/√2, 12/√2) =
        // (2√2, 6√2); D2 = (2√2 − 6√2)/√2 = −4; A2 = 8√2/√2 = 8.
        let r2 = 2f64.sqrt();
        let (a, d) = decompose(&col(&[1.0, 3.0, 5.0, 7.0]), 2);
        assert!(close(&flat(&d[0]), &[-r2, -r2]));
        assert!(close(&flat(&d[1]), &[-4.0]));
        assert!(close(&flat(&a), &[8.0]));
        // Rec(D1) = (−1, 1, −1, 1); Rec(D2) = (−2, −2, 2, 2); Rec(A2) = (4, 4, 4, 4).
        assert!(close(
            &flat(&reconstruct_detail(&d[0], 1)),
            &[-1.0, 1.0, -1.0, 1.0]
        ));
        assert!(close(
            &flat(&reconstruct_detail(&d[1], 2)),
            &[-2.0, -2.0, 2.0, 2.0]
        ));
        assert!(close(&flat(&reconstruct_approx(&a, 2)), &[4.0; 4]));
    }

    #[test]
    fn perfect_reconstruction_from_all_levels() {
        // Rec(A_L) + Σ_l Rec(D_l) = s, column by column (two columns here).
        let s: Signal = (0..16)
            .map(|i| vec![(i * i % 7) as f64 - 2.5, (i as f64).sin()])
            .collect();
        let (a, d) = decompose(&s, 3);
        let mut sum = reconstruct_approx(&a, 3);
        for (l, dl) in d.iter().enumerate() {
            for (row, add) in sum.iter_mut().zip(reconstruct_detail(dl, l + 1)) {
                for (x, y) in row.iter_mut().zip(add) {
                    *x += y;
                }
            }
        }
        for (x, y) in sum.iter().flatten().zip(s.iter().flatten()) {
            assert!((x - y).abs() < 1e-12);
        }
    }

    #[test]
    fn step_function_lives_in_the_level_of_its_edge() {
        // (0,0,0,0,1,1,1,1): pairs and quads are flat, so D1 = D2 = 0; D3 = (0 − 2)/√2 = −√2,
        // Rec(D3) = (−½ ×4, ½ ×4), magnitudes ½ everywhere at level 3.
        let s = col(&[0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0]);
        let m = detail_magnitudes(&s, 3);
        assert!(m[0].iter().all(|&x| x.abs() < 1e-12));
        assert!(m[1].iter().all(|&x| x.abs() < 1e-12));
        assert!(close(&m[2], &[0.5; 8]));
        // An edge inside a pair (0,0,0,1,1,1,1,1) shows at level 1 at that pair only:
        // D1[1] = (0 − 1)/√2, Rec(D1) = (0, 0, −½, ½, 0, 0, 0, 0).
        let s = col(&[0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        let m = detail_magnitudes(&s, 3);
        assert!(close(&m[0], &[0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0]));
    }

    #[test]
    fn magnitude_is_the_norm_over_head_dim_and_truncation_keeps_the_newest() {
        assert!(close(&row_norms(&[vec![3.0, 4.0]]), &[5.0]));
        let s = col(&[9.0, 1.0, 2.0, 3.0, 4.0]);
        let (kept, dropped) = truncate_to_levels(&s, 2);
        assert_eq!(dropped, 1);
        assert!(close(&flat(&kept.to_vec()), &[1.0, 2.0, 3.0, 4.0]));
    }
}
