//! The fused causal attention kernel: tasks, and what one task computes.
//!
//! A task is (cache head `g`, some of its query heads, a block of query rows). The task's query
//! heads are stacked into one `[heads·rows, d]` operand (the rows of head 0, then head 1, …), so
//! the keys and values of `g` are read — and packed by `gemm` — once for all of them. Per task:
//! `S = Q·K[lo..hi]ᵀ` with one gemm, one pass per row for the causal (and window) mask and the
//! softmax ([`super::super::softmax`]), then `O = P·V[lo..hi]` with one gemm. `hi = past + end of
//! block`, so the upper causal triangle beyond the block is never touched; `lo` is the first slot
//! any row of the block sees under a sliding window (0 without one), so keys left of every row's
//! window are never touched either. At most [`STACKED_ROWS`] `× (hi − lo)` scores exist per task,
//! in a scratch buffer each thread reuses without clearing (every entry a task reads it has
//! written first). Requested rows of `P` (observation, padded to all keys with zeros) and column
//! sums are read off `P` while it is in cache. Tasks run in parallel with rayon; each gemm is
//! single-threaded. With few stacked rows (a decode step) the products are
//! [`super::few_rows`]'s dot products and row updates, which read each key and value once.
//!
//! **One new row, few cache heads** (a decode step of a model with fewer cache heads than twice
//! the threads, nothing observed): rather than splitting a group's query heads across tasks,
//! which would read the cache head's keys and values once per part, the keys are split
//! ([`key_parts`]): each task takes all the group's rows over one range of keys and returns, per
//! row, its output before normalisation with the range's maximum score and sum of
//! exponentials ([`super::super::softmax::exp_in_place`]); the ranges are joined as
//! `Σᵢ e^(mᵢ−M)·oᵢ / Σᵢ e^(mᵢ−M)·zᵢ` (`M` the largest `mᵢ`) — the same softmax, rounded
//! differently. Every key and value is then read once per step.
//!
//! **Long rows, nothing read off `P`** (a task spanning at least [`Blocking::from`] keys with no
//! observed row and no column sums: a long prefill that no press or profile observes): the keys
//! are taken in blocks of [`Blocking::block`], the flash-attention recurrence (Dao et al. 2022,
//! §3.1, "online softmax") — per block `S_b = Q·K_bᵀ`, each row's block maximum `m_b` and
//! `P_b = e^(S_b − m_b)` with sum `z_b`, then with `M = max(m, m_b)`: `O ← e^(m−M)·O +
//! e^(m_b−M)·P_b·V_b`, `z ← e^(m−M)·z + e^(m_b−M)·z_b`, `m ← M`, and `O / z` at the end. The
//! scores of a block stay in cache between their three passes (a whole 8K row block's would
//! not: 128 rows × 8,192 keys are 4 MiB); the result is the same softmax, rounded differently.
//! Tasks that give observation rows or column sums keep whole rows (the exact `P` they read).

use std::cell::RefCell;
use std::ops::Range;

use rayon::prelude::*;

use super::super::softmax::{exp_in_place, softmax_in_place};
use super::{few_rows, Dims, HostOutput};
use crate::model::gemm::{gemm_row_major, Gemm};

/// Keys per task, at least, when a decode step splits its keys ([`key_parts`]).
const MIN_KEYS_PER_PART: usize = 256;

/// Stacked query rows per task (query heads × rows per head) the row blocks are sized for.
const STACKED_ROWS: usize = 128;

/// Rows per head of a block, at least (a group wider than [`STACKED_ROWS`] / this still gets
/// blocks this tall).
const MIN_ROWS: usize = 16;

/// Stacked rows up to which the products are plain dot products and row updates
/// ([`few_rows`]) instead of `gemm`.
const FEW_ROWS: usize = 16;

/// When a task works in key blocks (module header): from `from` keys on, `block` keys at a time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Blocking {
    pub(super) from: usize,
    pub(super) block: usize,
}

impl Blocking {
    /// From 2,048 keys on, 512 at a time (`kvplan bench --prefill 2048,4096,8192`, docs/speed.md).
    pub(super) const DEFAULT: Blocking = Blocking {
        from: 2048,
        block: 512,
    };
}

/// One task: cache head `kv`, query heads `heads` of its group, query rows `start..end`.
struct Task {
    kv: usize,
    heads: Range<usize>,
    start: usize,
    end: usize,
}

/// A task's results, head by head of its `heads`.
struct TaskOut {
    /// `[heads][rows][d]`.
    out: Vec<f32>,
    /// `[heads][observed rows][keys]`.
    rows: Vec<Vec<Vec<f32>>>,
    /// `[heads][keys]`, when requested.
    colsum: Vec<Vec<f32>>,
}

thread_local! {
    /// Each thread's scratch: stacked queries, scores, outputs. Grown, never cleared.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The tasks of a call: blocks of rows sized so a task stacks about [`STACKED_ROWS`] rows, and
/// a group split into parts when there would otherwise be fewer than two tasks per thread
/// (a decode step of a model with one or two KV heads). For each head, its tasks come in
/// increasing row order (observed rows are appended in task order).
fn tasks(dims: Dims) -> Vec<Task> {
    let Dims {
        kv_heads: kv,
        group,
        t,
        ..
    } = dims;
    let rows = (STACKED_ROWS / group).max(MIN_ROWS);
    let blocks = t.div_ceil(rows);
    let want = 2 * rayon::current_num_threads().max(1);
    let parts = if kv * blocks >= want {
        1
    } else {
        group.min(want.div_ceil(kv * blocks))
    };
    let per_part = group.div_ceil(parts);
    let mut tasks = Vec::new();
    for g in 0..kv {
        for start in (0..t).step_by(rows) {
            for h in (0..group).step_by(per_part) {
                tasks.push(Task {
                    kv: g,
                    heads: h..(h + per_part).min(group),
                    start,
                    end: (start + rows).min(t),
                });
            }
        }
    }
    tasks
}

/// Causal attention of `q` `[kv][group][t][d]` over keys and values given per cache head
/// (`dims.keys` rows of `head_dim` each), long tasks in key blocks as `blocking` says (callers
/// pass [`Blocking::DEFAULT`]; tests use small blocks); see [`super::attend`].
pub(super) fn attend_heads(
    q: &[f32],
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
    blocking: Blocking,
) -> HostOutput {
    let Dims {
        kv_heads: kv,
        group,
        t,
        keys: l,
        head_dim: d,
        ..
    } = dims;
    assert_eq!(q.len(), kv * group * t * d, "host attention: q size");
    assert!(
        k.len() == kv && v.len() == kv && k.iter().chain(v).all(|x| x.len() == l * d),
        "host attention: k/v sizes"
    );
    assert!(l >= t, "host attention: fewer keys than new tokens");
    let heads = kv * group;
    let observing = !observe.is_empty();
    if let Some(ranges) = key_parts(dims, observing || colsum) {
        return attend_key_parts(q, k, v, dims, &ranges);
    }
    let tasks = tasks(dims);
    let results: Vec<TaskOut> = tasks
        .par_iter()
        .map(|task| run_task(task, q, k, v, dims, observe.clone(), colsum, blocking))
        .collect();
    let mut output = HostOutput {
        out: vec![0.0; q.len()],
        rows: vec![Vec::new(); if observing { heads } else { 0 }],
        column_sums: vec![Vec::new(); if colsum { heads } else { 0 }],
    };
    for (task, res) in tasks.iter().zip(results) {
        let m = task.end - task.start;
        for ((i, h), rows) in task.heads.clone().enumerate().zip(res.rows) {
            let head = task.kv * group + h;
            let at = (head * t + task.start) * d;
            output.out[at..at + m * d].copy_from_slice(&res.out[i * m * d..(i + 1) * m * d]);
            if observing {
                output.rows[head].extend(rows);
            }
            if colsum {
                let acc = &mut output.column_sums[head];
                if acc.is_empty() {
                    acc.resize(l, 0.0);
                }
                for (a, c) in acc.iter_mut().zip(&res.colsum[i]) {
                    *a += c;
                }
            }
        }
    }
    output
}

/// The ranges a decode step's keys are split into, the same for every cache head (module
/// header): `None` (no split) unless the step has one new row, nothing observed, a group
/// [`few_rows`] takes whole, and fewer cache heads than twice the threads; then enough ranges of
/// the keys the row sees (its window's, under a sliding window) for two tasks per thread, each of
/// at least [`MIN_KEYS_PER_PART`] keys.
fn key_parts(dims: Dims, observed: bool) -> Option<Vec<Range<usize>>> {
    let want = 2 * rayon::current_num_threads().max(1);
    if dims.t != 1 || observed || dims.group > FEW_ROWS || dims.kv_heads >= want {
        return None;
    }
    let l = dims.keys;
    let lo = dims.window.map_or(0, |w| l.saturating_sub(w));
    let parts = want
        .div_ceil(dims.kv_heads)
        .min((l - lo) / MIN_KEYS_PER_PART);
    if parts < 2 {
        return None;
    }
    let per = (l - lo).div_ceil(parts);
    Some((lo..l).step_by(per).map(|a| a..(a + per).min(l)).collect())
}

/// One key range's share of a decode step: per query head of the group, the output before
/// normalisation `[group][d]`, the range's maximum score and its sum of `e^(s − max)`.
struct Partial {
    out: Vec<f32>,
    max: Vec<f32>,
    sum: Vec<f32>,
}

/// A one-row step with its keys split into `ranges` for every cache head (module header).
fn attend_key_parts(
    q: &[f32],
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    ranges: &[Range<usize>],
) -> HostOutput {
    let Dims {
        kv_heads: kv,
        group,
        head_dim: d,
        ..
    } = dims;
    // Tasks cache head by cache head, each head's ranges in order.
    let partials: Vec<Partial> = (0..kv * ranges.len())
        .into_par_iter()
        .map(|task| {
            let (g, keys) = (task / ranges.len(), &ranges[task % ranges.len()]);
            // t = 1: the group's query rows are contiguous in `[kv][group][1][d]`.
            let qs = &q[g * group * d..(g + 1) * group * d];
            let n = keys.len();
            let mut s = vec![0f32; group * n];
            few_rows::scores(&mut s, qs, &k[g][keys.start * d..keys.end * d], d);
            let (max, sum) = s.chunks_exact_mut(n).map(exp_in_place).unzip();
            let mut out = vec![0f32; group * d];
            few_rows::weighted_values(&mut out, &s, &v[g][keys.start * d..keys.end * d], d);
            Partial { out, max, sum }
        })
        .collect();
    let mut out = vec![0f32; kv * group * d];
    for (g, mine) in partials.chunks_exact(ranges.len()).enumerate() {
        for h in 0..group {
            let top = mine
                .iter()
                .map(|p| p.max[h])
                .fold(f32::NEG_INFINITY, f32::max);
            let row = &mut out[(g * group + h) * d..(g * group + h + 1) * d];
            let mut denom = 0f32;
            for p in mine {
                let w = (p.max[h] - top).exp();
                denom += w * p.sum[h];
                for (o, x) in row.iter_mut().zip(&p.out[h * d..(h + 1) * d]) {
                    *o += w * x;
                }
            }
            let inv = 1.0 / denom;
            row.iter_mut().for_each(|o| *o *= inv);
        }
    }
    HostOutput {
        out,
        rows: Vec::new(),
        column_sums: Vec::new(),
    }
}

/// Scratch lengths `(queries, scores, outputs)` of a task of `m` stacked rows over `n` keys.
fn scratch_sizes(m: usize, n: usize, d: usize) -> (usize, usize, usize) {
    (m * d, m * n, m * d)
}

/// Runs `f` on this thread's scratch cut into queries, scores and outputs of the given lengths
/// (grown when short, never cleared).
fn with_scratch<R>(
    (qn, sn, on): (usize, usize, usize),
    f: impl FnOnce(&mut [f32], &mut [f32], &mut [f32]) -> R,
) -> R {
    SCRATCH.with_borrow_mut(|scratch| {
        if scratch.len() < qn + sn + on {
            scratch.resize(qn + sn + on, 0.0);
        }
        let (qs, rest) = scratch.split_at_mut(qn);
        let (s, rest) = rest.split_at_mut(sn);
        f(qs, s, &mut rest[..on])
    })
}

/// Where a task lies: its rows, its stacked rows and the slots `lo..hi` any of its rows sees.
#[derive(Clone, Copy)]
struct Span {
    /// Slots cached before the new tokens.
    past: usize,
    /// Rows per query head.
    m: usize,
    /// Rows of all its query heads stacked.
    stacked: usize,
    lo: usize,
    hi: usize,
}

impl Span {
    fn of(task: &Task, dims: Dims) -> Self {
        let past = dims.keys - dims.t;
        let m = task.end - task.start;
        Span {
            past,
            m,
            stacked: m * task.heads.len(),
            lo: dims
                .window
                .map_or(0, |w| (past + task.start + 1).saturating_sub(w)),
            hi: past + task.end,
        }
    }

    /// The slots `first..visible` stacked row `r` sees (causal, and its window's).
    fn row(&self, task: &Task, r: usize, window: Option<usize>) -> (usize, usize) {
        let visible = self.past + task.start + r % self.m + 1;
        (window.map_or(0, |w| visible.saturating_sub(w)), visible)
    }

    /// Copies the task's query rows into `qs`, head after head (`[heads][m][d]`).
    fn stack_queries(&self, qs: &mut [f32], task: &Task, q: &[f32], dims: Dims) {
        let (m, d) = (self.m, dims.head_dim);
        for (i, h) in task.heads.clone().enumerate() {
            let head = task.kv * dims.group + h;
            let src = &q[(head * dims.t + task.start) * d..(head * dims.t + task.end) * d];
            qs[i * m * d..(i + 1) * m * d].copy_from_slice(src);
        }
    }
}

/// `s ← tanh(s / c)·c` for a cap `c` (Gemma 2's attention soft-cap; transformers divides,
/// takes the tanh and multiplies, in f32, as here).
fn soft_cap(s: &mut [f32], cap: Option<f32>) {
    if let Some(c) = cap {
        s.iter_mut().for_each(|x| *x = (*x / c).tanh() * c);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_task(
    task: &Task,
    q: &[f32],
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
    blocking: Blocking,
) -> TaskOut {
    let d = dims.head_dim;
    let span = Span::of(task, dims);
    let Span {
        stacked, lo, hi, ..
    } = span;
    let n = hi - lo;
    let observed = observe.start < task.end && task.start < observe.end;
    if n >= blocking.from && stacked > FEW_ROWS && !observed && !colsum {
        return run_task_blocked(task, &span, q, k, v, dims, blocking.block);
    }
    let (k_h, v_h) = (&k[task.kv][lo * d..hi * d], &v[task.kv][lo * d..hi * d]);
    let (qn, sn, on) = scratch_sizes(stacked, n, d);
    with_scratch((qn, sn, on), |qs, s, o| {
        span.stack_queries(qs, task, q, dims);
        let few = stacked <= FEW_ROWS;
        if few {
            few_rows::scores(s, qs, k_h, d);
        } else {
            scores_gemm(s, qs, k_h, (stacked, n, d));
        }
        let (rows, colsum) = softmax_rows(s, task, &span, dims, &observe, colsum);
        if few {
            o.fill(0.0);
            few_rows::weighted_values(o, s, v_h, d);
        } else {
            values_gemm(o, s, v_h, (stacked, n, d));
        }
        TaskOut {
            out: o.to_vec(),
            rows,
            colsum,
        }
    })
}

/// `S[m × n] = Q[m × d] · K[n × d]ᵀ`, K read with column stride `d`.
fn scores_gemm(s: &mut [f32], q: &[f32], k: &[f32], (m, n, d): (usize, usize, usize)) {
    gemm_row_major(Gemm { m, n, k: d }, s, q, k, (d as isize, 1));
}

/// `O[m × d] = P[m × n] · V[n × d]`.
fn values_gemm(o: &mut [f32], p: &[f32], v: &[f32], (m, n, d): (usize, usize, usize)) {
    gemm_row_major(Gemm { m, n: d, k: n }, o, p, v, (1, d as isize));
}

/// Each stacked row of the scores `s` (the span's keys `lo..hi`) soft-capped and softmaxed over
/// the slots it sees, zero elsewhere; on the way, the rows `observe` asks for (`[heads][rows]
/// [keys]`, full width) and, with `colsum`, each head's column sums (`[heads][keys]`).
fn softmax_rows(
    s: &mut [f32],
    task: &Task,
    span: &Span,
    dims: Dims,
    observe: &Range<usize>,
    colsum: bool,
) -> (Vec<Vec<Vec<f32>>>, Vec<Vec<f32>>) {
    let (l, window, softcap) = (dims.keys, dims.window, dims.softcap);
    let Span { m, lo, hi, .. } = *span;
    let heads = task.heads.len();
    let mut rows = vec![Vec::new(); heads];
    let mut sums = vec![Vec::new(); if colsum { heads } else { 0 }];
    for (r, row) in s.chunks_exact_mut(hi - lo).enumerate() {
        let (head, i) = (r / m, r % m);
        let (first, visible) = span.row(task, r, window);
        let (a, b) = (first - lo, visible - lo);
        soft_cap(&mut row[a..b], softcap);
        softmax_in_place(&mut row[a..b]);
        row[..a].fill(0.0);
        row[b..].fill(0.0);
        if observe.contains(&(task.start + i)) {
            let mut full = vec![0f32; l];
            full[lo..hi].copy_from_slice(row);
            rows[head].push(full);
        }
        if colsum {
            let acc = &mut sums[head];
            if acc.is_empty() {
                acc.resize(l, 0.0);
            }
            for (a, p) in acc[lo..hi].iter_mut().zip(row.iter()) {
                *a += p;
            }
        }
    }
    (rows, sums)
}

/// [`run_task`] over key blocks of `block` keys with a running softmax (module header); the task
/// gives neither observation rows nor column sums.
fn run_task_blocked(
    task: &Task,
    span: &Span,
    q: &[f32],
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    block: usize,
) -> TaskOut {
    let d = dims.head_dim;
    let Span {
        stacked, lo, hi, ..
    } = *span;
    let (qn, sn, on) = scratch_sizes(stacked, block.min(hi - lo), d);
    let mut out = vec![0f32; on];
    let mut online = OnlineSoftmax::new(stacked);
    with_scratch((qn, sn, on), |qs, s, o_b| {
        span.stack_queries(qs, task, q, dims);
        for b0 in (lo..hi).step_by(block) {
            let b1 = (b0 + block).min(hi);
            let nb = b1 - b0;
            let s = &mut s[..stacked * nb];
            let (k_b, v_b) = (&k[task.kv][b0 * d..b1 * d], &v[task.kv][b0 * d..b1 * d]);
            scores_gemm(s, qs, k_b, (stacked, nb, d));
            online.block(s, (task, span), (b0, b1), dims);
            // O_b = P_b · V_b, then O ← f_old·O + f_new·O_b row by row.
            values_gemm(o_b, s, v_b, (stacked, nb, d));
            online.merge(&mut out, o_b, d);
        }
    });
    online.finish(&mut out, d);
    TaskOut {
        out,
        rows: vec![Vec::new(); task.heads.len()],
        colsum: Vec::new(),
    }
}

/// The running softmax of [`run_task_blocked`], one entry per stacked row: the largest score
/// so far, the sum of the exponentials against it, and the factors of the last block (the
/// running output's and the block's own).
struct OnlineSoftmax {
    max: Vec<f32>,
    sum: Vec<f32>,
    old_scale: Vec<f32>,
    new_scale: Vec<f32>,
}

impl OnlineSoftmax {
    fn new(stacked: usize) -> Self {
        Self {
            max: vec![f32::NEG_INFINITY; stacked],
            sum: vec![0f32; stacked],
            old_scale: vec![0f32; stacked],
            new_scale: vec![0f32; stacked],
        }
    }

    /// The scores `s` of keys `b0..b1` (one row of `b1 − b0` per stacked row) turned into
    /// exponentials against the block's maximum over the slots each row sees (zero elsewhere),
    /// and each row's running maximum, sum and factors updated.
    fn block(
        &mut self,
        s: &mut [f32],
        (task, span): (&Task, &Span),
        (b0, b1): (usize, usize),
        dims: Dims,
    ) {
        for (r, row) in s.chunks_exact_mut(b1 - b0).enumerate() {
            let (first, visible) = span.row(task, r, dims.window);
            let (a, b) = (first.max(b0), visible.min(b1));
            if a >= b {
                // No key of this block is in the row's range: nothing changes.
                row.fill(0.0);
                self.old_scale[r] = 1.0;
                self.new_scale[r] = 0.0;
                continue;
            }
            soft_cap(&mut row[a - b0..b - b0], dims.softcap);
            let (m_b, z_b) = exp_in_place(&mut row[a - b0..b - b0]);
            row[..a - b0].fill(0.0);
            row[b - b0..].fill(0.0);
            let top = self.max[r].max(m_b);
            // e^(−∞) is 0: the first block's running output and sum start from zero.
            let (f_old, f_new) = ((self.max[r] - top).exp(), (m_b - top).exp());
            self.sum[r] = self.sum[r] * f_old + z_b * f_new;
            self.max[r] = top;
            self.old_scale[r] = f_old;
            self.new_scale[r] = f_new;
        }
    }

    /// `out ← f_old·out + f_new·o_b`, row by row (`d` values a row).
    fn merge(&self, out: &mut [f32], o_b: &[f32], d: usize) {
        for (r, (o, ob)) in out.chunks_exact_mut(d).zip(o_b.chunks_exact(d)).enumerate() {
            let (f_old, f_new) = (self.old_scale[r], self.new_scale[r]);
            for (x, y) in o.iter_mut().zip(ob) {
                *x = *x * f_old + y * f_new;
            }
        }
    }

    /// Each row of `out` divided by its sum.
    fn finish(&self, out: &mut [f32], d: usize) {
        for (o, z) in out.chunks_exact_mut(d).zip(&self.sum) {
            let inv = 1.0 / z;
            o.iter_mut().for_each(|x| *x *= inv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (head, row) is in exactly one task; a head's tasks come in row order; a decode
    /// step of one cache head is split so both threads get work.
    #[test]
    fn soft_capped_scores_by_hand() {
        // d = 1, one query row (the last of three), q = 1, keys 0, 1, 3, values 1, 2, 3, cap 1:
        // scores tanh(0), tanh(1), tanh(3), then softmax and the weighted values.
        let dims = Dims {
            kv_heads: 1,
            group: 1,
            t: 1,
            keys: 3,
            head_dim: 1,
            window: None,
            softcap: Some(1.0),
        };
        let (k, v) = ([0f32, 1.0, 3.0], [1f32, 2.0, 3.0]);
        let out = attend_heads(&[1.0], &[&k], &[&v], dims, 0..0, false, Blocking::DEFAULT);
        let e: Vec<f64> = [0f64, 1.0, 3.0].iter().map(|s| s.tanh().exp()).collect();
        let want = (e[0] + 2.0 * e[1] + 3.0 * e[2]) / e.iter().sum::<f64>();
        assert!(
            (out.out[0] as f64 - want).abs() < 1e-6,
            "{} vs {want}",
            out.out[0]
        );
        let uncapped = attend_heads(
            &[1.0],
            &[&k],
            &[&v],
            Dims {
                softcap: None,
                ..dims
            },
            0..0,
            false,
            Blocking::DEFAULT,
        );
        assert!((uncapped.out[0] - out.out[0]).abs() > 0.1);
    }

    #[test]
    fn tasks_cover_each_head_row_once_in_order() {
        for (kv, group, t) in [(3, 3, 300), (2, 7, 1), (1, 4, 1), (2, 1, 129), (1, 4, 600)] {
            let dims = Dims {
                kv_heads: kv,
                group,
                t,
                keys: t,
                head_dim: 4,
                window: None,
                softcap: None,
            };
            let mut seen = vec![vec![0usize; t]; kv * group];
            let mut next = vec![0usize; kv * group];
            for task in tasks(dims) {
                for h in task.heads.clone() {
                    let head = task.kv * group + h;
                    assert_eq!(next[head], task.start, "{kv}×{group}, t={t}: out of order");
                    next[head] = task.end;
                    for c in &mut seen[head][task.start..task.end] {
                        *c += 1;
                    }
                }
            }
            assert!(
                seen.iter().flatten().all(|&c| c == 1),
                "{kv}×{group}, t={t}"
            );
        }
        let decode = Dims {
            kv_heads: 1,
            group: 4,
            t: 1,
            keys: 9,
            head_dim: 4,
            window: None,
            softcap: None,
        };
        assert!(rayon::current_num_threads() < 2 || tasks(decode).len() >= 2);
    }
}
