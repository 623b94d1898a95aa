//! PoD attention in a parallel, differentiable form for post-training
//! (`docs/papers/pod.md` §2.2, eq. 3–4).
//!
//! The same maths as the inference press ([`crate::press::pod`]) while it prefills, written with
//! burn tensor ops over a whole sequence so autodiff can run backwards through it. For query head
//! `h` of layer ℓ in block `[ℓ_a, ℓ_b]` and the query at position `i`:
//! - proximal keys `j` (`j < n_s` or `i − n_r < j ≤ i`) score with the layer's own Q and K;
//! - distant keys (the rest of `j ≤ i`) score `a^D = Q_ℓa·K_ℓa^D/√d`: the block's lowest layer's
//!   scores for the same head, shared (gradients flow back into that layer's Q and K);
//! - both groups take layer ℓ's own values. Eq. 4's parameter-free gate
//!   `g = ΣexpA^P / (ΣexpA^P + ΣexpA^D)` mixing the two softmax outputs is exactly one softmax
//!   over the joined scores ([`crate::press::pod::pod_row`] shows it row by row), so that is what
//!   runs here. τ only skips work while decoding; training has no τ.
//!
//! With every layer in its own block ([`PodLayout::full_kv`]) the distant scores are the layer's
//! own and this is plain causal attention: FullKV, the baseline of the built-in evaluation.

use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::model::block::Block;
use crate::model::rope::Rope;
use crate::model::Transformer;

/// Which layer each (layer, query head) takes its distant scores from, and the proximal window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLayout {
    /// `lowest[layer][q_head]`: the first layer of the head's block holding `layer`.
    lowest: Vec<Vec<usize>>,
    /// Initial proximal tokens `n_s`.
    pub sinks: usize,
    /// Recent proximal tokens `n_r` (the query itself included).
    pub recent: usize,
}

impl PodLayout {
    /// Layout from the plan's blocks `[q_head][block] = [first, last]` (inclusive). Blocks of a
    /// head must cover `0..n_layers` in order without gaps or overlaps.
    pub fn new(
        blocks: &[Vec<[usize; 2]>],
        n_layers: usize,
        sinks: usize,
        recent: usize,
    ) -> Result<Self> {
        if recent == 0 {
            return Err(Error::Request(
                "pod: n_r must be at least 1 (the query's own token)".into(),
            ));
        }
        let mut lowest = vec![vec![0; blocks.len()]; n_layers];
        for (h, head) in blocks.iter().enumerate() {
            let mut next = 0;
            for &[first, last] in head {
                if first != next || last < first || last >= n_layers {
                    return Err(Error::Request(format!(
                        "pod: blocks of query head {h} do not tile layers 0..{n_layers} \
                         (block [{first}, {last}] after layer {next})"
                    )));
                }
                for row in lowest.iter_mut().take(last + 1).skip(first) {
                    row[h] = first;
                }
                next = last + 1;
            }
            if next != n_layers {
                return Err(Error::Request(format!(
                    "pod: blocks of query head {h} end at layer {next}, not {n_layers}"
                )));
            }
        }
        Ok(Self {
            lowest,
            sinks,
            recent,
        })
    }

    /// Every layer its own block: plain causal attention (FullKV).
    pub fn full_kv(n_layers: usize, n_heads: usize) -> Self {
        Self {
            lowest: (0..n_layers).map(|l| vec![l; n_heads]).collect(),
            sinks: 0,
            recent: 1,
        }
    }

    /// The first layer of the block of query head `head` that holds `layer`.
    pub fn lowest(&self, layer: usize, head: usize) -> usize {
        self.lowest[layer][head]
    }

    /// Layers.
    pub fn n_layers(&self) -> usize {
        self.lowest.len()
    }

    /// True when some head of `layer` takes its distant scores from a lower layer.
    fn shares(&self, layer: usize) -> bool {
        self.lowest[layer].iter().any(|&lo| lo != layer)
    }

    /// True when key `j` is proximal to the query at `i` (`j ≤ i`).
    pub fn proximal(&self, j: usize, i: usize) -> bool {
        j < self.sinks || j + self.recent > i
    }
}

/// Boolean masks `[heads, t, t]`: keys after the query, and distant keys.
struct Masks<B: Backend> {
    future: Tensor<B, 3, Bool>,
    distant: Tensor<B, 3, Bool>,
}

impl<B: Backend> Masks<B> {
    fn new(layout: &PodLayout, heads: usize, t: usize, device: &B::Device) -> Self {
        let mut future = Vec::with_capacity(heads * t * t);
        let mut distant = Vec::with_capacity(heads * t * t);
        for _ in 0..heads {
            for i in 0..t {
                for j in 0..t {
                    future.push(j > i);
                    distant.push(j <= i && !layout.proximal(j, i));
                }
            }
        }
        let bools = |v: Vec<bool>| Tensor::from_data(TensorData::new(v, [heads, t, t]), device);
        Self {
            future: bools(future),
            distant: bools(distant),
        }
    }
}

/// Logits `[t, vocab]` of `ids` (positions `0..t`) under PoD attention of `layout`.
///
/// # Shapes
/// - ids: `t` tokens → `[t, vocab]`
pub fn forward<B: Backend>(
    tr: &Transformer<B>,
    rope: &Rope<B>,
    layout: &PodLayout,
    ids: &[u32],
) -> Result<Tensor<B, 2>> {
    check_input(tr, rope, layout, ids)?;
    let device = tr.device();
    let t = ids.len();
    let n_heads = tr.blocks.first().map_or(0, |b| b.attention.n_heads);
    let pass = Pass {
        rope,
        layout,
        positions: Tensor::<B, 1, Int>::arange(0..t as i64, &device),
        masks: Masks::new(layout, n_heads, t, &device),
    };
    let mut x = tr.embedded(ids); // [t, hidden]
    let mut lent: Vec<Option<Tensor<B, 3>>> = vec![None; tr.blocks.len()];
    for (l, block) in tr.blocks.iter().enumerate() {
        // The model's own block (norms, residuals, feed-forward) around PoD's attention.
        x = block.around(x, |normed| pass.attention(l, block, normed, &mut lent));
    }
    Ok(tr.logits(x))
}

/// One clear error for a request the model cannot run.
fn check_input<B: Backend>(
    tr: &Transformer<B>,
    rope: &Rope<B>,
    layout: &PodLayout,
    ids: &[u32],
) -> Result<()> {
    let t = ids.len();
    let vocab = tr.embed.vocab();
    if t == 0 || t > rope.max_positions() {
        return Err(Error::Request(format!(
            "pod training: {t} tokens, the model takes 1..={}",
            rope.max_positions()
        )));
    }
    if let Some(&bad) = ids.iter().find(|&&i| i as usize >= vocab) {
        return Err(Error::Request(format!(
            "token id {bad} is outside the vocabulary of {vocab}"
        )));
    }
    if layout.n_layers() != tr.blocks.len() {
        return Err(Error::Request(format!(
            "pod layout has {} layers, the model {}",
            layout.n_layers(),
            tr.blocks.len()
        )));
    }
    Ok(())
}

/// What every layer of one PoD forward pass shares.
struct Pass<'a, B: Backend> {
    rope: &'a Rope<B>,
    layout: &'a PodLayout,
    /// `[t]`: positions `0..t`.
    positions: Tensor<B, 1, Int>,
    masks: Masks<B>,
}

impl<B: Backend> Pass<'_, B> {
    /// The attention sub-layer of block `l` under PoD: its own scores for proximal keys, the
    /// lowest layer's (`lent`) for distant ones; lends its own scores to later layers.
    ///
    /// # Shapes
    /// - x: `[t, hidden]` → `[t, hidden]`
    fn attention(
        &self,
        l: usize,
        block: &Block<B>,
        x: Tensor<B, 2>,
        lent: &mut [Option<Tensor<B, 3>>],
    ) -> Tensor<B, 2> {
        let a = &block.attention;
        let (nh, nkv, d) = (a.n_heads, a.n_kv_heads, a.head_dim);
        let [t, _] = x.dims();
        // The model's own projection: biases (Qwen2) included.
        let qkv = a.project(x); // [t, (nh+2nkv)·d], x normed by the block
        let split = |start: usize, heads: usize| {
            qkv.clone()
                .narrow(1, start * d, heads * d)
                .reshape([t, heads, d])
                .swap_dims(0, 1) // [heads, t, d]
        };
        let q = self
            .rope
            .apply(l, split(0, nh), self.positions.clone())
            .mul_scalar(a.query_scale);
        let k = self.rope.apply(l, split(nh, nkv), self.positions.clone());
        let v = split(nh + nkv, nkv);
        let group = nh / nkv;
        // Query heads g·group.. share KV head g: one batched matmul per KV head.
        let own = q
            .reshape([nkv, group * t, d])
            .matmul(k.swap_dims(1, 2))
            .reshape([nh, t, t]);
        let scores = self.with_distant(l, own, lent);
        let probs = softmax(
            scores.mask_fill(self.masks.future.clone(), f32::NEG_INFINITY),
            2,
        );
        let out = probs
            .reshape([nkv, group * t, t])
            .matmul(v) // [nkv, group·t, d]
            .reshape([nh, t, d])
            .swap_dims(0, 1)
            .reshape([t, nh * d]);
        a.wo.forward(out)
    }

    /// Layer `l`'s scores `own` with each head's distant part taken from its block's lowest
    /// layer; keeps `own` in `lent` while a later layer borrows it and drops what none will.
    ///
    /// # Shapes
    /// - own: `[heads, t, t]` → `[heads, t, t]`
    fn with_distant(
        &self,
        l: usize,
        own: Tensor<B, 3>,
        lent: &mut [Option<Tensor<B, 3>>],
    ) -> Tensor<B, 3> {
        let layout = self.layout;
        let mut scores = own.clone();
        if layout.shares(l) {
            let [nh, _, _] = own.dims();
            let distant: Vec<Tensor<B, 3>> = (0..nh)
                .map(|h| match layout.lowest(l, h) {
                    lo if lo == l => own.clone().narrow(0, h, 1),
                    lo => lent[lo]
                        .as_ref()
                        .expect("lowest layers lend their scores")
                        .clone()
                        .narrow(0, h, 1),
                })
                .collect();
            scores = scores.mask_where(self.masks.distant.clone(), Tensor::cat(distant, 0));
        }
        if layout.lends_after(l, l) {
            lent[l] = Some(own);
        }
        // Drop scores no later layer will borrow.
        for (lo, slot) in lent.iter_mut().enumerate().take(l) {
            if slot.is_some() && !layout.lends_after(lo, l) {
                *slot = None;
            }
        }
        scores
    }
}

impl PodLayout {
    /// True when a layer after `after` takes distant scores from `layer`.
    fn lends_after(&self, layer: usize, after: usize) -> bool {
        self.lowest[after + 1..]
            .iter()
            .any(|row| row.contains(&layer))
    }
}

/// Mean next-token cross-entropy (nats) of `logits` against `targets`.
///
/// # Shapes
/// - logits: `[t, vocab]`, targets: `t` ids → `[1]`
pub fn next_token_loss<B: Backend>(logits: Tensor<B, 2>, targets: &[u32]) -> Tensor<B, 1> {
    let device = logits.device();
    let t = targets.len();
    let ids: Vec<i64> = targets.iter().map(|&i| i as i64).collect();
    let ids = Tensor::<B, 2, Int>::from_data(TensorData::new(ids, [t, 1]), &device);
    let logp = burn::tensor::activation::log_softmax(logits, 1);
    logp.gather(1, ids).mean().neg()
}
