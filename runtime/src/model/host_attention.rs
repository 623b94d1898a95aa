//! The attention sub-layer on the host, for CPU backends (`flex`): the same maths as the generic
//! burn path in [`super::attention`], without its broadcast and strided passes.
//!
//! [`forward`] takes the fused QKV projection's output to the host once, applies RoPE (rotate-half,
//! HF order, the shared tables of [`super::rope::Rope`]) and the query scale in one loop, appends
//! the rotated keys and the values to the [`LayerCache`] on the host (in place, no copy of what it
//! holds), runs the fused kernel below over what the cache holds, and hands `[t, heads·d]` back to burn for the output projection.
//!
//! The kernel ([`kernel`]) runs per (cache head, its query heads stacked, block of query rows):
//! one gemm for the scores, one pass per row for the causal and window mask and the softmax
//! ([`super::softmax`], vectorised), one gemm for the output; keys outside every row's causal
//! range or sliding window are never touched. Requested rows of `P` (observation) and column sums
//! (H2O) are read off `P` while it is in cache.
//!
//! As in the generic path, the group comes from the layer cache: a cache unfolded to one head per
//! query head gets the new K/V repeated on append and is attended with group 1; query heads are
//! stacked by the geometry's query→KV map ([`super::query_order::QueryOrder`]).

use std::ops::Range;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::attention::{observed_to_head_order, Attention, ForwardCtx, ObservedSoFar};
use super::rope::rotate_half_scaled;
use crate::cache::{host_vec, LayerCache};
use crate::observe::{AttentionRows, ColumnSums, KeysValues, LayerObservation};

mod few_rows;
mod kernel;

use kernel::Blocking;

pub(crate) use super::softmax::{exp_nonpositive, exp_shifted_into, max_of};

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
    /// `c` of `tanh(s / c)·c` on the scaled scores before the mask (Gemma 2), `None`: no cap.
    pub softcap: Option<f32>,
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
    let device = x.device();
    let qkv = host_vec(attn.project(x)); // [t][(nh + 2·nkv)·d]
    let merged = attend_projected(attn, &qkv, ctx, cache, obs);
    output(attn, merged, t, &device)
}

/// [`forward`] for one new token in each of several sequences: row `i` of `x` runs after
/// `caches[i]` under `ctxs[i]` (observed into `obs[i]`). The QKV and output projections run once
/// over all rows; each row's attention reads its own cache. Row `i` of the result is what
/// [`forward`] gives that sequence alone wherever the projections give a row the numbers it gets
/// alone ([`super::quant::QuantMatrix::matmul`] up to its fused rows).
///
/// # Shapes
/// - x: `[n, hidden]` → `[n, hidden]`
pub fn forward_many<B: Backend>(
    attn: &Attention<B>,
    x: Tensor<B, 2>,
    ctxs: &[ForwardCtx<'_, B>],
    caches: &mut [&mut LayerCache<B>],
    obs: Vec<Option<&mut LayerObservation>>,
) -> Tensor<B, 2> {
    let [n, _] = x.dims();
    let device = x.device();
    let qkv = host_vec(attn.project(x)); // [n][(nh + 2·nkv)·d]
    let width = qkv.len() / n.max(1);
    let mut merged = Vec::with_capacity(n * attn.n_heads * attn.head_dim);
    for (((row, ctx), cache), obs) in qkv.chunks_exact(width).zip(ctxs).zip(caches).zip(obs) {
        merged.extend(attend_projected(attn, row, ctx, cache, obs));
    }
    output(attn, merged, n, &device)
}

/// The output projection of `rows` merged attention rows (`[rows][nh·d]`, model head order).
fn output<B: Backend>(
    attn: &Attention<B>,
    merged: Vec<f32>,
    rows: usize,
    device: &B::Device,
) -> Tensor<B, 2> {
    let width = attn.n_heads * attn.head_dim;
    attn.wo.forward(Tensor::from_data(
        TensorData::new(merged, [rows, width]),
        device,
    ))
}

/// The new tokens' fused projection `qkv` (`[t][(nh + 2·nkv)·d]`, `t` = `ctx`'s positions)
/// rotated, appended to `cache` and attended over what it holds; `[t][nh·d]`, query heads in
/// model order (what the output projection takes).
fn attend_projected<B: Backend>(
    attn: &Attention<B>,
    qkv: &[f32],
    ctx: &ForwardCtx<'_, B>,
    cache: &mut LayerCache<B>,
    obs: Option<&mut LayerObservation>,
) -> Vec<f32> {
    let t = ctx.positions.len();
    let (nh, nkv, d) = (attn.n_heads, attn.n_kv_heads, attn.head_dim);
    let heads = super::attention::cache_heads(cache, nh, nkv);
    let device = ctx.pos_tensor.device();
    let Projected { q, k_pre, k_rot, v } = project(attn, qkv, ctx);
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
        softcap: attn.softcap.map(|c| c as f32),
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
    merged
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
        return kernel::attend_heads(q, &keys, &values, dims, observe, colsum, Blocking::DEFAULT);
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
        let mut r = kernel::attend_heads(
            qg,
            &keys[g..=g],
            &values[g..=g],
            dims,
            observe.clone(),
            colsum,
            Blocking::DEFAULT,
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
    attend_with(q, k, v, dims, observe, colsum, Blocking::DEFAULT)
}

/// [`attend`] with long tasks in key blocks as `blocking` says.
fn attend_with(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    dims: Dims,
    observe: Range<usize>,
    colsum: bool,
    blocking: Blocking,
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
    kernel::attend_heads(q, &keys, &values, dims, observe, colsum, blocking)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gemm::{gemm_row_major, Gemm};

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
            softcap: None,
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

    /// The definition in f64, one (head, row) at a time: row `i` (slot `a = past + i`) sees
    /// slots `a − window < j ≤ a`. Returns `(out [heads][t][d], probs [heads][t][keys])`.
    fn reference(q: &[f32], k: &[f32], v: &[f32], dims: Dims) -> (Vec<f64>, Vec<f64>) {
        let Dims {
            kv_heads: kv,
            group,
            t,
            keys: l,
            head_dim: d,
            window,
            softcap,
        } = dims;
        let (mut out, mut probs) = (
            vec![0f64; kv * group * t * d],
            vec![0f64; kv * group * t * l],
        );
        for head in 0..kv * group {
            let g = head / group;
            for i in 0..t {
                let a = l - t + i;
                let first = window.map_or(0, |w| (a + 1).saturating_sub(w));
                let qi = &q[(head * t + i) * d..(head * t + i + 1) * d];
                let s: Vec<f64> = (first..=a)
                    .map(|j| {
                        let s: f64 = (0..d)
                            .map(|x| qi[x] as f64 * k[(g * l + j) * d + x] as f64)
                            .sum();
                        softcap.map_or(s, |c| (s / c as f64).tanh() * c as f64)
                    })
                    .collect();
                let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = s.iter().map(|x| (x - max).exp()).sum();
                for (j, x) in (first..=a).zip(&s) {
                    let p = (x - max).exp() / z;
                    probs[(head * t + i) * l + j] = p;
                    for x in 0..d {
                        out[(head * t + i) * d + x] += p * v[(g * l + j) * d + x] as f64;
                    }
                }
            }
        }
        (out, probs)
    }

    /// The observed rows and column sums of `got` are the definition's (`probs` from
    /// [`reference`]), for every head.
    fn check_observed(
        got: &HostOutput,
        probs: &[f64],
        dims: Dims,
        observe: Range<usize>,
        case: &str,
    ) {
        let (t, l) = (dims.t, dims.keys);
        for head in 0..dims.kv_heads * dims.group {
            assert_eq!(got.rows[head].len(), observe.len(), "{case}");
            for (row, i) in got.rows[head].iter().zip(observe.clone()) {
                let want = &probs[(head * t + i) * l..(head * t + i + 1) * l];
                for (a, b) in row.iter().zip(want) {
                    assert!((*a as f64 - b).abs() < 1e-6, "{case}: row {i} {a} vs {b}");
                }
            }
            for (j, a) in got.column_sums[head].iter().enumerate() {
                let want: f64 = (0..t).map(|i| probs[(head * t + i) * l + j]).sum();
                assert!((*a as f64 - want).abs() < 1e-5, "{case}: column {j}");
            }
        }
    }

    /// Stacked query heads, row blocks, a cached past, a sliding window, the few-row (decode)
    /// path: outputs, observed rows and column sums as the definition gives them.
    #[test]
    fn a_decode_step_with_its_keys_split_matches_the_definition() {
        // One new row over 1,500 keys, one or two cache heads: the keys are split into ranges
        // (kernel::key_parts) whenever rayon runs more than one thread; nothing observed. With a
        // window of 700 only the last 700 keys are split. Random values (not a short period, so
        // each range has its own maximum score; a join that ignored them fails).
        let mut rng = crate::generate::SplitMix64::new(5);
        let mut draw = |n: usize, scale: f64| -> Vec<f32> {
            (0..n)
                .map(|_| ((rng.next_f64() - 0.5) * scale) as f32)
                .collect()
        };
        for (kv, group, window) in [(1, 3, None), (2, 7, None), (1, 4, Some(700))] {
            let (l, d) = (1500, 8);
            let dims = Dims {
                kv_heads: kv,
                group,
                t: 1,
                keys: l,
                head_dim: d,
                window,
                softcap: None,
            };
            let (q, k, v) = (
                draw(kv * group * d, 8.0),
                draw(kv * l * d, 2.0),
                draw(kv * l * d, 2.0),
            );
            let got = attend(&q, &k, &v, dims, 0..0, false);
            let (out, _) = reference(&q, &k, &v, dims);
            for (a, b) in got.out.iter().zip(&out) {
                assert!(
                    (*a as f64 - b).abs() < 1e-5,
                    "kv {kv}, window {window:?}: {a} vs {b}"
                );
            }
            assert!(got.rows.is_empty() && got.column_sums.is_empty());
        }
    }

    /// Long tasks worked in key blocks with a running softmax (kernel module header): with
    /// blocks of 7 keys from 32 keys on, outputs match the definition — causal and windowed
    /// rows, a cached past, stacked query heads, rows whose window misses whole blocks — and a
    /// run that observes its last rows still gives their exact rows and column sums (those
    /// tasks keep whole rows) while its other tasks are blocked.
    #[test]
    fn key_blocks_with_a_running_softmax_match_the_definition() {
        let mut rng = crate::generate::SplitMix64::new(11);
        let mut draw = |n: usize, scale: f64| -> Vec<f32> {
            (0..n)
                .map(|_| ((rng.next_f64() - 0.5) * scale) as f32)
                .collect()
        };
        let blocking = Blocking { from: 32, block: 7 };
        for (kv, group, t, l, window, softcap) in [
            (2, 3, 200, 230, None, None),
            (1, 4, 150, 150, Some(40), None),
            (2, 2, 90, 400, Some(25), None),
            (3, 1, 130, 131, None, None),
            // Gemma 2's soft-cap, tight enough to change every score.
            (2, 2, 120, 160, Some(30), Some(1.5)),
        ] {
            let d = 8;
            let dims = Dims {
                kv_heads: kv,
                group,
                t,
                keys: l,
                head_dim: d,
                window,
                softcap,
            };
            let (q, k, v) = (
                draw(kv * group * t * d, 8.0),
                draw(kv * l * d, 2.0),
                draw(kv * l * d, 2.0),
            );
            let (out, probs) = reference(&q, &k, &v, dims);
            let case = format!(
                "kv {kv}, group {group}, t {t}, keys {l}, window {window:?}, cap {softcap:?}"
            );
            let plain = attend_with(&q, &k, &v, dims, 0..0, false, blocking);
            for (a, b) in plain.out.iter().zip(&out) {
                assert!((*a as f64 - b).abs() < 1e-5, "{case}: out {a} vs {b}");
            }
            let observe = t - 3..t;
            let seen = attend_with(&q, &k, &v, dims, observe.clone(), true, blocking);
            for (a, b) in seen.out.iter().zip(&out) {
                assert!(
                    (*a as f64 - b).abs() < 1e-5,
                    "{case}: observed run, out {a} vs {b}"
                );
            }
            check_observed(&seen, &probs, dims, observe, &case);
        }
    }

    #[test]
    fn grouped_windowed_blocks_match_the_definition() {
        let val = |i: usize, salt: usize| ((i * 7919 + salt * 104_729) % 1000) as f32 / 500.0 - 1.0;
        let cases = [
            (2, 3, 70, 90, None),
            (2, 3, 70, 90, Some(13)),
            (1, 4, 50, 50, Some(20)),
            (2, 7, 1, 40, None),
            (1, 4, 1, 40, Some(9)),
            (3, 1, 200, 230, Some(64)),
        ];
        for (kv, group, t, l, window) in cases {
            let d = 8;
            let dims = Dims {
                kv_heads: kv,
                group,
                t,
                keys: l,
                head_dim: d,
                window,
                softcap: None,
            };
            let q: Vec<f32> = (0..kv * group * t * d).map(|i| val(i, 1)).collect();
            let k: Vec<f32> = (0..kv * l * d).map(|i| val(i, 2)).collect();
            let v: Vec<f32> = (0..kv * l * d).map(|i| val(i, 3)).collect();
            let observe = t.saturating_sub(5)..t;
            let got = attend(&q, &k, &v, dims, observe.clone(), true);
            let (out, probs) = reference(&q, &k, &v, dims);
            let case = format!("kv {kv}, group {group}, t {t}, keys {l}, window {window:?}");
            for (a, b) in got.out.iter().zip(&out) {
                assert!((*a as f64 - b).abs() < 1e-5, "{case}: out {a} vs {b}");
            }
            check_observed(&got, &probs, dims, observe, &case);
        }
    }
}
