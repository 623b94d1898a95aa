//! SpindleKV (`spindlekv.md` §3.3–3.4, eq. 2–3, 7–14, Algorithm 1): eviction under the
//! plan's per-layer ratio schedule (eq. 5–6, the planner's `alloc::spindle`), then a codebook
//! replaces the kept entries' pre-RoPE keys and values — in every layer by default (eq. 15), in
//! the layers the plan's `codebook_layers` names when its shallow/deep split is set.
//!
//! **Eviction** (eq. 2–3, 7): a key `a` scores the attention the observation window's rows give
//! it divided by `l − a` (eq. 2 as printed), averaged over the KV head's query heads (eq. 3);
//! the window is kept and the top entries of the rest fill the layer's budget.
//!
//! **Codebook** (eq. 8–13), one per (layer, KV head) and per K/V: magnitudes `m = |γ|` are
//! stored, the unit vectors grouped greedily: the adjacency `G = [cos > θ]` (diagonal included)
//! is a bitset, degrees are eq. 10's sums of `G` (Algorithm 1 as printed sums `S` and rebuilds
//! them each round, O(N³)); the vertex of highest degree becomes a code, it and its neighbours
//! reference it, and their removal updates the degrees incrementally. At most [`MAX_GROUP`]
//! entries are considered at once; a later group first merges into existing codes. Reconstruction
//! is eq. 14, `γ = C[r]·m`, with RoPE re-applied to keys at the entry's position. Pre-RoPE keys
//! are recovered from the cache by rotating back by the entry's position (RoPE is a rotation).
//!
//! **Decode**: each new entry is merged into the code of highest cosine above θ (the token
//! references it; the code vector is unchanged), or added as a new code.
//!
//! **Memory**: between forward calls a codebook layer holds no K/V tensors, only its codebooks:
//! `(|C_K| + |C_V|) × head_dim × 4` bytes plus, per token, a 4-byte reference and a 4-byte
//! magnitude for K and for V. For a forward call the layer's K/V are reconstructed (eq. 14) and
//! dropped again after it. Not implemented: the GQA "repeat" variant of §3.3.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::{group_mean, observe, Allocation, Press, Scorer, Scores, SelectionPress};
use crate::cache::{KvCache, KvStore, LayerCache};
use crate::error::Result;
use crate::model::Model;
use crate::observe::{LayerObservation, ObserveConfig, Observer};

/// Most entries one codebook round considers at once (its bitset has `MAX_GROUP²` bits).
pub const MAX_GROUP: usize = 1024;

/// Cosine codebook of unit vectors with per-entry magnitudes and references.
#[derive(Debug, Clone, PartialEq)]
pub struct Codebook {
    dim: usize,
    theta: f32,
    /// `[code][dim]` unit vectors.
    pub codes: Vec<f32>,
    /// Code of each entry.
    pub refs: Vec<u32>,
    /// Magnitude of each entry.
    pub mags: Vec<f32>,
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Splits `v` into (unit vector, magnitude); a zero vector stays zero with magnitude 0.
fn unit(v: &[f32]) -> (Vec<f32>, f32) {
    let m = dot(v, v).sqrt();
    if m > 0.0 {
        (v.iter().map(|x| x / m).collect(), m)
    } else {
        (v.to_vec(), 0.0)
    }
}

impl Codebook {
    /// An empty codebook of `dim`-vectors at threshold `theta`.
    pub fn new(dim: usize, theta: f32) -> Self {
        Self {
            dim,
            theta,
            codes: Vec::new(),
            refs: Vec::new(),
            mags: Vec::new(),
        }
    }

    /// Number of codes.
    pub fn len(&self) -> usize {
        self.codes.len() / self.dim
    }

    /// True when no code exists.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    fn code(&self, c: usize) -> &[f32] {
        &self.codes[c * self.dim..(c + 1) * self.dim]
    }

    /// The existing code of highest cosine above θ with unit vector `u`.
    fn best(&self, u: &[f32]) -> Option<usize> {
        (0..self.len())
            .map(|c| (c, dot(self.code(c), u)))
            .filter(|&(_, s)| s > self.theta)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(c, _)| c)
    }

    /// Adds entries (`rows` of `dim` floats): groups of at most [`MAX_GROUP`]; in each, entries
    /// close to an existing code merge into it, the others are grouped greedily (eq. 9–13).
    pub fn extend(&mut self, rows: &[f32]) {
        for group in rows.chunks(MAX_GROUP * self.dim) {
            let mut fresh: Vec<(usize, Vec<f32>)> = Vec::new();
            let start = self.refs.len();
            for (i, v) in group.chunks_exact(self.dim).enumerate() {
                let (u, m) = unit(v);
                self.mags.push(m);
                match self.best(&u) {
                    Some(c) => self.refs.push(c as u32),
                    None => {
                        self.refs.push(u32::MAX);
                        fresh.push((start + i, u));
                    }
                }
            }
            self.group_greedily(&fresh);
        }
    }

    /// Eq. 9–13 over `entries` (index into `refs`, unit vector), with a bitset adjacency and
    /// incrementally updated degrees.
    fn group_greedily(&mut self, entries: &[(usize, Vec<f32>)]) {
        let n = entries.len();
        let words = n.div_ceil(64);
        let mut adj = vec![0u64; n * words];
        for i in 0..n {
            for j in i..n {
                if i == j || dot(&entries[i].1, &entries[j].1) > self.theta {
                    adj[i * words + j / 64] |= 1 << (j % 64);
                    adj[j * words + i / 64] |= 1 << (i % 64);
                }
            }
        }
        let row = |i: usize| &adj[i * words..(i + 1) * words];
        let mut degree: Vec<usize> = (0..n)
            .map(|i| row(i).iter().map(|w| w.count_ones() as usize).sum())
            .collect();
        let mut alive = vec![true; n];
        let mut left = n;
        while left > 0 {
            let iota = (0..n)
                .filter(|&i| alive[i])
                .max_by(|&a, &b| degree[a].cmp(&degree[b]).then(b.cmp(&a)))
                .expect("an alive vertex");
            let code = self.len() as u32;
            self.codes.extend_from_slice(&entries[iota].1);
            let members: Vec<usize> = (0..n)
                .filter(|&j| alive[j] && (j == iota || row(iota)[j / 64] >> (j % 64) & 1 == 1))
                .collect();
            for &j in &members {
                alive[j] = false;
                left -= 1;
                self.refs[entries[j].0] = code;
            }
            for &j in &members {
                for (k, d) in degree.iter_mut().enumerate() {
                    if alive[k] && row(j)[k / 64] >> (k % 64) & 1 == 1 {
                        *d -= 1;
                    }
                }
            }
        }
    }

    /// Eq. 14: every entry's vector, `C[r]·m`, as `[entries][dim]`.
    pub fn reconstruct(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.refs.len() * self.dim);
        for (&r, &m) in self.refs.iter().zip(&self.mags) {
            out.extend(self.code(r as usize).iter().map(|x| x * m));
        }
        out
    }

    /// Bytes held: codes × dim × 4, plus a 4-byte reference and a 4-byte magnitude per entry.
    pub fn bytes(&self) -> usize {
        self.codes.len() * 4 + self.refs.len() * 8
    }
}

/// Eq. 2–3 scores: window attention over `l − a`, mean over the group; window kept.
#[derive(Debug, Clone)]
pub struct SpindleScorer {
    window: usize,
}

impl Scorer for SpindleScorer {
    fn name(&self) -> &str {
        "spindle"
    }

    fn prefill_observe(&self) -> ObserveConfig {
        observe(self.window, false)
    }

    fn prefill_scores(
        &mut self,
        _layer: usize,
        positions: &[Vec<usize>],
        obs: Option<&LayerObservation>,
        _budgets: &[usize],
    ) -> Scores {
        let kv = positions.len();
        let Some(rows) = obs.and_then(|o| o.attention.last()) else {
            return positions.iter().map(|p| vec![0.0; p.len()]).collect();
        };
        let group = rows.probs.len() / kv.max(1);
        let per_q: Vec<Vec<f32>> = rows
            .probs
            .iter()
            .enumerate()
            .map(|(q, head_rows)| {
                let pos = &positions[q / group.max(1)];
                let l = pos.len();
                let from = head_rows.len().saturating_sub(self.window);
                (0..l)
                    .map(|a| {
                        let s: f32 = head_rows[from..].iter().map(|r| r[a]).sum();
                        s / (l - a) as f32
                    })
                    .collect()
            })
            .collect();
        group_mean(&per_q, kv)
            .into_iter()
            .map(|mut s| {
                let from = s.len().saturating_sub(self.window);
                s[from..].fill(f32::INFINITY);
                s
            })
            .collect()
    }
}

/// One (layer, KV head) under the codebook.
#[derive(Debug, Clone)]
struct HeadBook {
    keys: Codebook,
    values: Codebook,
    positions: Vec<usize>,
}

/// SpindleKV: eviction, then codebooks in the codebook layers.
pub struct SpindlePress {
    evict: SelectionPress,
    codebook_layers: Vec<bool>,
    theta_k: f32,
    theta_v: f32,
    rope_theta: f64,
    books: Vec<Option<Vec<HeadBook>>>,
}

impl SpindlePress {
    /// Budgets `alloc` (window `window` inside), codebooks in `codebook_layers` at θ_K, θ_V.
    pub fn new(
        alloc: Allocation,
        window: usize,
        codebook_layers: Vec<bool>,
        theta_k: f64,
        theta_v: f64,
        rope_theta: f64,
    ) -> Self {
        Self {
            evict: SelectionPress::new("spindle", Box::new(SpindleScorer { window }), alloc),
            codebook_layers,
            theta_k: theta_k as f32,
            theta_v: theta_v as f32,
            rope_theta,
            books: Vec::new(),
        }
    }

    /// Entries (tokens) held by (`layer`, `head`) in its codebooks, when the layer has them.
    pub fn entries(&self, layer: usize, head: usize) -> Option<usize> {
        Some(self.books.get(layer)?.as_ref()?[head].positions.len())
    }

    /// Codes `(keys, values)` of (`layer`, `head`), when the layer has a codebook.
    pub fn codes(&self, layer: usize, head: usize) -> Option<(usize, usize)> {
        let b = &self.books.get(layer)?.as_ref()?[head];
        Some((b.keys.len(), b.values.len()))
    }

    /// Moves the layer's entries the codebooks do not hold yet into them (merging or adding
    /// codes); the layer then holds no tensor.
    fn absorb<B: Backend>(&self, layer: &mut LayerCache<B>, books: &mut Vec<HeadBook>) {
        let kv = layer.kv_heads();
        let d = layer.head_dim();
        for h in 0..kv {
            if books.len() <= h {
                books.push(HeadBook {
                    keys: Codebook::new(d, self.theta_k),
                    values: Codebook::new(d, self.theta_v),
                    positions: Vec::new(),
                });
            }
            let Some((k, v)) = layer.head(h) else {
                continue;
            };
            let first = books[h].positions.len();
            let pos = layer.positions(h)[first..].to_vec();
            let mut k: Vec<f32> = k.into_data().iter::<f32>().collect();
            let v: Vec<f32> = v.into_data().iter::<f32>().collect();
            let k = &mut k[first * d..];
            rotate_rows(k, &pos, d, self.rope_theta, -1.0);
            books[h].keys.extend(k);
            books[h].values.extend(&v[first * d..]);
            books[h].positions.extend(pos);
        }
        layer.replace(None, vec![Vec::new(); kv]);
    }

    /// Puts the reconstructed K (RoPE re-applied) and V of every head back into the layer.
    fn restore<B: Backend>(
        &self,
        layer: &mut LayerCache<B>,
        books: &[HeadBook],
        device: &B::Device,
    ) {
        let d = layer.head_dim();
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for b in books {
            let n = b.positions.len();
            let mut k = b.keys.reconstruct();
            rotate_rows(&mut k, &b.positions, d, self.rope_theta, 1.0);
            keys.push(Tensor::<B, 2>::from_data(
                TensorData::new(k, [n, d]),
                device,
            ));
            let v = b.values.reconstruct();
            values.push(Tensor::<B, 2>::from_data(
                TensorData::new(v, [n, d]),
                device,
            ));
        }
        let uniform = books
            .windows(2)
            .all(|w| w[0].positions.len() == w[1].positions.len());
        let store = if uniform {
            KvStore::Uniform {
                keys: Tensor::stack(keys, 0),
                values: Tensor::stack(values, 0),
            }
        } else {
            KvStore::PerHead { keys, values }
        };
        layer.replace(
            Some(store),
            books.iter().map(|b| b.positions.clone()).collect(),
        );
    }
}

/// Rotates `[rows][d]` keys by `sign × position` (rotate-half RoPE, the model's f32 frequencies):
/// `sign = 1` applies RoPE, `−1` removes it.
pub(crate) fn rotate_rows(rows: &mut [f32], positions: &[usize], d: usize, theta: f64, sign: f32) {
    let half = d / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|j| (1.0 / theta.powf(2.0 * j as f64 / d as f64)) as f32)
        .collect();
    for (row, &p) in rows.chunks_exact_mut(d).zip(positions) {
        for j in 0..half {
            let (sin, cos) = (p as f32 * inv_freq[j]).sin_cos();
            let sin = sign * sin;
            let (a, b) = (row[j], row[j + half]);
            row[j] = a * cos - b * sin;
            row[j + half] = b * cos + a * sin;
        }
    }
}

impl<B: Backend> Press<B> for SpindlePress {
    fn name(&self) -> &str {
        "spindle"
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        Press::<B>::prefill_observe(&self.evict)
    }

    fn after_prefill(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        self.evict.after_prefill(cache, obs)?;
        let mut books = Vec::with_capacity(cache.layers.len());
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            if self.codebook_layers.get(l).copied().unwrap_or(false) {
                let mut b = Vec::new();
                self.absorb(layer, &mut b);
                books.push(Some(b));
            } else {
                books.push(None);
            }
        }
        self.books = books;
        Ok(())
    }

    fn held_bytes(&self, cache: &KvCache<B>) -> usize {
        let books: usize = self
            .books
            .iter()
            .flatten()
            .flatten()
            .map(|b| b.keys.bytes() + b.values.bytes())
            .sum();
        cache.bytes() + books
    }

    fn forward(
        &mut self,
        model: &Model<B>,
        ids: &[u32],
        cache: &mut KvCache<B>,
        obs: Option<&mut Observer>,
    ) -> Result<Tensor<B, 2>> {
        let mut books = std::mem::take(&mut self.books);
        let device = model.device().clone();
        for (l, b) in books.iter().enumerate() {
            if let Some(b) = b {
                self.restore(&mut cache.layers[l], b, &device);
            }
        }
        let out = model.forward(ids, cache, obs, crate::model::Logits::Last);
        for (l, b) in books.iter_mut().enumerate() {
            if let Some(b) = b {
                self.absorb(&mut cache.layers[l], b);
            }
        }
        self.books = books;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(deg: f32, m: f32) -> [f32; 2] {
        let r = deg.to_radians();
        [m * r.cos(), m * r.sin()]
    }

    #[test]
    fn greedy_codebook_by_degree_with_known_cosines() {
        // θ = 0.95. a = 0°, b = 10°, c = 20° (magnitude 3), d = 90°, e = 90° (magnitude 2),
        // f = 140°. cos(a,b) = cos(b,c) = cos 10° = .985 > θ; cos(a,c) = cos 20° = .940 < θ;
        // cos(d,e) = 1; f is alone. Degrees (self included): a 2, b 3, c 2, d 2, e 2, f 1.
        // Round 1: b (degree 3) → code 0 for a, b, c. Round 2: d (ties with e, first) → code 1
        // for d, e. Round 3: f → code 2.
        let rows: Vec<f32> = [
            at(0.0, 1.0),
            at(10.0, 1.0),
            at(20.0, 3.0),
            at(90.0, 1.0),
            at(90.0, 2.0),
            at(140.0, 1.0),
        ]
        .concat();
        let mut cb = Codebook::new(2, 0.95);
        cb.extend(&rows);
        assert_eq!(cb.refs, vec![0, 0, 0, 1, 1, 2]);
        assert_eq!(cb.len(), 3);
        // Eq. 14: c comes back as b's direction at c's magnitude; e exactly.
        let r = cb.reconstruct();
        let b = at(10.0, 3.0);
        assert!(
            (r[4] - b[0]).abs() < 1e-5 && (r[5] - b[1]).abs() < 1e-5,
            "{r:?}"
        );
        assert!(r[8].abs() < 1e-6 && (r[9] - 2.0).abs() < 1e-6);
        // Decode: 15° (cos 5° with b) merges into code 0 without moving it; 180° adds code 3.
        let before = cb.codes.clone();
        cb.extend(&at(15.0, 2.0));
        assert_eq!((cb.refs[6], &cb.codes), (0, &before));
        cb.extend(&at(180.0, 1.0));
        assert_eq!((cb.refs[7], cb.len()), (3, 4));
        // 4 codes × 2 dims × 4 bytes + 8 entries × (reference 4 + magnitude 4).
        assert_eq!(cb.bytes(), 32 + 64);
    }

    #[test]
    fn theta_one_keeps_every_vector() {
        let rows: Vec<f32> = [at(0.0, 1.0), at(0.0, 2.0), at(1.0, 1.0)].concat();
        let mut cb = Codebook::new(2, 1.0);
        cb.extend(&rows);
        assert_eq!(cb.len(), 3);
        for (a, b) in cb.reconstruct().iter().zip(&rows) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    fn rope_round_trip() {
        let mut rows = vec![0.3, -1.2, 0.5, 2.0, 1.0, 0.1, -0.4, 0.9];
        let orig = rows.clone();
        rotate_rows(&mut rows, &[7, 300], 4, 1e4, 1.0);
        rotate_rows(&mut rows, &[7, 300], 4, 1e4, -1.0);
        for (a, b) in rows.iter().zip(&orig) {
            assert!((a - b).abs() < 1e-5);
        }
    }
}
