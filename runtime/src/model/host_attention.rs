//! Fused causal attention on the host, for CPU backends (`flex`): the same maths as the generic
//! burn path in [`super::attention`], without its broadcast passes.
//!
//! Per (query head, block of [`ROWS`] query rows): `S = Q_b·K[..cols]ᵀ` with one gemm, a single
//! fused pass for the causal mask and the softmax of each row, then `O_b = P·V[..cols]` with one
//! gemm. `cols = past + end of block`, so keys no row of the block can see are never touched
//! (the upper causal triangle is skipped) and at most `ROWS × n` scores exist per task. Tasks run
//! in parallel with rayon; each gemm is single-threaded. Requested rows of `P` (observation) and
//! column sums (H2O) are read off `P` while it is in cache.

use gemm::{gemm, Parallelism};
use rayon::prelude::*;

/// Query rows per task.
pub const ROWS: usize = 64;

/// Shapes of one call: `q` is `[kv, group, t, d]`, `k` and `v` are `[kv, l, d]`; the last `t`
/// keys are the new tokens.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    pub kv: usize,
    pub group: usize,
    pub t: usize,
    pub l: usize,
    pub d: usize,
}

/// Output of one call.
#[derive(Debug, Default)]
pub struct HostOutput {
    /// `[kv, group, t, d]`.
    pub out: Vec<f32>,
    /// `[head][row][l]` for the last `obs_rows` rows, when requested.
    pub rows: Vec<Vec<Vec<f32>>>,
    /// `[head][l]`, when requested.
    pub column_sums: Vec<Vec<f32>>,
}

struct Task {
    head: usize,
    start: usize,
    end: usize,
}

struct TaskOut {
    out: Vec<f32>,
    rows: Vec<Vec<f32>>,
    colsum: Vec<f32>,
}

/// Causal attention of pre-scaled queries. `obs_rows`: how many of the last rows to return;
/// `colsum`: whether to return column sums over all rows.
pub fn attend(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: Dims,
    obs_rows: usize,
    colsum: bool,
) -> HostOutput {
    let Dims { kv, group, t, l, d } = dims;
    assert_eq!(q.len(), kv * group * t * d, "host attention: q size");
    assert_eq!(k.len(), kv * l * d, "host attention: k size");
    assert_eq!(v.len(), kv * l * d, "host attention: v size");
    assert!(l >= t, "host attention: fewer keys than new tokens");
    let heads = kv * group;
    let tasks: Vec<Task> = (0..heads)
        .flat_map(|head| {
            (0..t).step_by(ROWS).map(move |start| Task {
                head,
                start,
                end: (start + ROWS).min(t),
            })
        })
        .collect();
    let obs_from = t.saturating_sub(obs_rows);
    let results: Vec<TaskOut> = tasks
        .par_iter()
        .map(|task| run_task(task, q, k, v, dims, obs_from, colsum))
        .collect();
    let mut output = HostOutput {
        out: vec![0.0; q.len()],
        rows: vec![Vec::new(); if obs_rows > 0 { heads } else { 0 }],
        column_sums: vec![Vec::new(); if colsum { heads } else { 0 }],
    };
    for (task, res) in tasks.iter().zip(results) {
        let at = (task.head * t + task.start) * d;
        output.out[at..at + res.out.len()].copy_from_slice(&res.out);
        if obs_rows > 0 {
            output.rows[task.head].extend(res.rows);
        }
        if colsum {
            let acc = &mut output.column_sums[task.head];
            if acc.is_empty() {
                acc.resize(l, 0.0);
            }
            for (a, c) in acc.iter_mut().zip(&res.colsum) {
                *a += c;
            }
        }
    }
    output
}

fn run_task(
    task: &Task,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: Dims,
    obs_from: usize,
    colsum: bool,
) -> TaskOut {
    let Dims { group, t, l, d, .. } = dims;
    let kvh = task.head / group;
    let past = l - t;
    let m = task.end - task.start;
    let cols = past + task.end;
    let q_blk = &q[(task.head * t + task.start) * d..(task.head * t + task.end) * d];
    let k_h = &k[kvh * l * d..(kvh * l + cols) * d];
    let v_h = &v[kvh * l * d..(kvh * l + cols) * d];
    let mut s = vec![0f32; m * cols];
    // S[m × cols] = Q_b[m × d] · K[cols × d]ᵀ. Safety: every pointer comes from a slice whose
    // length was checked above to cover the strided extent gemm reads or writes.
    unsafe {
        gemm(
            m,
            cols,
            d,
            s.as_mut_ptr(),
            1,
            cols as isize,
            false,
            q_blk.as_ptr(),
            1,
            d as isize,
            k_h.as_ptr(),
            d as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
    let mut rows = Vec::new();
    let mut sums = if colsum { vec![0f32; l] } else { Vec::new() };
    for (i, row) in s.chunks_exact_mut(cols).enumerate() {
        let visible = past + task.start + i + 1;
        softmax_in_place(&mut row[..visible]);
        row[visible..].fill(0.0);
        if task.start + i >= obs_from {
            let mut r = row.to_vec();
            r.resize(l, 0.0);
            rows.push(r);
        }
        if colsum {
            for (a, p) in sums.iter_mut().zip(row.iter()) {
                *a += p;
            }
        }
    }
    let mut out = vec![0f32; m * d];
    // O[m × d] = P[m × cols] · V[cols × d].
    unsafe {
        gemm(
            m,
            d,
            cols,
            out.as_mut_ptr(),
            1,
            d as isize,
            false,
            s.as_ptr(),
            1,
            cols as isize,
            v_h.as_ptr(),
            1,
            d as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        );
    }
    TaskOut {
        out,
        rows,
        colsum: sums,
    }
}

/// Numerically stable softmax of one row, in place.
fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_of_known_row() {
        let mut x = [0.0, 2f32.ln(), 0.0];
        softmax_in_place(&mut x);
        assert!((x[0] - 0.25).abs() < 1e-6 && (x[1] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn one_head_by_hand() {
        // d = 1, three tokens, q = k = 1 for all, v = [1, 2, 3]: scores equal, so row i
        // averages v[..=i]: 1, 1.5, 2.
        let dims = Dims {
            kv: 1,
            group: 1,
            t: 3,
            l: 3,
            d: 1,
        };
        let out = attend(&[1.0; 3], &[1.0; 3], &[1.0, 2.0, 3.0], dims, 2, true);
        assert_eq!(out.out, vec![1.0, 1.5, 2.0]);
        assert_eq!(
            out.rows[0],
            vec![vec![0.5, 0.5, 0.0], vec![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]]
        );
        let cs = &out.column_sums[0];
        assert!((cs[0] - (1.0 + 0.5 + 1.0 / 3.0)).abs() < 1e-6 && (cs[2] - 1.0 / 3.0).abs() < 1e-6);
    }
}
