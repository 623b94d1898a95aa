//! The attention sub-layer on the host, for CPU backends (`flex`): the same maths as the generic
//! burn path in [`super::attention`], without its broadcast and strided passes.
//!
//! [`forward`] takes the fused QKV projection's output to the host once, applies RoPE (rotate-half,
//! HF order, the shared tables of [`super::rope::Rope`]) and the query scale in one loop, appends
//! the rotated keys and the values to the [`LayerCache`] on the host (in place, no copy of what it
//! holds), runs the fused kernel below over what the cache holds, and hands `[t, heads·d]` back to burn for the output projection.
//!
//! Per (query head, block of [`ROWS`] query rows): `S = Q_b·K[..cols]ᵀ` with one gemm, a single
//! fused pass for the causal mask and the softmax of each row, then `O_b = P·V[..cols]` with one
//! gemm. `cols = past + end of block`, so keys no row of the block can see are never touched
//! (the upper causal triangle is skipped) and at most `ROWS × n` scores exist per task. Tasks run
//! in parallel with rayon; each gemm is single-threaded. Requested rows of `P` (observation) and
//! column sums (H2O) are read off `P` while it is in cache.
//!
//! As in the generic path, the group comes from the layer cache: a cache unfolded to one head per
//! query head gets the new K/V repeated on append and is attended with group 1; query heads are
//! stacked by the geometry's query→KV map ([`super::query_order::QueryOrder`]).

use std::ops::Range;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use super::attention::{observed_to_head_order, Attention, ForwardCtx, ObservedSoFar};
use super::rope::rotate_half_scaled;
use crate::cache::{host_vec, LayerCache};
use crate::observe::{AttentionRows, ColumnSums, KeysValues, LayerObservation};

/// Query rows per task.
pub const ROWS: usize = 64;

/// Query rows per task up to which the products are plain dot products and row updates
/// ([`few_rows`]) instead of `gemm`, which packs the keys first: a decode step's single row
/// reads each key once.
const FEW_ROWS: usize = 4;

/// Shapes of one kernel call: queries `[kv_heads][group][t][head_dim]`, keys and values
/// `[kv_heads][keys][head_dim]`; the last `t` keys are the new tokens.
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    /// Cache heads attended (each a batch of `group` query heads).
    pub kv_heads: usize,
    /// Query heads per cache head.
    pub group: usize,
    /// New tokens (query rows per head).
    pub t: usize,
    /// Keys per cache head, the new tokens included.
    pub keys: usize,
    /// Dimensions of one head.
    pub head_dim: usize,
    /// Sliding window in slots (`None`: global): row `a` sees slots `a − window < j ≤ a`, slots
    /// being positions, as in the generic path.
    pub window: Option<usize>,
}

/// The new tokens' projections on the host, RoPE applied where it belongs.
struct Projected {
    /// `[kv][group][t][d]`, query heads in slot order ([`super::query_order::QueryOrder`]), rotated and scaled.
    q: Vec<f32>,
    /// `[kv][t][d]`, pre-RoPE keys (what an observer records).
    k_pre: Vec<f32>,
    /// `[kv][t][d]`, rotated keys (what the cache stores).
    k_rot: Vec<f32>,
    /// `[kv][t][d]`.
    v: Vec<f32>,
}

/// Splits the fused projection `qkv` (`[t][(nh + 2·nkv)·d]`, Q/K/V columns) by head, rotating
/// queries (with the query scale folded in) and keys at their positions.
fn project<B: Backend>(attn: &Attention<B>, qkv: &[f32], ctx: &ForwardCtx<'_, B>) -> Projected {
    let (nh, nkv, d) = (attn.n_heads, attn.n_kv_heads, attn.head_dim);
    let t = ctx.positions.len();
    let width = (nh + 2 * nkv) * d;
    let (cos, sin) = ctx.rope.host_tables(ctx.layer); // [position][d] each
    let scale = attn.query_scale as f32;
    let mut p = Projected {
        q: vec![0f32; nh * t * d],
        k_pre: vec![0f32; nkv * t * d],
        k_rot: vec![0f32; nkv * t * d],
        v: vec![0f32; nkv * t * d],
    };
    for (i, row) in qkv.chunks_exact(width).enumerate() {
        let at = ctx.positions[i] * d;
        let (c, s) = (&cos[at..at + d], &sin[at..at + d]);
        for h in 0..nh {
            let dst = (ctx.order.slot(h) * t + i) * d;
            let src = &row[h * d..(h + 1) * d];
            rotate_half_scaled(src, c, s, scale, &mut p.q[dst..dst + d]);
        }
        for h in 0..nkv {
            let at = (h * t + i) * d;
            let src = &row[(nh + h) * d..(nh + h + 1) * d];
            p.k_pre[at..at + d].copy_from_slice(src);
            rotate_half_scaled(src, c, s, 1.0, &mut p.k_rot[at..at + d]);
            let src = &row[(nh + nkv + h) * d..(nh + nkv + h + 1) * d];
            p.v[at..at + d].copy_from_slice(src);
        }
    }
    p
}

/// The attention sub-layer of [`Attention::forward`] on the host.
///
/// # Shapes
/// - x: `[t, hidden]` → `[t, hidden]`
pub fn forward<B: Backend>(
    attn: &Attention<B>,
    x: Tensor<B, 2>,
    ctx: &ForwardCtx<'_, B>,
    cache: &mut LayerCache<B>,
    obs: Option<&mut LayerObservation>,
) -> Tensor<B, 2> {
    let [t, _] = x.dims();
    let (nh, nkv, d) = (attn.n_heads, attn.n_kv_heads, attn.head_dim);
    let heads = super::attention::cache_heads(cache, nh, nkv);
    let device = x.device();
    let qkv = host_vec(attn.project(x)); // [t][(nh + 2·nkv)·d]
    let Projected { q, k_pre, k_rot, v } = project(attn, &qkv, ctx);
    let mut obs = obs;
    if let Some(o) = obs.as_deref_mut().filter(|_| ctx.obs_kv) {
        o.keys_values.push(KeysValues {
            positions: ctx.positions.to_vec(),
            keys: k_pre,
            values: v.clone(),
        });
    }
    // [heads][t][d]: the KV heads, or each repeated per query head in an unfolded cache.
    let (k_rot, v) = (
        repeat_heads(k_rot, heads / nkv, t * d),
        repeat_heads(v, heads / nkv, t * d),
    );
    cache.append_host(&k_rot, &v, ctx.positions, &device);
    let (observe, colsum) = match obs {
        Some(_) => (ctx.observed_rows(), ctx.obs_colsum),
        None => (0..0, false),
    };
    let shape = Dims {
        kv_heads: heads,
        group: nh / heads,
        t,
        keys: t,
        head_dim: d,
        // A global layer may run under a window recorded in its cache (`press::classes`).
        window: attn.window.or(cache.window()),
    };
    let res = attend_cache(&q, cache, shape, observe.clone(), colsum);
    if let Some(o) = obs {
        record(o, res.rows, res.column_sums, ctx, cache, observe);
    }
    // [slot][t][d] → [t][head·d]
    let mut merged = vec![0f32; t * nh * d];
    for h in 0..nh {
        let slot = ctx.order.slot(h);
        for i in 0..t {
            let src = (slot * t + i) * d;
            let dst = (i * nh + h) * d;
            merged[dst..dst + d].copy_from_slice(&res.out[src..src + d]);
        }
    }
    attn.wo.forward(Tensor::<B, 2>::from_data(
        TensorData::new(merged, [t, nh * d]),
        &device,
    ))
}

/// The kernel over what `cache` holds on the host: one call while every head holds the same
/// number of entries, one per cache head otherwise (outputs and observations concatenated in slot
/// order).
///
/// # Shapes
/// - q: `[kv][group][t][d]` → `out` of the same layout; `shape` gives the group, `t`, the head
///   dimension and the window (its head and key counts are the cache's)
fn attend_cache<B: Backend>(
    q: &[f32],
    cache: &LayerCache<B>,
    shape: Dims,
    observe: Range<usize>,
    colsum: bool,
) -> HostOutput {
    let Dims {
        group, t, head_dim, ..
    } = shape;
    let kv = cache
        .host()
        .expect("append_host leaves the layer on the host");
    let keys: Vec<&[f32]> = kv.keys.iter().map(Vec::as_slice).collect();
    let values: Vec<&[f32]> = kv.values.iter().map(Vec::as_slice).collect();
    let heads = cache.kv_heads();
    if (1..heads).all(|h| cache.len(h) == cache.len(0)) {
        let dims = Dims {
            kv_heads: heads,
            keys: cache.len(0),
            ..shape
        };
        return attend_heads(q, &keys, &values, dims, observe, colsum);
    }
    let mut all = HostOutput::default();
    let per_head = group * t * head_dim;
    for g in 0..heads {
        let qg = &q[g * per_head..(g + 1) * per_head];
        let dims = Dims {
            kv_heads: 1,
            keys: cache.len(g),
            ..shape
        };
        let mut r = attend_heads(
            qg,
            &keys[g..=g],
            &values[g..=g],
            dims,
            observe.clone(),
            colsum,
        );
        all.out.append(&mut r.out);
        all.rows.append(&mut r.rows);
        all.column_sums.append(&mut r.column_sums);
    }
    all
}

/// Records the kernel's observed rows and column sums (slot order) in query-head order.
fn record<B: Backend>(
    o: &mut LayerObservation,
    rows: Vec<Vec<Vec<f32>>>,
    column_sums: Vec<Vec<f32>>,
    ctx: &ForwardCtx<'_, B>,
    cache: &LayerCache<B>,
    observe: Range<usize>,
) {
    let heads = cache.kv_heads();
    let before = ObservedSoFar::of(o);
    if !observe.is_empty() {
        o.attention.push(AttentionRows {
            query_positions: ctx.positions[observe].to_vec(),
            probs: rows,
            key_positions: (0..heads).map(|h| cache.positions(h).to_vec()).collect(),
            kv_of: Vec::new(),
        });
    }
    if ctx.obs_colsum {
        o.column_sums.push(ColumnSums {
            sums: column_sums,
            kv_of: Vec::new(),
        });
    }
    observed_to_head_order(o, before, ctx.order, heads);
}

/// `[heads][block]` → `[heads·times][block]`, each head's block copied `times` times in a row.
fn repeat_heads(data: Vec<f32>, times: usize, block: usize) -> Vec<f32> {
    if times == 1 {
        return data;
    }
    let mut out = Vec::with_capacity(data.len() * times);
    for head in data.chunks_exact(block) {
        for _ in 0..times {
            out.extend_from_slice(head);
        }
    }
    out
}

/// Output of one call.
#[derive(Debug, Default)]
pub struct HostOutput {
    /// `[kv][group][t][d]`.
    pub out: Vec<f32>,
    /// `[kv·group][row][keys]` for the observed rows, when requested.
    pub rows: Vec<Vec<Vec<f32>>>,
    /// `[kv·group][keys]`, when requested.
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

/// Causal attention of pre-scaled queries. `observe`: the rows (indices among the `t` new
/// tokens) whose probabilities are returned; `colsum`: whether to return column sums over all
/// rows.
pub fn attend(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
) -> HostOutput {
    let Dims {
        kv_heads: kv,
        keys: l,
        head_dim: d,
        ..
    } = dims;
    assert_eq!(k.len(), kv * l * d, "host attention: k size");
    assert_eq!(v.len(), kv * l * d, "host attention: v size");
    let (keys, values): (Vec<&[f32]>, Vec<&[f32]>) = (0..kv)
        .map(|h| {
            (
                &k[h * l * d..(h + 1) * l * d],
                &v[h * l * d..(h + 1) * l * d],
            )
        })
        .unzip();
    attend_heads(q, &keys, &values, dims, observe, colsum)
}

/// [`attend`] over keys and values given per cache head (`dims.keys` rows of `head_dim` each).
fn attend_heads(
    q: &[f32],
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
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
    let tasks: Vec<Task> = (0..heads)
        .flat_map(|head| {
            (0..t).step_by(ROWS).map(move |start| Task {
                head,
                start,
                end: (start + ROWS).min(t),
            })
        })
        .collect();
    let observing = !observe.is_empty();
    let results: Vec<TaskOut> = tasks
        .par_iter()
        .map(|task| run_task(task, q, k, v, dims, observe.clone(), colsum))
        .collect();
    let mut output = HostOutput {
        out: vec![0.0; q.len()],
        rows: vec![Vec::new(); if observing { heads } else { 0 }],
        column_sums: vec![Vec::new(); if colsum { heads } else { 0 }],
    };
    for (task, res) in tasks.iter().zip(results) {
        let at = (task.head * t + task.start) * d;
        output.out[at..at + res.out.len()].copy_from_slice(&res.out);
        if observing {
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
    k: &[&[f32]],
    v: &[&[f32]],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
) -> TaskOut {
    let Dims {
        group,
        t,
        keys: l,
        head_dim: d,
        window,
        ..
    } = dims;
    let kvh = task.head / group;
    let past = l - t;
    let m = task.end - task.start;
    let cols = past + task.end;
    let q_blk = &q[(task.head * t + task.start) * d..(task.head * t + task.end) * d];
    let k_h = &k[kvh][..cols * d];
    let v_h = &v[kvh][..cols * d];
    let mut s = vec![0f32; m * cols];
    let few = m <= FEW_ROWS;
    if few {
        few_rows::scores(&mut s, q_blk, k_h, d);
    } else {
        // S[m × cols] = Q_b[m × d] · K[cols × d]ᵀ: K read with column stride d, row stride 1.
        gemm_row_major(
            Gemm { m, n: cols, k: d },
            &mut s,
            q_blk,
            k_h,
            (d as isize, 1),
        );
    }
    let mut rows = Vec::new();
    let mut sums = if colsum { vec![0f32; l] } else { Vec::new() };
    for (i, row) in s.chunks_exact_mut(cols).enumerate() {
        let visible = past + task.start + i + 1;
        let first = window.map_or(0, |w| visible.saturating_sub(w));
        softmax_in_place(&mut row[first..visible]);
        row[..first].fill(0.0);
        row[visible..].fill(0.0);
        if observe.contains(&(task.start + i)) {
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
    if few {
        few_rows::weighted_values(&mut out, &s, v_h, d);
    } else {
        // O[m × d] = P[m × cols] · V[cols × d].
        gemm_row_major(
            Gemm { m, n: d, k: cols },
            &mut out,
            &s,
            v_h,
            (1, d as isize),
        );
    }
    TaskOut {
        out,
        rows,
        colsum: sums,
    }
}

/// The two products of a task with few query rows (decode), reading keys and values once each,
/// in storage order. AVX2 and FMA where the CPU has them (the same sums, in lanes of 8).
mod few_rows {
    /// `s[i][j] = q[i]·k[j]` for the rows of `q` (`[m][d]`) and `s` (`[m][cols]`), `k` `[cols][d]`.
    pub(super) fn scores(s: &mut [f32], q: &[f32], k: &[f32], d: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // Safety: the CPU has the features the function is compiled for.
            return unsafe { scores_avx2(s, q, k, d) };
        }
        scores_body(s, q, k, d)
    }

    /// `out[i] = Σ_j p[i][j]·v[j]` for the rows of `p` (`[m][cols]`) and `out` (`[m][d]`), `v`
    /// `[cols][d]`.
    pub(super) fn weighted_values(out: &mut [f32], p: &[f32], v: &[f32], d: usize) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // Safety: the CPU has the features the function is compiled for.
            return unsafe { weighted_values_avx2(out, p, v, d) };
        }
        weighted_values_body(out, p, v, d)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn scores_avx2(s: &mut [f32], q: &[f32], k: &[f32], d: usize) {
        scores_body(s, q, k, d)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn weighted_values_avx2(out: &mut [f32], p: &[f32], v: &[f32], d: usize) {
        weighted_values_body(out, p, v, d)
    }

    #[inline(always)]
    fn scores_body(s: &mut [f32], q: &[f32], k: &[f32], d: usize) {
        let cols = k.len() / d;
        for (row, q) in s.chunks_exact_mut(cols).zip(q.chunks_exact(d)) {
            for (dst, key) in row.iter_mut().zip(k.chunks_exact(d)) {
                *dst = dot(q, key);
            }
        }
    }

    #[inline(always)]
    fn weighted_values_body(out: &mut [f32], p: &[f32], v: &[f32], d: usize) {
        let cols = v.len() / d;
        for (o, p) in out.chunks_exact_mut(d).zip(p.chunks_exact(cols)) {
            for (&w, value) in p.iter().zip(v.chunks_exact(d)) {
                if w != 0.0 {
                    for (a, &x) in o.iter_mut().zip(value) {
                        *a = w.mul_add(x, *a);
                    }
                }
            }
        }
    }

    /// `a·b` in 8 lanes, then the lanes summed.
    #[inline(always)]
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut lanes = [0f32; 8];
        let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
        let tail: f32 = ac
            .remainder()
            .iter()
            .zip(bc.remainder())
            .map(|(x, y)| x * y)
            .sum();
        for (x, y) in ac.zip(bc) {
            for l in 0..8 {
                lanes[l] = x[l].mul_add(y[l], lanes[l]);
            }
        }
        lanes.iter().sum::<f32>() + tail
    }
}

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
    // Safety: `dst` covers the m rows of n written, and the borrow keeps it ours.
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
    // Safety: the assertion above checks that lhs and rhs cover the strided extent gemm reads;
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

/// `eˣ` for `x ≤ 0` (what softmax needs after subtracting the row maximum), branch-free so the
/// loop vectorises: `eˣ = 2ⁿ·e^r` with `n = round(x·log₂e)`, `|r| ≤ ln2/2`, and `e^r` from its
/// Taylor polynomial to degree 6 (truncation error `0.347⁷/7! < 1.3·10⁻⁷`; with f32 rounding of `x·log₂e` the result is within 10⁻⁶ relative plus 10⁻⁹ absolute). Arguments
/// below −87 give 0 after clamping to `2⁻¹²⁶`-scale, far under f32 softmax resolution.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2: f32 = std::f32::consts::LN_2;
    const ROUND: f32 = 12_582_912.0; // 1.5·2²³: adding it rounds to the nearest integer
    let y = (x * LOG2E).max(-126.0);
    let n = (y + ROUND) - ROUND;
    let r = (y - n) * LN2;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// Numerically stable softmax of one row, in place.
fn softmax_in_place(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for v in x.iter_mut() {
        *v = exp_nonpositive(*v - max);
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

    /// The few-row products (decode) give what the gemm products give.
    #[test]
    fn few_row_products_match_gemm() {
        let (m, cols, d) = (3, 37, 20);
        let val = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 1000) as f32 / 500.0 - 1.0;
        let q: Vec<f32> = (0..m * d).map(|i| val(i, 1)).collect();
        let k: Vec<f32> = (0..cols * d).map(|i| val(i, 2)).collect();
        let v: Vec<f32> = (0..cols * d).map(|i| val(i, 3)).collect();
        let (mut s_few, mut s_gemm) = (vec![0f32; m * cols], vec![0f32; m * cols]);
        few_rows::scores(&mut s_few, &q, &k, d);
        gemm_row_major(
            Gemm { m, n: cols, k: d },
            &mut s_gemm,
            &q,
            &k,
            (d as isize, 1),
        );
        let (mut o_few, mut o_gemm) = (vec![0f32; m * d], vec![0f32; m * d]);
        few_rows::weighted_values(&mut o_few, &s_gemm, &v, d);
        gemm_row_major(
            Gemm { m, n: d, k: cols },
            &mut o_gemm,
            &s_gemm,
            &v,
            (1, d as isize),
        );
        for (a, b) in s_few.iter().zip(&s_gemm).chain(o_few.iter().zip(&o_gemm)) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        // One score by hand: q[0]·k[0].
        let want: f32 = (0..d).map(|i| q[i] * k[i]).sum();
        assert!((s_few[0] - want).abs() < 1e-5);
    }

    #[test]
    fn one_head_by_hand() {
        // d = 1, three tokens, q = k = 1 for all, v = [1, 2, 3]: scores equal, so row i
        // averages v[..=i]: 1, 1.5, 2.
        let dims = Dims {
            kv_heads: 1,
            group: 1,
            t: 3,
            keys: 3,
            head_dim: 1,
            window: None,
        };
        let out = attend(&[1.0; 3], &[1.0; 3], &[1.0, 2.0, 3.0], dims, 1..3, true);
        assert_eq!(out.out, vec![1.0, 1.5, 2.0]);
        assert_eq!(
            out.rows[0],
            vec![vec![0.5, 0.5, 0.0], vec![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0]]
        );
        let cs = &out.column_sums[0];
        assert!((cs[0] - (1.0 + 0.5 + 1.0 / 3.0)).abs() < 1e-6 && (cs[2] - 1.0 / 3.0).abs() < 1e-6);
    }
}
