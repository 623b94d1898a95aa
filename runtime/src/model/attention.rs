//! Grouped-query self-attention over a per-head [`LayerCache`].
//!
//! `softmax(q·kᵀ·s + mask)·v` (`s = 1/√d` unless the architecture says), where the query heads the geometry maps to KV head `g`
//! ([`QueryOrder`]) share its keys and values. Queries of one KV head are stacked into one
//! `[group·t, d]` operand, so K and V are never repeated per query head and every matmul is a
//! contiguous batched gemm. Long prefills are cut
//! into query blocks of [`QUERY_BLOCK`] rows; block `b` only multiplies the keys it can see, so
//! the upper causal triangle is mostly skipped and at most `heads × QUERY_BLOCK × n` scores exist
//! at a time (never the full `[heads, n, n]` matrix).
//!
//! The group is the layer cache's own: `group = n_heads / cache heads`. A cache holding the
//! model's KV heads gives GQA as above; one unfolded to a head per query head
//! ([`LayerCache::repeat_heads`], SpindleKV's repeat variant) gets the new tokens' K/V repeated
//! `n_heads / n_kv_heads` times on append and attends with group 1.
//!
//! Architecture additions ([`super::arch`]): Q/K/V biases added right after the projection
//! (Qwen2); RMSNorm of each query and key head before RoPE (Qwen3, Gemma 3), or of the whole query
//! and key projections (OLMo 2); soft-capped scores `tanh(s / c)·c` before the mask (Gemma 2,
//! transformers `eager_attention_forward`'s `softcap`); a sliding window, where the
//! new row at cache slot `a` sees slots `a − window < j ≤ a` — cache slots are positions here, as
//! a windowed layer's cache holds one contiguous run of positions (Gemma 3's local layers).

use std::collections::HashMap;

use burn::module::{Module, Param};
use burn::nn::RmsNorm;
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

use super::linear::Linear;
use super::query_order::QueryOrder;
use super::rope::Rope;
use crate::cache::{repeat_heads, KvStore, LayerCache};
use crate::observe::{AttentionRows, ColumnSums, KeysValues, LayerObservation};

/// Query rows per attention block during prefill.
pub const QUERY_BLOCK: usize = 256;

/// Per-call state shared by all layers of one forward pass.
#[derive(Debug)]
pub struct ForwardCtx<'a, B: Backend> {
    /// RoPE tables of every layer.
    pub rope: &'a Rope<B>,
    /// The layer being run (set by the transformer before each block).
    pub layer: usize,
    /// How query heads stack onto the cache heads (the geometry's query→KV map).
    pub order: &'a QueryOrder,
    /// Positions of the new tokens.
    pub positions: &'a [usize],
    /// The same positions on the device.
    pub pos_tensor: Tensor<B, 1, Int>,
    /// Attention rows to observe (0 when no observer).
    pub obs_rows: usize,
    /// Where the observed rows end, an absolute position (`None`: at the call's last row).
    pub obs_end: Option<usize>,
    /// Record pre-RoPE keys and values.
    pub obs_kv: bool,
    /// Record column sums of the attention (all rows).
    pub obs_colsum: bool,
    /// Use the fused host kernel (`host_attention`, chosen by the block) instead of burn ops.
    pub host_kernel: bool,
    masks: HashMap<(usize, usize, usize, usize), Tensor<B, 4>>,
}

impl<'a, B: Backend> ForwardCtx<'a, B> {
    /// Context for a call adding tokens at `positions`.
    pub fn new(
        rope: &'a Rope<B>,
        order: &'a QueryOrder,
        positions: &'a [usize],
        device: &B::Device,
    ) -> Self {
        let ids: Vec<i64> = positions.iter().map(|&p| p as i64).collect();
        let n = ids.len();
        Self {
            rope,
            layer: 0,
            order,
            positions,
            pos_tensor: Tensor::from_data(TensorData::new(ids, [n]), device),
            obs_rows: 0,
            obs_end: None,
            obs_kv: false,
            obs_colsum: false,
            host_kernel: false,
            masks: HashMap::new(),
        }
    }

    /// The new tokens' rows to observe, as indices into the call: of the `obs_rows` positions
    /// ending at `obs_end` (or at the call's end), those the call runs (empty when none).
    pub fn observed_rows(&self) -> std::ops::Range<usize> {
        let t = self.positions.len();
        let start = self.positions.first().copied().unwrap_or(0);
        let end = self.obs_end.unwrap_or(start + t);
        let from = end.saturating_sub(self.obs_rows);
        let index = |p: usize| p.clamp(start, start + t) - start;
        index(from)..index(end)
    }

    /// Additive causal mask `[1, 1, e−s, past+e]` for query rows `s..e` of the new tokens:
    /// the `past` cached keys are visible, new key `j` is visible to new row `i` iff `j ≤ i`;
    /// with a `window`, the row at slot `a = past + i` sees only slots `a − window < j ≤ a`.
    fn mask(
        &mut self,
        (past, s, e): (usize, usize, usize),
        window: Option<usize>,
        device: &B::Device,
    ) -> Tensor<B, 4> {
        self.masks
            .entry((past, s, e, window.unwrap_or(0)))
            .or_insert_with(|| {
                let cols = past + e;
                let mut m = vec![0f32; (e - s) * cols];
                for (r, row) in m.chunks_exact_mut(cols).enumerate() {
                    let at = past + s + r;
                    row[at + 1..].fill(f32::NEG_INFINITY);
                    if let Some(w) = window {
                        row[..(at + 1).saturating_sub(w)].fill(f32::NEG_INFINITY);
                    }
                }
                Tensor::from_data(TensorData::new(m, [1, 1, e - s, cols]), device)
            })
            .clone()
    }
}

/// Self-attention with fused QKV projection.
#[derive(Module, Debug)]
pub struct Attention<B: Backend> {
    /// `[hidden, (heads + 2·kv_heads)·head_dim]`: Q, then K, then V columns (Q/K in HF order).
    pub wqkv: Linear<B>,
    /// `[heads·head_dim, hidden]`.
    pub wo: Linear<B>,
    /// `[(heads + 2·kv_heads)·head_dim]`: biases of the Q, K, V columns (Qwen2).
    pub bias: Option<Param<Tensor<B, 1>>>,
    /// RMSNorm of the queries before RoPE: over each head's `head_dim` (a `[head_dim]` weight:
    /// Qwen3, Gemma 3) or over the whole projection (a `[heads·head_dim]` weight: OLMo 2).
    pub q_norm: Option<RmsNorm<B>>,
    /// RMSNorm of the keys before RoPE, as [`Self::q_norm`].
    pub k_norm: Option<RmsNorm<B>>,
    /// Query heads.
    pub n_heads: usize,
    /// KV heads.
    pub n_kv_heads: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Factor on `q·k`, folded into the queries (`1/√head_dim` for every supported model).
    pub query_scale: f64,
    /// Sliding window in positions, `None` for global attention.
    pub window: Option<usize>,
    /// `c` of `tanh(s / c)·c` on the scaled scores (Gemma 2), `None`: no cap.
    #[module(skip)]
    pub softcap: Option<f64>,
}

/// `RMSNorm` of `heads` heads of `d` dimensions in `x` `[t, heads·d]`: per head when the norm's
/// weight has `d` entries, over the whole row otherwise.
fn norm_heads<B: Backend>(
    norm: &RmsNorm<B>,
    x: Tensor<B, 2>,
    heads: usize,
    d: usize,
) -> Tensor<B, 2> {
    let [t, _] = x.dims();
    if norm.gamma.dims()[0] != d || heads == 1 {
        return norm.forward(x);
    }
    norm.forward(x.reshape([t, heads, d]))
        .reshape([t, heads * d])
}

/// `tanh(s / c)·c`, element-wise (as transformers: divide, tanh, multiply, in f32).
pub(crate) fn soft_cap<B: Backend, const D: usize>(
    s: Tensor<B, D>,
    cap: Option<f64>,
) -> Tensor<B, D> {
    match cap {
        Some(c) => s.div_scalar(c as f32).tanh().mul_scalar(c as f32),
        None => s,
    }
}

impl<B: Backend> Attention<B> {
    /// The pre-RoPE Q, K, V of `x`: the fused projection, plus the biases and the per-head Q/K
    /// norms of the architectures that have them. Both attention paths start here.
    ///
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, (heads + 2·kv_heads)·head_dim]` (Q, then K, then V columns)
    pub fn project(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let qkv = self.wqkv.forward(x); // [t, width]
        let qkv = match &self.bias {
            Some(b) => qkv + b.val().unsqueeze_dim(0),
            None => qkv,
        };
        let (Some(q_norm), Some(k_norm)) = (&self.q_norm, &self.k_norm) else {
            return qkv;
        };
        let (nh, nkv, d) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let heads = |start: usize, n: usize, norm: &RmsNorm<B>| {
            norm_heads(norm, qkv.clone().narrow(1, start * d, n * d), n, d)
        };
        let q = heads(0, nh, q_norm);
        let k = heads(nh, nkv, k_norm);
        let v = qkv.clone().narrow(1, (nh + nkv) * d, nkv * d);
        Tensor::cat(vec![q, k, v], 1)
    }

    /// Adds the new tokens' K/V to `cache` and attends over everything the cache holds, with
    /// burn ops (the generic path; on the CPU backend the block runs the host kernel instead,
    /// `host_attention::forward`, when [`ForwardCtx::host_kernel`] is set).
    ///
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    pub fn forward(
        &self,
        x: Tensor<B, 2>,
        ctx: &mut ForwardCtx<'_, B>,
        cache: &mut LayerCache<B>,
        obs: Option<&mut LayerObservation>,
    ) -> Tensor<B, 2> {
        let [t, _] = x.dims();
        let (nh, nkv, d) = (self.n_heads, self.n_kv_heads, self.head_dim);
        let qkv = self.project(x); // [t, (nh + 2·nkv)·d]
        let split = |start: usize, heads: usize| {
            qkv.clone()
                .narrow(1, start * d, heads * d)
                .reshape([t, heads, d])
                .swap_dims(0, 1) // [heads, t, d]
        };
        let q = split(0, nh); // [nh, t, d]
        let k = split(nh, nkv); // [nkv, t, d]
        let v = split(nh + nkv, nkv); // [nkv, t, d]
        let mut obs = obs;
        let q = ctx.rope.apply(ctx.layer, q, ctx.pos_tensor.clone());
        let k_rot = ctx.rope.apply(ctx.layer, k.clone(), ctx.pos_tensor.clone());
        if let Some(o) = obs.as_deref_mut().filter(|_| ctx.obs_kv) {
            record_keys_values(o, k, v.clone(), ctx.positions);
        }
        let heads = cache_heads(cache, nh, nkv);
        let (k_rot, v) = (
            repeat_heads(k_rot, heads / nkv),
            repeat_heads(v, heads / nkv),
        );
        cache.append(k_rot, v, ctx.positions);
        // Scale the queries once (t·d multiplies) rather than the scores (t·n).
        let q = q.mul_scalar(self.query_scale);
        let q = reorder_heads(q, ctx.order.heads()); // [nh in slot order, t, d]
        let q = q.reshape([heads, nh / heads, t, d]); // [kv][group][t][d]
        let marks = obs.as_deref().map(ObservedSoFar::of);
        // A global layer may run under a window recorded in its cache (an engine's layer
        // classes, `press::classes`).
        let window = self.window.or(cache.window());
        let out = attend_cache(q, (window, self.softcap), ctx, cache, obs.as_deref_mut()); // [kv, group, t, d]
        if let (Some(o), Some(m)) = (obs, marks) {
            observed_to_head_order(o, m, ctx.order, heads);
        }
        let out = reorder_heads(out.reshape([nh, t, d]), ctx.order.slots()); // [nh, t, d]
        self.wo.forward(out.swap_dims(0, 1).reshape([t, nh * d]))
    }
}

impl<B: Backend> Attention<B> {
    /// One new token in each of several sequences: row `i` of `x` after `caches[i]` under
    /// `ctxs[i]`, each row through [`Self::forward`] (the generic path; the host kernel's
    /// `host_attention::forward_many` runs the projections once over all rows).
    ///
    /// # Shapes
    /// - x: `[n, hidden]` → `[n, hidden]`
    pub fn forward_many(
        &self,
        x: Tensor<B, 2>,
        ctxs: &mut [ForwardCtx<'_, B>],
        caches: &mut [&mut LayerCache<B>],
        obs: Vec<Option<&mut LayerObservation>>,
    ) -> Tensor<B, 2> {
        let rows: Vec<Tensor<B, 2>> = ctxs
            .iter_mut()
            .zip(caches)
            .zip(obs)
            .enumerate()
            .map(|(i, ((ctx, cache), obs))| {
                self.forward(x.clone().narrow(0, i, 1), ctx, cache, obs)
            })
            .collect();
        Tensor::cat(rows, 0)
    }
}

/// `x` `[heads, t, d]` with head `i` of the result taken from head `from[i]` (no copy when the
/// order is the identity).
///
/// # Shapes
/// - x: `[heads, t, d]` → `[heads, t, d]`
fn reorder_heads<B: Backend>(x: Tensor<B, 3>, from: &[usize]) -> Tensor<B, 3> {
    if from.iter().enumerate().all(|(i, &f)| i == f) {
        return x;
    }
    let idx: Vec<i64> = from.iter().map(|&f| f as i64).collect();
    let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [from.len()]), &x.device());
    x.select(0, idx)
}

/// Attention of the stacked queries over what `cache` holds, one batched call for a uniform
/// store, one call per cache head for per-head storage (observations merged in slot order).
///
/// # Shapes
/// - q: `[kv, group, t, d]` (scaled, slot order) → `[kv, group, t, d]`
fn attend_cache<B: Backend>(
    q: Tensor<B, 4>,
    window: (Option<usize>, Option<f64>),
    ctx: &mut ForwardCtx<'_, B>,
    cache: &LayerCache<B>,
    obs: Option<&mut LayerObservation>,
) -> Tensor<B, 4> {
    match cache.store() {
        Some(KvStore::Uniform { keys, values }) => {
            attend(q, (keys.clone(), values.clone()), window, ctx, obs, cache)
        }
        Some(KvStore::PerHead { keys, values }) => {
            let mut outs = Vec::with_capacity(keys.len());
            let mut rows: Option<AttentionRows> = None;
            let mut sums: Option<ColumnSums> = None;
            for (g, (k, v)) in keys.iter().zip(values).enumerate() {
                let qg = q.clone().narrow(0, g, 1); // [1, group, t, d]
                let mut head_obs = obs.as_ref().map(|_| LayerObservation::default());
                let (kg, vg) = (k.clone().unsqueeze_dim(0), v.clone().unsqueeze_dim(0));
                outs.push(attend(qg, (kg, vg), window, ctx, head_obs.as_mut(), cache));
                if let Some(mut o) = head_obs {
                    if let Some(r) = o.attention.pop() {
                        rows = Some(merge_rows(rows, r));
                    }
                    if let Some(mut c) = o.column_sums.pop() {
                        match sums.as_mut() {
                            None => sums = Some(c),
                            Some(acc) => acc.sums.append(&mut c.sums),
                        }
                    }
                }
            }
            if let Some(o) = obs {
                o.attention.extend(rows);
                o.column_sums.extend(sums);
            }
            Tensor::cat(outs, 0)
        }
        None => unreachable!("append always leaves a store"),
    }
}

/// How many attention and column-sum records a layer held before a call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ObservedSoFar {
    attention: usize,
    column_sums: usize,
}

impl ObservedSoFar {
    pub(crate) fn of(o: &LayerObservation) -> Self {
        Self {
            attention: o.attention.len(),
            column_sums: o.column_sums.len(),
        }
    }
}

/// Puts the records a call added after `before` (kernels produce them in slot order) in
/// query-head order, and names the cache head each query head read.
pub(crate) fn observed_to_head_order(
    o: &mut LayerObservation,
    before: ObservedSoFar,
    order: &QueryOrder,
    cache_heads: usize,
) {
    for rows in o.attention.iter_mut().skip(before.attention) {
        rows.probs = order.to_heads(std::mem::take(&mut rows.probs));
        rows.kv_of = order.cache_heads_of(cache_heads);
    }
    for sums in o.column_sums.iter_mut().skip(before.column_sums) {
        sums.sums = order.to_heads(std::mem::take(&mut sums.sums));
        sums.kv_of = order.cache_heads_of(cache_heads);
    }
}

/// Heads `cache` stores for a model of `nh` query and `nkv` KV heads: `nkv`, or any count
/// between that divides `nh` and is a multiple of `nkv` (the KV heads repeated).
pub(crate) fn cache_heads<B: Backend>(cache: &LayerCache<B>, nh: usize, nkv: usize) -> usize {
    let heads = cache.kv_heads();
    assert!(
        heads > 0 && heads.is_multiple_of(nkv) && nh.is_multiple_of(heads),
        "attention: a layer cache of {heads} heads for {nh} query and {nkv} KV heads"
    );
    heads
}

/// Attention of scaled queries `q` `[G, group, t, d]` over `k`, `v` `[G, L, d]` whose last `t`
/// entries are the new tokens, within `window` slots when given, scores soft-capped by `cap`
/// when given. Returns `[G, group, t, d]`; records observed rows into `obs`.
fn attend<B: Backend>(
    q: Tensor<B, 4>,
    (k, v): (Tensor<B, 3>, Tensor<B, 3>),
    (window, cap): (Option<usize>, Option<f64>),
    ctx: &mut ForwardCtx<'_, B>,
    mut obs: Option<&mut LayerObservation>,
    cache: &LayerCache<B>,
) -> Tensor<B, 4> {
    let [g, group, t, d] = q.dims();
    let [_, l, _] = k.dims();
    let past = l - t;
    let observe = ctx.observed_rows();
    let mut observed: Vec<Tensor<B, 4>> = Vec::new();
    let want_colsum = obs.is_some() && ctx.obs_colsum;
    let mut colsum: Option<Tensor<B, 4>> = None; // [g, group, 1, l]
    let mut outs = Vec::with_capacity(t.div_ceil(QUERY_BLOCK));
    let device = q.device();
    for s in (0..t).step_by(QUERY_BLOCK) {
        let e = (s + QUERY_BLOCK).min(t);
        let (rows, cols) = (e - s, past + e);
        let qb = q.clone().narrow(2, s, rows).reshape([g, group * rows, d]);
        let kb = k.clone().narrow(1, 0, cols);
        let scores =
            crate::precision::matmul(qb, kb.swap_dims(1, 2)).reshape([g, group, rows, cols]);
        let mut scores = soft_cap(scores, cap);
        if t > 1 || window.is_some_and(|w| cols > w) {
            scores = scores + ctx.mask((past, s, e), window, &device);
        }
        let probs = softmax(scores, 3);
        let (from, to) = (observe.start.max(s), observe.end.min(e));
        if obs.is_some() && from < to {
            let part = probs.clone().narrow(2, from - s, to - from);
            // Pad to all L keys: keys past `cols` are masked for these rows.
            let part = if cols < l {
                let pad = Tensor::zeros([g, group, to - from, l - cols], &device);
                Tensor::cat(vec![part, pad], 3)
            } else {
                part
            };
            observed.push(part);
        }
        if want_colsum {
            let part = probs.clone().sum_dim(2); // [g, group, 1, cols]
            let part = if cols < l {
                Tensor::cat(
                    vec![part, Tensor::zeros([g, group, 1, l - cols], &device)],
                    3,
                )
            } else {
                part
            };
            colsum = Some(match colsum {
                None => part,
                Some(acc) => acc + part,
            });
        }
        let vb = v.clone().narrow(1, 0, cols);
        let ob = crate::precision::matmul(probs.reshape([g, group * rows, cols]), vb);
        outs.push(ob.reshape([g, group, rows, d]));
    }
    if let (Some(o), Some(c)) = (obs.as_mut(), colsum) {
        let flat: Vec<f32> = c.into_data().iter::<f32>().collect();
        o.column_sums.push(ColumnSums {
            sums: flat.chunks_exact(l).map(<[f32]>::to_vec).collect(),
            kv_of: Vec::new(), // set by observed_to_head_order
        });
    }
    if let Some(o) = obs {
        if !observed.is_empty() {
            let probs = Tensor::cat(observed, 2); // [g, group, r, l]
            o.attention
                .push(rows_to_host(probs, &ctx.positions[observe], cache));
        }
    }
    if outs.len() == 1 {
        outs.pop().expect("one block")
    } else {
        Tensor::cat(outs, 2)
    }
}

/// Copies observed probabilities `[G, group, r, L]` to the host as [`AttentionRows`].
fn rows_to_host<B: Backend>(
    probs: Tensor<B, 4>,
    query_positions: &[usize],
    cache: &LayerCache<B>,
) -> AttentionRows {
    let [g, group, r, l] = probs.dims();
    let flat: Vec<f32> = probs.into_data().iter::<f32>().collect();
    let mut per_head = Vec::with_capacity(g * group);
    for h in 0..g * group {
        let rows = (0..r)
            .map(|i| flat[(h * r + i) * l..(h * r + i + 1) * l].to_vec())
            .collect();
        per_head.push(rows);
    }
    AttentionRows {
        query_positions: query_positions.to_vec(),
        probs: per_head,
        key_positions: (0..cache.kv_heads())
            .map(|h| cache.positions(h).to_vec())
            .collect(),
        kv_of: Vec::new(), // set by observed_to_head_order
    }
}

/// Appends the query heads of the next KV head (computed alone in per-head storage) to `acc`.
fn merge_rows(acc: Option<AttentionRows>, mut rows: AttentionRows) -> AttentionRows {
    match acc {
        None => rows,
        Some(mut acc) => {
            acc.probs.append(&mut rows.probs);
            acc
        }
    }
}

fn record_keys_values<B: Backend>(
    o: &mut LayerObservation,
    k: Tensor<B, 3>,
    v: Tensor<B, 3>,
    positions: &[usize],
) {
    o.keys_values.push(KeysValues {
        positions: positions.to_vec(),
        keys: k.into_data().iter::<f32>().collect(),
        values: v.into_data().iter::<f32>().collect(),
    });
}
