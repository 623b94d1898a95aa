//! PoD inference (`docs/papers/pod.md` §2.2–2.3, eq. 3–4) over the plan's
//! head-wise layer blocks, `n_s` initial + `n_r` recent proximal tokens and gate threshold τ.
//!
//! For query head `h` at layer ℓ in block `[ℓ_a, ℓ_b]` and a query at position `P`:
//! - proximal keys (positions `< n_s` or in `(P − n_r, P]`) score with the layer's own Q and K;
//! - distant keys (the rest, up to `P`) score with the block's lowest layer's Q and K
//!   (`a^D = Q_ℓa·K_ℓa^D/√d`), and both groups take the layer's own V;
//! - eq. 4's gate `g = ΣexpA^P / (ΣexpA^P + ΣexpA^D)` mixes the two softmax outputs, which is one
//!   softmax over the joined scores ([`pod_row`]).
//!
//! Prefill runs the same attention (as post-training does). While decoding, a layer that is not
//! the lowest of the head's block evaluates `g` first, from its proximal scores and the distant
//! partition function its lowest layer computed for the same query (the scores are shared, so it
//! is the same sum): when `g ≥ τ` the distant part is skipped (counted in [`PodPress::skipped`]).
//!
//! **Storage** (§2.3): values of every token in every layer; keys of every token only where a
//! KV head's layer is the lowest of a block for one of its query heads (`methods::pod::shared_keys`);
//! elsewhere the proximal keys only (`n_s` + the last `n_r`). The press holds this cache itself, on
//! the host; its bytes are the plan's `keys + values` figure. The attention runs on the host as
//! blocked matrix products (`pod/blocked.rs`: a block of query rows per task, one softmax pass),
//! like the model's fused kernel. Without PoD post-training (`kvplan train-pod`, loaded with
//! `--weights`) the shared distant scores are an approximation.

mod blocked;

use std::ops::Range;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use kvplan_planner::{Geometry, Method, PodSection};

use super::from_plan::{refuse_pod_on_windows, FromPlan, MethodPress};
use super::{Capabilities, Press, PressKind};
use crate::cache::{host_vec, KvCache};
use crate::error::{Error, Result};
use crate::model::rope::{Frequencies, RopeSet};
use crate::model::Model;
use crate::observe::Observer;
use blocked::{Attended, Queries};

/// Eq. 3–4 for one query row: proximal scores `a_p` over values `v_p`, distant scores `a_d`
/// over values `v_d` (rows of `d`); returns the output and the gate `g`.
pub fn pod_row(
    a_p: &[f32],
    v_p: &[&[f32]],
    a_d: &[f32],
    v_d: &[&[f32]],
    d: usize,
) -> (Vec<f32>, f32) {
    let max = a_p
        .iter()
        .chain(a_d)
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    let mut out = vec![0f32; d];
    let (mut z_p, mut z_d) = (0f32, 0f32);
    for (a, v) in a_p.iter().zip(v_p) {
        let e = (a - max).exp();
        z_p += e;
        out.iter_mut().zip(v.iter()).for_each(|(o, x)| *o += e * x);
    }
    for (a, v) in a_d.iter().zip(v_d) {
        let e = (a - max).exp();
        z_d += e;
        out.iter_mut().zip(v.iter()).for_each(|(o, x)| *o += e * x);
    }
    let z = z_p + z_d;
    out.iter_mut().for_each(|o| *o /= z);
    (out, z_p / z)
}

/// One (layer, KV head): keys by position, values of every position.
#[derive(Debug, Clone, Default)]
struct Slot {
    key_pos: Vec<usize>,
    keys: Vec<f32>,
    values: Vec<f32>,
}

/// PoD's attention and cache.
pub struct PodPress {
    blocks: Vec<Vec<[usize; 2]>>,
    full_keys: Vec<Vec<bool>>,
    sinks: usize,
    recent: usize,
    tau: f32,
    rope: RopeSet,
    /// `kv_of[q]`: the KV head query head `q` reads (the geometry's map).
    kv_of: Vec<usize>,
    slots: Vec<Vec<Slot>>,
    len: usize,
    /// Decode rows × (layer, query head) pairs whose distant attention the gate skipped.
    pub skipped: usize,
    /// Decode rows × (layer, query head) pairs the gate was evaluated for.
    pub gated: usize,
}

/// PoD's proximal tokens (`n_s` sinks and `n_r` recent, §2): every layer attends to them with
/// its own keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proximal {
    /// `n_s`: initial tokens.
    pub sinks: usize,
    /// `n_r`: most recent tokens.
    pub recent: usize,
}

impl MethodPress for PodPress {
    /// Runs its own attention (eq. 3–4) from prefill on, over its own host cache: no shared
    /// prefill, keys stored by original position (the table's decode policy: values grow,
    /// distant keys are read from the shared layer).
    const KIND: PressKind = PressKind::OWN_PREFILL;

    /// The section's blocks and gate τ, the plan's proximal split; models without windowed
    /// layers or capped scores only ([`refuse_pod_on_windows`]).
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        refuse_pod_on_windows(p.config)?;
        let s: &PodSection = p.section_as()?;
        let proximal = Proximal {
            sinks: p.budgets.sinks,
            recent: p.budgets.recent,
        };
        let rope = p.config.rope_for(p.budgets.context_len);
        let press = Self::new(s.blocks.clone(), p.geometry(), proximal, s.tau, rope);
        Ok(Box::new(press))
    }
}

impl PodPress {
    /// Blocks `[q_head][block] = [first, last]`, `proximal` tokens, gate τ.
    pub fn new(
        blocks: Vec<Vec<[usize; 2]>>,
        geometry: &Geometry,
        proximal: Proximal,
        tau: f64,
        rope: RopeSet,
    ) -> Self {
        let shared = kvplan_planner::methods::pod::shared_keys(&blocks, geometry);
        Self {
            full_keys: shared
                .iter()
                .map(|r| r.iter().map(|s| !s).collect())
                .collect(),
            blocks,
            sinks: proximal.sinks,
            recent: proximal.recent,
            tau: tau as f32,
            rope,
            kv_of: geometry.q_to_kv.clone(),
            slots: Vec::new(),
            len: 0,
            skipped: 0,
            gated: 0,
        }
    }

    fn lowest(&self, layer: usize, head: usize) -> usize {
        self.blocks[head]
            .iter()
            .find(|b| b[0] <= layer && layer <= b[1])
            .map_or(layer, |b| b[0])
    }

    /// Key entries stored by (`layer`, `kv_head`).
    pub fn keys_held(&self, layer: usize, kv_head: usize) -> usize {
        self.slots[layer][kv_head].key_pos.len()
    }

    fn proximal(&self, pos: usize, query: usize) -> bool {
        pos < self.sinks || pos + self.recent > query
    }
}

/// Shape of one forward call.
#[derive(Debug, Clone, Copy)]
struct Shape {
    /// New tokens.
    tokens: usize,
    /// Position of the first new token.
    first_position: usize,
    q_heads: usize,
    kv_heads: usize,
    head_dim: usize,
    /// The model's query scale (`1/√d` for Llama and Qwen2).
    query_scale: f32,
    /// One token after a prefill (the τ gate applies).
    decode: bool,
}

/// Saved per-layer query state, for the layers above it in the same blocks.
struct Saved {
    /// `[row][q_head][d]`, scaled and rotated.
    q: Vec<f32>,
    /// `[row][q_head]` log of the distant partition function.
    lse_d: Vec<f32>,
}

impl PodPress {
    /// Attention of layer `l` for the `t` new tokens at `p0..`: `qkv` is `[t][(nh + 2·nkv)·d]`.
    fn layer(
        &mut self,
        l: usize,
        qkv: &[f32],
        shape: Shape,
        saved: &mut [Option<Saved>],
    ) -> Vec<f32> {
        self.layer_with(l, qkv, shape, saved, blocked::attend)
    }

    /// [`Self::layer`] with the attention `attend` (the blocked kernel; tests also pass the
    /// row-by-row reference).
    fn layer_with(
        &mut self,
        l: usize,
        qkv: &[f32],
        shape: Shape,
        saved: &mut [Option<Saved>],
        attend: impl Fn(&Self, &Queries<'_>) -> Attended,
    ) -> Vec<f32> {
        let q = self.store(l, qkv, shape);
        let queries = Queries {
            layer: l,
            q: &q,
            shape,
            saved,
        };
        let a = attend(self, &queries);
        if shape.decode {
            let above = (0..shape.q_heads).filter(|&h| self.lowest(l, h) != l);
            self.gated += above.count() * shape.tokens;
        }
        self.skipped += a.skipped.iter().filter(|&&s| s).count();
        self.save(l, q, a.lse_d, saved);
        self.prune(l, shape.first_position + shape.tokens - 1, shape.head_dim);
        a.out
    }

    /// Appends layer `l`'s new keys (rotated) and values to its slots; returns the queries
    /// `[t][q_heads][d]`, rotated and scaled by the model's query scale.
    fn store(&mut self, l: usize, qkv: &[f32], shape: Shape) -> Vec<f32> {
        let Shape {
            tokens: t,
            first_position: p0,
            q_heads: nh,
            kv_heads: nkv,
            head_dim: d,
            query_scale,
            ..
        } = shape;
        let width = (nh + 2 * nkv) * d;
        let mut q = Vec::with_capacity(t * nh * d);
        let mut k = Vec::with_capacity(t * nkv * d);
        for row in qkv.chunks_exact(width) {
            q.extend_from_slice(&row[..nh * d]);
            k.extend_from_slice(&row[nh * d..(nh + nkv) * d]);
        }
        let table = angles(self.rope.layer(l), p0..p0 + t);
        rotate(&mut q, &table, nh * d, d);
        rotate(&mut k, &table, nkv * d, d);
        q.iter_mut().for_each(|x| *x *= query_scale);
        for (g, slot) in self.slots[l].iter_mut().enumerate() {
            for (r, row) in qkv.chunks_exact(width).enumerate() {
                let at = (r * nkv + g) * d;
                slot.keys.extend_from_slice(&k[at..at + d]);
                slot.key_pos.push(p0 + r);
                let at = (nh + nkv + g) * d;
                slot.values.extend_from_slice(&row[at..at + d]);
            }
        }
        q
    }

    /// Keeps layer `l`'s queries and distant log-partitions while a block above shares them, and
    /// drops those of lower layers whose blocks end at `l`.
    fn save(&self, l: usize, q: Vec<f32>, lse_d: Vec<f32>, saved: &mut [Option<Saved>]) {
        let needed = self
            .blocks
            .iter()
            .any(|b| b.iter().any(|b| b[0] == l && b[1] > l));
        saved[l] = needed.then_some(Saved { q, lse_d });
        for (lo, slot) in saved.iter_mut().enumerate().take(l) {
            let live = self
                .blocks
                .iter()
                .any(|b| b.iter().any(|b| b[0] == lo && b[1] > l));
            if !live {
                *slot = None;
            }
        }
    }

    /// Drops keys that are no longer proximal where the slot does not store distant keys.
    fn prune(&mut self, l: usize, last: usize, d: usize) {
        for g in 0..self.slots[l].len() {
            if self.full_keys[l][g] {
                continue;
            }
            let held = &self.slots[l][g].key_pos;
            let keep: Vec<usize> = (0..held.len())
                .filter(|&i| self.proximal(held[i], last))
                .collect();
            let slot = &mut self.slots[l][g];
            if keep.len() == slot.key_pos.len() {
                continue;
            }
            let mut keys = Vec::with_capacity(keep.len() * d);
            for &i in &keep {
                keys.extend_from_slice(&slot.keys[i * d..(i + 1) * d]);
            }
            slot.keys = keys;
            slot.key_pos = keep.iter().map(|&i| slot.key_pos[i]).collect();
        }
    }
}

/// `(sin, cos)` of RoPE's angles at `positions`, `[position][head_dim / 2]`, computed as
/// [`Frequencies::rotate_rows`] does.
fn angles(freqs: &Frequencies, positions: Range<usize>) -> Vec<(f32, f32)> {
    positions
        .flat_map(|p| {
            freqs
                .inv_freq()
                .iter()
                .map(move |f| (p as f32 * f).sin_cos())
        })
        .collect()
}

/// RoPE (rotate-half) of every head of `rows` (`[r][width]`, heads of `d` dimensions) by row
/// `r`'s angles in `table` (`[r][d / 2]`), in place.
fn rotate(rows: &mut [f32], table: &[(f32, f32)], width: usize, d: usize) {
    let half = d / 2;
    for (row, angles) in rows.chunks_exact_mut(width).zip(table.chunks_exact(half)) {
        for head in row.chunks_exact_mut(d) {
            for (j, &(sin, cos)) in angles.iter().enumerate() {
                let (a, b) = (head[j], head[j + half]);
                head[j] = a * cos - b * sin;
                head[j + half] = b * cos + a * sin;
            }
        }
    }
}

/// `f(0..n)`, on rayon's pool for the CPU backend.
fn map_rows<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    #[cfg(feature = "flex")]
    {
        use rayon::prelude::*;
        (0..n).into_par_iter().map(f).collect()
    }
    #[cfg(not(feature = "flex"))]
    {
        (0..n).map(f).collect()
    }
}

impl<B: Backend> Press<B> for PodPress {
    fn name(&self) -> &str {
        Method::Pod.name()
    }

    fn capabilities(&self) -> Capabilities {
        Self::KIND.serving(Some(Method::Pod))
    }

    fn held_bytes(&self, cache: &KvCache<B>) -> usize {
        let own: usize = self
            .slots
            .iter()
            .flatten()
            .map(|s| (s.keys.len() + s.values.len()) * 4)
            .sum();
        own + cache.bytes()
    }

    fn forward(
        &mut self,
        model: &Model<B>,
        ids: &[u32],
        cache: &mut KvCache<B>,
        _obs: Option<&mut Observer>,
    ) -> Result<Tensor<B, 2>> {
        let c = &model.config;
        if ids.is_empty() || ids.iter().any(|&i| i as usize >= c.vocab) {
            return Err(Error::Request(
                "pod: empty input or id outside the vocabulary".into(),
            ));
        }
        let (nh, nkv, d) = (c.geometry.q_heads, c.geometry.kv_heads, c.geometry.head_dim);
        if self.slots.is_empty() {
            self.slots = vec![vec![Slot::default(); nkv]; c.geometry.layers];
        }
        let decode = self.len > 0;
        let (t, p0) = (ids.len(), self.len);
        let tr = &model.transformer;
        let device = model.device();
        let mut x = tr.embedded(ids);
        let mut saved: Vec<Option<Saved>> = (0..c.geometry.layers).map(|_| None).collect();
        for (l, block) in tr.blocks.iter().enumerate() {
            let a = &block.attention;
            // The model's own block around PoD's attention: its norms, and its projection
            // (biases, Q/K norms) inside.
            x = block.around(x, |normed| {
                let qkv = host_vec(a.project(normed));
                let shape = Shape {
                    tokens: t,
                    first_position: p0,
                    q_heads: nh,
                    kv_heads: nkv,
                    head_dim: d,
                    query_scale: a.query_scale as f32,
                    decode,
                };
                let o = self.layer(l, &qkv, shape, &mut saved);
                a.wo.forward(Tensor::<B, 2>::from_data(
                    TensorData::new(o, [t, nh * d]),
                    device,
                ))
            });
        }
        self.len += t;
        cache.next_position = self.len;
        let x = x.narrow(0, t - 1, 1);
        Ok(tr.logits(x))
    }
}

#[cfg(test)]
mod tests;
