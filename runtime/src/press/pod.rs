//! PoD inference (`pod-inter-layer-attention-sharing.md` §2.2–2.3, eq. 3–4) over the plan's
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
//! KV head's layer is the lowest of a block for one of its query heads (`alloc::pod::shared_keys`);
//! elsewhere the proximal keys only (`n_s` + the last `n_r`). The press holds this cache itself, on
//! the host; its bytes are the plan's `keys + values` figure. The attention runs on the host, one
//! query row at a time (rows in parallel, dot products rather than gemm), so PoD's prefill is
//! several times slower than the other presses' fused kernel. Without PoD post-training
//! (`kvplan train-pod`, loaded with `--weights`) the shared distant scores are an approximation.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use kvplan_planner::{Geometry, PodSection};

use super::registry::{refuse_pod_on, FromPlan, MethodPress};
use super::{Capabilities, Press};
use crate::cache::KvCache;
use crate::error::{Error, Result};
use crate::model::rope::RopeSet;
use crate::model::Model;
use crate::observe::{ObserveConfig, Observer};

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
    /// prefill, no eviction while decoding, keys stored by original position.
    const CAPABILITIES: Capabilities = Capabilities {
        changes_forward: true,
        streams_past_context: false,
        evicts_while_decoding: false,
        adopts_shared_prefill: false,
    };

    /// The section's blocks and gate τ, the plan's proximal split; `llama` models only
    /// ([`refuse_pod_on`]).
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        refuse_pod_on(&p.config.architecture)?;
        let s: &PodSection = p.section_as()?;
        let proximal = Proximal {
            sinks: p.budgets.sinks,
            recent: p.budgets.recent,
        };
        let rope = p.config.rope();
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
        let shared = kvplan_planner::alloc::pod::shared_keys(&blocks, geometry);
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
    /// One token after a prefill (the τ gate applies).
    decode: bool,
}

/// One row's output, its distant log-partition (lowest layers) and whether τ skipped it.
struct Row {
    out: Vec<f32>,
    lse_d: Option<f32>,
    skipped: bool,
}

/// `ln Σ exp(a)` (−∞ for no term).
fn log_sum_exp(a: &[f32]) -> f32 {
    let m = a.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if m == f32::NEG_INFINITY {
        return m;
    }
    m + a.iter().map(|x| (x - m).exp()).sum::<f32>().ln()
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
        let Shape {
            tokens: t,
            first_position: p0,
            q_heads: nh,
            kv_heads: nkv,
            head_dim: d,
            decode,
        } = shape;
        let width = (nh + 2 * nkv) * d;
        let freqs = self.rope.layer(l);
        let positions: Vec<usize> = (p0..p0 + t).collect();
        let mut q = Vec::with_capacity(t * nh * d);
        for r in 0..t {
            let row = &qkv[r * width..(r + 1) * width];
            q.extend_from_slice(&row[..nh * d]);
            for g in 0..nkv {
                let slot = &mut self.slots[l][g];
                let mut k = row[(nh + g) * d..(nh + g + 1) * d].to_vec();
                freqs.rotate_rows(&mut k, &positions[r..=r], 1.0);
                slot.keys.extend(k);
                slot.key_pos.push(p0 + r);
                slot.values
                    .extend_from_slice(&row[(nh + nkv + g) * d..(nh + nkv + g + 1) * d]);
            }
        }
        let qpos: Vec<usize> = positions
            .iter()
            .flat_map(|&p| std::iter::repeat_n(p, nh))
            .collect();
        freqs.rotate_rows(&mut q, &qpos, 1.0);
        let scale = 1.0 / (d as f32).sqrt();
        q.iter_mut().for_each(|x| *x *= scale);
        let mut out = vec![0f32; t * nh * d];
        let mut lse_d = vec![f32::NEG_INFINITY; t * nh];
        // Rows are independent given the saved lower layers: `[row][head]` order, in parallel.
        let rows = {
            let (this, saved, q) = (&*self, &*saved, &q);
            map_rows(t * nh, |at| {
                let (r, h) = (at / nh, at % nh);
                this.row(l, h, r, &shape, &q[at * d..(at + 1) * d], saved)
            })
        };
        for (at, row) in rows.into_iter().enumerate() {
            let h = at % nh;
            out[at * d..(at + 1) * d].copy_from_slice(&row.out);
            if let Some(lse) = row.lse_d {
                lse_d[at] = lse;
            }
            self.gated += usize::from(decode && self.lowest(l, h) != l);
            self.skipped += usize::from(row.skipped);
        }
        let needed = self
            .blocks
            .iter()
            .any(|b| b.iter().any(|b| b[0] == l && b[1] > l));
        saved[l] = needed.then_some(Saved { q, lse_d });
        // Blocks whose last layer is `l` no longer need their lowest layer's queries.
        for (lo, slot) in saved.iter_mut().enumerate().take(l) {
            let live = self
                .blocks
                .iter()
                .any(|b| b.iter().any(|b| b[0] == lo && b[1] > l));
            if !live {
                *slot = None;
            }
        }
        self.prune(l, p0 + t - 1, d);
        out
    }

    /// One query row of query head `h` at layer `l`: eq. 3–4, the τ gate while decoding.
    fn row(
        &self,
        l: usize,
        h: usize,
        r: usize,
        s: &Shape,
        qh: &[f32],
        saved: &[Option<Saved>],
    ) -> Row {
        let (d, nh) = (s.head_dim, s.q_heads);
        let g = self.kv_of[h];
        let lo = self.lowest(l, h);
        let p = s.first_position + r;
        let own = &self.slots[l][g];
        let value = |pos: usize| &own.values[pos * d..(pos + 1) * d];
        let (mut a_p, mut v_p) = (Vec::new(), Vec::new());
        for (i, &kp) in own.key_pos.iter().enumerate() {
            if kp <= p && self.proximal(kp, p) {
                a_p.push(dot(qh, &own.keys[i * d..(i + 1) * d]));
                v_p.push(value(kp));
            }
        }
        let shared = saved[lo].as_ref().filter(|_| lo != l);
        let (q_d, src) = match shared {
            Some(sv) => (
                &sv.q[(r * nh + h) * d..(r * nh + h + 1) * d],
                &self.slots[lo][g],
            ),
            None => (qh, own),
        };
        let skipped = s.decode
            && shared.is_some_and(|sv| {
                let lse = sv.lse_d[r * nh + h];
                // g = 1 / (1 + exp(lse_D − lse_P)) ≥ τ
                1.0 / (1.0 + (lse - log_sum_exp(&a_p)).exp()) >= self.tau
            });
        let (mut a_d, mut v_d) = (Vec::new(), Vec::new());
        if !skipped {
            for (i, &kp) in src.key_pos.iter().enumerate() {
                if kp <= p && !self.proximal(kp, p) {
                    a_d.push(dot(q_d, &src.keys[i * d..(i + 1) * d]));
                    v_d.push(value(kp));
                }
            }
        }
        let lse_d = (lo == l).then(|| log_sum_exp(&a_d));
        Row {
            out: pod_row(&a_p, &v_p, &a_d, &v_d, d).0,
            lse_d,
            skipped,
        }
    }

    /// Drops keys that are no longer proximal where the slot does not store distant keys.
    fn prune(&mut self, l: usize, last: usize, d: usize) {
        for g in 0..self.slots[l].len() {
            if self.full_keys[l][g] {
                continue;
            }
            let (sinks, recent) = (self.sinks, self.recent);
            let slot = &mut self.slots[l][g];
            let keep: Vec<usize> = (0..slot.key_pos.len())
                .filter(|&i| slot.key_pos[i] < sinks || slot.key_pos[i] + recent > last)
                .collect();
            if keep.len() == slot.key_pos.len() {
                continue;
            }
            slot.keys = keep
                .iter()
                .flat_map(|&i| slot.keys[i * d..(i + 1) * d].to_vec())
                .collect();
            slot.key_pos = keep.iter().map(|&i| slot.key_pos[i]).collect();
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

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl<B: Backend> Press<B> for PodPress {
    fn name(&self) -> &str {
        "pod"
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        None
    }

    fn after_prefill(&mut self, _cache: &mut KvCache<B>, _obs: Option<&Observer>) -> Result<()> {
        Ok(())
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
        let mut x = tr.embed.forward(ids, device);
        let mut saved: Vec<Option<Saved>> = (0..c.geometry.layers).map(|_| None).collect();
        for (l, block) in tr.blocks.iter().enumerate() {
            let a = &block.attention;
            let qkv: Vec<f32> = a
                .wqkv
                .forward(block.attn_norm.forward(x.clone()))
                .into_data()
                .iter::<f32>()
                .collect();
            let shape = Shape {
                tokens: t,
                first_position: p0,
                q_heads: nh,
                kv_heads: nkv,
                head_dim: d,
                decode,
            };
            let o = self.layer(l, &qkv, shape, &mut saved);
            let o = Tensor::<B, 2>::from_data(TensorData::new(o, [t, nh * d]), device);
            let h = x + a.wo.forward(o);
            x = h.clone() + block.ffn.forward(block.ffn_norm.forward(h));
        }
        self.len += t;
        cache.next_position = self.len;
        let x = x.narrow(0, t - 1, 1);
        Ok(tr.output.forward(tr.norm.forward(x)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_mixes_proximal_and_distant_outputs_by_their_partition_functions() {
        // a^P = [0, ln 3] → Σexp = 4; a^D = [ln 4] → Σexp = 4; g = 4/8 = 0.5.
        // o^P = (1·[1,0] + 3·[0,1])/4 = [.25, .75]; o^D = [2, 2];
        // o = .5·[.25, .75] + .5·[2, 2] = [1.125, 1.375].
        let (v1, v2, v3) = ([1.0, 0.0], [0.0, 1.0], [2.0, 2.0]);
        let (o, g) = pod_row(&[0.0, 3f32.ln()], &[&v1, &v2], &[4f32.ln()], &[&v3], 2);
        assert!((g - 0.5).abs() < 1e-6);
        assert!(
            (o[0] - 1.125).abs() < 1e-6 && (o[1] - 1.375).abs() < 1e-6,
            "{o:?}"
        );
        // No distant tokens: g = 1 and the proximal softmax alone.
        let (o, g) = pod_row(&[0.0, 3f32.ln()], &[&v1, &v2], &[], &[], 2);
        assert!((g - 1.0).abs() < 1e-6 && (o[1] - 0.75).abs() < 1e-6);
    }
}
