//! Rotary position embedding (RoPE, Su et al. 2021, eq. 34), in the rotate-half convention of
//! Hugging Face transformers — the one module every rotation of the runtime goes through: the
//! model's forward pass (burn tensors, [`Rope::apply`]), the fused CPU attention kernel
//! ([`rotate_half_scaled`] over [`Rope::host_tables`]), and the presses that rotate host rows
//! (SpindleKV's pre-RoPE keys, PoD's queries and keys, [`Frequencies::rotate_rows`]) or move
//! entries to new positions (TreeKV, StreamingLLM, [`Frequencies::shift_rows`]).
//!
//! The loader ([`super::loader`]) un-permutes the rows of `attn_q`/`attn_k` from llama.cpp's
//! interleaved order into Hugging Face's order, so dimension `j < d/2` pairs with `j + d/2`:
//! `out = x·cos + rotate_half(x)·sin`, `rotate_half(x) = [−x₂, x₁]`, angle `pos · base^(−2j/d)`.
//!
//! **Per-layer bases.** A model may rotate its layers at different bases (Gemma 3: 10,000 on its
//! sliding-window layers, 10⁶ on the global ones), so frequencies are kept per layer
//! ([`RopeSet`]) and tables per distinct base ([`Rope`]); every caller names the layer.
//!
//! **Scaling** ([`RopeScaling`]), as llama.cpp's `ggml_rope_ext` and transformers'
//! `modeling_rope_utils.py` compute it: `linear` divides every frequency by the factor (positions
//! interpolated); Llama 3's `rope_freqs.weight` divides frequency `j` by its own factor (the
//! converter writes `_compute_llama3_parameters`' ratios); YaRN (Peng et al. 2023, "YaRN:
//! Efficient Context Window Extension", its "NTK-by-parts" interpolation and attention temperature
//! `√(1/t) = 0.1·ln(s) + 1`; transformers `_compute_yarn_parameters`, llama.cpp `rope_yarn` and
//! `ggml_rope_yarn_corr_dims`) blends interpolated and original frequencies by a ramp over the
//! dimensions between the correction dimensions of `beta_fast` and `beta_slow` and multiplies cos
//! and sin by `attn_factor · (0.1·ln(factor) + 1)`, so queries and keys each carry that factor.
//! A layer without RoPE (SmolLM3's NoPE layers) has [`Frequencies::none`]: every rotation is the
//! identity.
//!
//! **Arithmetic order** (outputs depend on it, the parity fixtures and committed plans too):
//! the inverse frequency `base^(−2j/d)` is computed in f64 and cast to f32, as transformers keeps
//! `inv_freq` in float32 (huggingface/transformers @ ef46806,
//! `src/transformers/modeling_rope_utils.py`, `_compute_default_rope_parameters`); the angle is
//! `pos as f32 · inv_freq` in f32.

use std::sync::{OnceLock, PoisonError, RwLock, RwLockReadGuard};

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// How a file scales its RoPE frequencies (GGUF `rope.scaling.*`, `rope_freqs.weight`).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub enum RopeScaling {
    /// `base^(−2j/d)` as it is.
    #[default]
    None,
    /// Every frequency divided by `factor` (`rope.scaling.type = linear`).
    Linear {
        /// `rope.scaling.factor`.
        factor: f64,
    },
    /// Frequency `j` divided by `factors[j]` (`rope_freqs.weight`: Llama 3.x's `llama3` type).
    FreqFactors {
        /// One factor per rotated pair, `head_dim / 2`.
        factors: Vec<f32>,
    },
    /// YaRN (`rope.scaling.type = yarn`).
    Yarn {
        /// `rope.scaling.factor`.
        factor: f64,
        /// `rope.scaling.original_context_length`.
        original_context: usize,
        /// `rope.scaling.yarn_beta_fast` (32 by default).
        beta_fast: f64,
        /// `rope.scaling.yarn_beta_slow` (1 by default).
        beta_slow: f64,
        /// `rope.scaling.yarn_attn_factor` (1 by default), times `0.1·ln(factor) + 1`.
        attn_factor: f64,
    },
    /// Phi-3's LongRoPE (`rope_factors_short.weight`, `rope_factors_long.weight`): frequency `j`
    /// divided by `short[j]` while a forward call ends at or before `original_context`, by
    /// `long[j]` when it ends past it (transformers' `longrope_frequency_update`); cos and sin
    /// carry `attn_factor` either way.
    LongRope {
        /// One factor per rotated pair, for sequences within the original context.
        short: Vec<f32>,
        /// One factor per rotated pair, past it.
        long: Vec<f32>,
        /// `rope.scaling.original_context_length`.
        original_context: usize,
        /// `rope.scaling.attn_factor`, or `√(1 + ln(context / original) / ln(original))`.
        attn_factor: f64,
    },
}

impl RopeScaling {
    /// The length past which the frequencies change (LongRoPE's original context), `None`
    /// where they do not depend on the length.
    pub fn switches_after(&self) -> Option<usize> {
        match self {
            Self::LongRope {
                original_context, ..
            } => Some(*original_context),
            _ => None,
        }
    }
}

/// Inverse frequencies `base^(−2j/d)`, `j < d/2`, of one RoPE base, as scaled.
#[derive(Debug, Clone)]
pub struct Frequencies {
    base: f64,
    head_dim: usize,
    inv_freq: Vec<f32>,
    /// Factor on cos and sin (YaRN's attention factor; 1 otherwise).
    attn_factor: f32,
    /// False for a layer without RoPE: every rotation is the identity.
    rotates: bool,
    /// `(cos, sin)` of every angle [`Self::rotate_rows`] has met, grown on demand.
    angles: Angles,
}

impl PartialEq for Frequencies {
    /// Equal bases and dimensions (the angle table is a cache of them).
    fn eq(&self, other: &Self) -> bool {
        (
            self.base,
            self.head_dim,
            &self.inv_freq,
            self.attn_factor,
            self.rotates,
        ) == (
            other.base,
            other.head_dim,
            &other.inv_freq,
            other.attn_factor,
            other.rotates,
        )
    }
}

/// `cos` and `sin` of `pos as f32 · inv_freq[j]`, `[positions][d/2]` each, for the positions
/// `0..len`: the values [`Frequencies::rotate_row`] computes, computed once per position rather
/// than once per row and call (SpindleKV rotates every entry of every codebook layer each decode
/// step: the sines were a tenth of a 4K RULER run's time).
#[derive(Debug, Default)]
struct Angles(RwLock<(Vec<f32>, Vec<f32>)>);

impl Clone for Angles {
    /// An empty table: a clone fills its own.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl Frequencies {
    /// The frequencies of `base` for heads of `head_dim` (even) dimensions.
    pub fn new(head_dim: usize, base: f64) -> Self {
        let inv_freq = (0..head_dim / 2)
            .map(|j| (1.0 / base.powf(2.0 * j as f64 / head_dim as f64)) as f32)
            .collect();
        Self {
            base,
            head_dim,
            inv_freq,
            attn_factor: 1.0,
            rotates: true,
            angles: Angles::default(),
        }
    }

    /// The frequencies of `base` scaled as `scaling` says, for calls ending within the original
    /// context ([`Self::scaled_at`]).
    pub fn scaled(head_dim: usize, base: f64, scaling: &RopeScaling) -> Self {
        Self::scaled_at(head_dim, base, scaling, 0)
    }

    /// The frequencies of `base` scaled as `scaling` says for a forward call whose positions end
    /// at `end` (exclusive): only LongRoPE depends on it.
    pub fn scaled_at(head_dim: usize, base: f64, scaling: &RopeScaling, end: usize) -> Self {
        let plain = Self::new(head_dim, base);
        let d = head_dim as f64;
        let (inv_freq, attn_factor) = match scaling {
            RopeScaling::None => return plain,
            RopeScaling::Linear { factor } => (
                (0..head_dim / 2)
                    .map(|j| (base.powf(-2.0 * j as f64 / d) / factor) as f32)
                    .collect(),
                1.0,
            ),
            RopeScaling::FreqFactors { factors } => (divided(&plain.inv_freq, factors), 1.0),
            RopeScaling::LongRope {
                short,
                long,
                original_context,
                attn_factor,
            } => {
                let factors = if end > *original_context { long } else { short };
                (divided(&plain.inv_freq, factors), *attn_factor as f32)
            }
            RopeScaling::Yarn {
                factor,
                original_context,
                beta_fast,
                beta_slow,
                attn_factor,
            } => {
                // The dimension whose frequency turns `rotations` times over the original
                // context (`ggml_rope_yarn_corr_dim`, transformers `find_correction_dim`).
                let corr = |rotations: f64| {
                    d * (*original_context as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln()
                        / (2.0 * base.ln())
                };
                let low = corr(*beta_fast).floor().max(0.0);
                let high = corr(*beta_slow).ceil().min(d - 1.0);
                let span = if high == low { 0.001 } else { high - low };
                let inv = (0..head_dim / 2)
                    .map(|j| {
                        let extrapolated = base.powf(-2.0 * j as f64 / d);
                        let interpolated = extrapolated / factor;
                        // 0 below `low` (original frequency), 1 above `high` (interpolated).
                        let ramp = ((j as f64 - low) / span).clamp(0.0, 1.0);
                        (interpolated * ramp + extrapolated * (1.0 - ramp)) as f32
                    })
                    .collect();
                let mscale = if *factor > 1.0 {
                    0.1 * factor.ln() + 1.0
                } else {
                    1.0
                };
                (inv, (attn_factor * mscale) as f32)
            }
        };
        Self {
            inv_freq,
            attn_factor,
            ..plain
        }
    }

    /// A layer without RoPE (its file's `base` recorded, never used): every rotation is the
    /// identity.
    pub fn none(head_dim: usize, base: f64) -> Self {
        Self {
            rotates: false,
            ..Self::new(head_dim, base)
        }
    }

    /// Whether the layer rotates at all (false for a NoPE layer).
    pub fn rotates(&self) -> bool {
        self.rotates
    }

    /// The factor on cos and sin (YaRN's attention factor), 1 without one.
    pub fn attn_factor(&self) -> f32 {
        self.attn_factor
    }

    /// The RoPE base θ.
    pub fn base(&self) -> f64 {
        self.base
    }

    /// Dimensions of one head.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// `inv_freq[j]`, `j < head_dim / 2`, as f32.
    pub fn inv_freq(&self) -> &[f32] {
        &self.inv_freq
    }

    /// Rotates one head vector by `sign × angle(offset)`, `angle_j = offset · inv_freq[j]`.
    fn rotate_row(&self, row: &mut [f32], offset: f32, sign: f32) {
        if !self.rotates {
            return;
        }
        let angles = self.inv_freq.iter().map(|f| {
            let (sin, cos) = (offset * f).sin_cos();
            (cos, sin)
        });
        turn(row, angles, sign);
    }

    /// Rotates rows (one head vector each) by `sign ×` their position's angle: `sign = 1`
    /// applies RoPE to pre-RoPE vectors (times the attention factor, as the model's tables),
    /// `−1` removes it.
    ///
    /// # Shapes
    /// - rows: `[positions.len()][head_dim]` row-major, rotated in place
    pub fn rotate_rows(&self, rows: &mut [f32], positions: &[usize], sign: f32) {
        if !self.rotates {
            return;
        }
        let Some(&last) = positions.iter().max() else {
            return;
        };
        if self.attn_factor != 1.0 && sign < 0.0 {
            let inv = 1.0 / self.attn_factor;
            rows.iter_mut().for_each(|x| *x *= inv);
        }
        let half = self.head_dim / 2;
        let table = self.angles_upto(last + 1);
        let (cos, sin) = &*table;
        for (row, &p) in rows.chunks_exact_mut(self.head_dim).zip(positions) {
            let at = p * half..(p + 1) * half;
            let angles = cos[at.clone()].iter().copied().zip(sin[at].iter().copied());
            turn(row, angles, sign);
        }
        if self.attn_factor != 1.0 && sign > 0.0 {
            rows.iter_mut().for_each(|x| *x *= self.attn_factor);
        }
    }

    /// The angle table holding at least the positions `0..n` (grown to twice its length or `n`,
    /// whichever is more, when it holds fewer).
    fn angles_upto(&self, n: usize) -> RwLockReadGuard<'_, (Vec<f32>, Vec<f32>)> {
        let half = self.head_dim / 2;
        let lock = &self.angles.0;
        {
            let table = lock.read().unwrap_or_else(PoisonError::into_inner);
            if table.0.len() >= n * half {
                return table;
            }
        }
        {
            let mut table = lock.write().unwrap_or_else(PoisonError::into_inner);
            let have = table.0.len() / half.max(1);
            if have < n {
                let to = n.max(2 * have);
                let (cos, sin) = &mut *table;
                for p in have..to {
                    for f in &self.inv_freq {
                        let (s, c) = (p as f32 * f).sin_cos();
                        cos.push(c);
                        sin.push(s);
                    }
                }
            }
        }
        lock.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves rotated rows from positions `from` to positions `to`: each row turns by the angle of
    /// `to − from` (RoPE is a rotation, so this equals rotating the pre-RoPE row at `to`).
    ///
    /// # Shapes
    /// - rows: `[from.len()][head_dim]` row-major, `to`: as many positions, rotated in place
    pub fn shift_rows(&self, rows: &mut [f32], from: &[usize], to: &[usize]) {
        let rows = rows.chunks_exact_mut(self.head_dim);
        for ((row, &old), &new) in rows.zip(from).zip(to) {
            let delta = new as f32 - old as f32;
            if delta != 0.0 {
                self.rotate_row(row, delta, 1.0);
            }
        }
    }

    /// cos and sin tables `[max_positions][head_dim]` (each half repeated, rotate-half order),
    /// times the attention factor; cos 1 and sin 0 for a layer without RoPE.
    fn tables(&self, max_positions: usize) -> (Vec<f32>, Vec<f32>) {
        let n = max_positions * self.head_dim;
        if !self.rotates {
            return (vec![1.0; n], vec![0.0; n]);
        }
        let mut cos = Vec::with_capacity(n);
        let mut sin = Vec::with_capacity(n);
        let m = self.attn_factor;
        for pos in 0..max_positions {
            for _ in 0..2 {
                for f in &self.inv_freq {
                    let angle = pos as f32 * f;
                    if m == 1.0 {
                        cos.push(angle.cos());
                        sin.push(angle.sin());
                    } else {
                        cos.push(angle.cos() * m);
                        sin.push(angle.sin() * m);
                    }
                }
            }
        }
        (cos, sin)
    }
}

/// `inv_freq[j] / factors[j]` in f32 (llama.cpp's `theta / freq_factors[i]`).
fn divided(inv_freq: &[f32], factors: &[f32]) -> Vec<f32> {
    inv_freq.iter().zip(factors).map(|(f, s)| f / s).collect()
}

/// Turns each pair `(row[j], row[j + d/2])` of one head vector by the angle whose cosine and sine
/// `angles` gives for `j`, the sine times `sign` (rotate-half order): the one formula of every
/// host rotation, so the table path and the direct one compute the same bits.
#[inline]
fn turn(row: &mut [f32], angles: impl Iterator<Item = (f32, f32)>, sign: f32) {
    let (lo, hi) = row.split_at_mut(row.len() / 2);
    for ((a, b), (cos, sin)) in lo.iter_mut().zip(hi).zip(angles) {
        let sin = sign * sin;
        let (x, y) = (*a, *b);
        *a = x * cos - y * sin;
        *b = y * cos + x * sin;
    }
}

/// The RoPE frequencies of every layer of a model (host only, no tensors).
#[derive(Debug, Clone, PartialEq)]
pub struct RopeSet {
    layers: Vec<Frequencies>,
}

impl RopeSet {
    /// `layers` layers all rotating at `base`.
    pub fn uniform(head_dim: usize, base: f64, layers: usize) -> Self {
        Self::per_layer(head_dim, &vec![base; layers])
    }

    /// One layer per entry of `layers`.
    pub fn new(layers: Vec<Frequencies>) -> Self {
        Self { layers }
    }

    /// One layer per entry of `bases`, each rotating at its own base.
    pub fn per_layer(head_dim: usize, bases: &[f64]) -> Self {
        Self {
            layers: bases
                .iter()
                .map(|&b| Frequencies::new(head_dim, b))
                .collect(),
        }
    }

    /// The frequencies of `layer`.
    ///
    /// # Panics
    /// When `layer` is not a layer of the set (a caller's bug, not an input error).
    pub fn layer(&self, layer: usize) -> &Frequencies {
        &self.layers[layer]
    }

    /// Number of layers.
    pub fn n_layers(&self) -> usize {
        self.layers.len()
    }
}

/// cos/sin tables of one frequency set, on the host, and on the device once a burn-ops path asks
/// for them (the CPU backend's host kernel never does: at a 128K context and `head_dim` 128 the
/// device copy would be another 128 MiB).
#[derive(Debug, Clone)]
struct Tables<B: Backend> {
    freqs: Frequencies,
    /// `[max_positions, head_dim]` each (cos, sin), made from the host tables on first use.
    device: OnceLock<(Tensor<B, 2>, Tensor<B, 2>)>,
    device_at: B::Device,
    /// `[max_positions][head_dim]`.
    cos_host: Vec<f32>,
    /// `[max_positions][head_dim]`.
    sin_host: Vec<f32>,
}

impl<B: Backend> Tables<B> {
    fn new(freqs: &Frequencies, max_positions: usize, device: &B::Device) -> Self {
        let (cos, sin) = freqs.tables(max_positions);
        Self {
            freqs: freqs.clone(),
            device: OnceLock::new(),
            device_at: device.clone(),
            cos_host: cos,
            sin_host: sin,
        }
    }

    /// The tables on the device.
    fn on_device(&self) -> &(Tensor<B, 2>, Tensor<B, 2>) {
        self.device.get_or_init(|| {
            let d = self.freqs.head_dim();
            let shape = [self.cos_host.len() / d.max(1), d];
            let up = |v: &Vec<f32>| {
                Tensor::from_data(TensorData::new(v.clone(), shape), &self.device_at)
            };
            (up(&self.cos_host), up(&self.sin_host))
        })
    }
}

/// Precomputed cos/sin tables for positions `0..max_positions`, one per distinct frequency set, and which
/// table each layer uses.
#[derive(Debug, Clone)]
pub struct Rope<B: Backend> {
    tables: Vec<Tables<B>>,
    /// `layer_table[l]`: index into `tables`; empty when one table serves every layer.
    layer_table: Vec<usize>,
    max_positions: usize,
    head_dim: usize,
}

impl<B: Backend> Rope<B> {
    /// Tables for `head_dim` (even) and one base `theta` that every layer uses.
    pub fn new(head_dim: usize, theta: f64, max_positions: usize, device: &B::Device) -> Self {
        Self {
            tables: vec![Tables::new(
                &Frequencies::new(head_dim, theta),
                max_positions,
                device,
            )],
            layer_table: Vec::new(),
            max_positions,
            head_dim,
        }
    }

    /// Tables for the layers of `set`, one per distinct frequency set.
    pub fn from_set(set: &RopeSet, max_positions: usize, device: &B::Device) -> Self {
        let mut tables: Vec<Tables<B>> = Vec::new();
        let mut layer_table = Vec::with_capacity(set.n_layers());
        for l in 0..set.n_layers() {
            let freqs = set.layer(l);
            let at = match tables.iter().position(|t| t.freqs == *freqs) {
                Some(at) => at,
                None => {
                    tables.push(Tables::new(freqs, max_positions, device));
                    tables.len() - 1
                }
            };
            layer_table.push(at);
        }
        Self {
            tables,
            layer_table,
            max_positions,
            head_dim: set.layers.first().map_or(0, Frequencies::head_dim),
        }
    }

    fn table(&self, layer: usize) -> &Tables<B> {
        if self.layer_table.is_empty() {
            &self.tables[0]
        } else {
            &self.tables[self.layer_table[layer]]
        }
    }

    /// Largest position + 1 the tables cover.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The tables of `layer` on the host, `[max_positions][head_dim]` row-major (cos, sin).
    pub fn host_tables(&self, layer: usize) -> (&[f32], &[f32]) {
        let t = self.table(layer);
        (&t.cos_host, &t.sin_host)
    }

    /// Rotates `x` by the angles of `positions` at `layer`'s base.
    ///
    /// # Shapes
    /// - x: `[heads, t, head_dim]`, positions: `[t]` → `[heads, t, head_dim]`
    pub fn apply(
        &self,
        layer: usize,
        x: Tensor<B, 3>,
        positions: Tensor<B, 1, Int>,
    ) -> Tensor<B, 3> {
        let half = self.head_dim / 2;
        let (cos, sin) = self.table(layer).on_device();
        let cos = cos.clone().select(0, positions.clone()).unsqueeze_dim(0); // [1, t, d]
        let sin = sin.clone().select(0, positions).unsqueeze_dim(0); // [1, t, d]
        let x1 = x.clone().narrow(2, 0, half); // [heads, t, d/2]
        let x2 = x.clone().narrow(2, half, half); // [heads, t, d/2]
        let rotated = Tensor::cat(vec![x2.neg(), x1], 2);
        x * cos + rotated * sin
    }
}

/// Rotates one head vector with table rows `cos`, `sin` of its position and scales it:
/// `out = (x·cos + rotate_half(x)·sin) · scale` (the host kernel's query scale folded in).
///
/// # Shapes
/// - x, cos, sin, out: `[head_dim]`
pub fn rotate_half_scaled(x: &[f32], cos: &[f32], sin: &[f32], scale: f32, out: &mut [f32]) {
    let half = x.len() / 2;
    for j in 0..half {
        out[j] = (x[j] * cos[j] - x[j + half] * sin[j]) * scale;
        out[j + half] = (x[j + half] * cos[j + half] + x[j] * sin[j + half]) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
    }

    #[test]
    fn inverse_frequencies_by_hand() {
        // d = 4, base 100: 100^0 = 1, 100^(−2/4) = 0.1.
        let f = Frequencies::new(4, 100.0);
        assert_eq!(f.inv_freq(), &[1.0, 0.1]);
    }

    #[test]
    fn scaled_frequencies_by_hand() {
        // d = 4, base 100: plain [1, 0.1].
        let linear = Frequencies::scaled(4, 100.0, &RopeScaling::Linear { factor: 2.0 });
        assert_eq!(linear.inv_freq(), &[0.5, 0.05]);
        let factors = RopeScaling::FreqFactors {
            factors: vec![1.0, 4.0],
        };
        assert_eq!(
            Frequencies::scaled(4, 100.0, &factors).inv_freq(),
            &[1.0, 0.025]
        );
        // YaRN, d = 8, base 10⁴, original context 64, factor 4, β 32 / 1: the correction
        // dimensions are 8·ln(64/(32·2π))/(2·ln 10⁴) = −0.497 → 0 and 8·ln(64/2π)/(2·ln 10⁴) =
        // 1.008 → 2, so the ramp over pairs 0..4 is [0, ½, 1, 1]: pair 0 keeps 1, pair 1 blends
        // 0.1 and 0.025 half and half (0.0625), pairs 2 and 3 are interpolated (0.01/4,
        // 0.001/4); cos and sin carry 0.1·ln 4 + 1.
        let yarn = RopeScaling::Yarn {
            factor: 4.0,
            original_context: 64,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attn_factor: 1.0,
        };
        let f = Frequencies::scaled(8, 1e4, &yarn);
        let want = [1.0, 0.0625, 0.0025, 0.00025];
        assert!(close(f.inv_freq(), &want, 1e-9), "{:?}", f.inv_freq());
        let m = (0.1 * 4f64.ln() + 1.0) as f32;
        assert_eq!(f.attn_factor(), m);
        // Rotating at position 0 only scales; removing RoPE undoes it; a shift stays a rotation.
        let mut row = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let orig = row.clone();
        f.rotate_rows(&mut row, &[0], 1.0);
        let scaled: Vec<f32> = orig.iter().map(|x| x * m).collect();
        assert!(close(&row, &scaled, 1e-6));
        f.rotate_rows(&mut row, &[0], -1.0);
        assert!(close(&row, &orig, 1e-6));
        let norm = |r: &[f32]| r.iter().map(|x| x * x).sum::<f32>().sqrt();
        f.shift_rows(&mut row, &[0], &[9]);
        assert!((norm(&row) - norm(&orig)).abs() < 1e-4);
        let (cos, sin) = f.tables(2);
        assert!(
            (cos[0] - m).abs() < 1e-7 && sin[0] == 0.0 && (cos[8] - 1f32.cos() * m).abs() < 1e-6
        );
    }

    #[test]
    fn a_layer_without_rope_turns_nothing() {
        let f = Frequencies::none(4, 1e4);
        let mut row = vec![0.3, -1.2, 0.5, 2.0];
        let orig = row.clone();
        f.rotate_rows(&mut row, &[17], 1.0);
        f.shift_rows(&mut row, &[17], &[3]);
        assert_eq!(row, orig);
        let (cos, sin) = f.tables(3);
        assert!(cos.iter().all(|&c| c == 1.0) && sin.iter().all(|&s| s == 0.0));
        // Its tables are its own, apart from a plain layer's.
        let set = RopeSet::new(vec![Frequencies::new(4, 1e4), Frequencies::none(4, 1e4)]);
        let rope = Rope::<Flex>::from_set(&set, 4, &Default::default());
        assert_eq!(rope.tables.len(), 2);
    }

    #[test]
    fn rotates_a_small_vector_by_known_angles() {
        // d = 4, base 100, position 1: pair (x0, x2) = (1, 0) turns by 1 rad → (cos 1, sin 1);
        // pair (x1, x3) = (0, 2) by 0.1 rad → (−2·sin 0.1, 2·cos 0.1).
        let f = Frequencies::new(4, 100.0);
        let mut row = vec![1.0, 0.0, 0.0, 2.0];
        f.rotate_rows(&mut row, &[1], 1.0);
        let want = [
            1f32.cos(),
            -2.0 * 0.1f32.sin(),
            1f32.sin(),
            2.0 * 0.1f32.cos(),
        ];
        assert!(close(&row, &want, 1e-6), "{row:?} vs {want:?}");
    }

    #[test]
    fn rotate_then_unrotate_is_identity() {
        let f = Frequencies::new(4, 1e4);
        let mut rows = vec![0.3, -1.2, 0.5, 2.0, 1.0, 0.1, -0.4, 0.9];
        let orig = rows.clone();
        f.rotate_rows(&mut rows, &[7, 300], 1.0);
        assert!(!close(&rows, &orig, 1e-3), "rotation moved nothing");
        f.rotate_rows(&mut rows, &[7, 300], -1.0);
        assert!(close(&rows, &orig, 1e-5), "{rows:?} vs {orig:?}");
    }

    #[test]
    fn the_angle_table_gives_the_direct_rotation_bit_for_bit() {
        // Positions out of order, repeated, and past the first table (3 positions, then 4,001):
        // each row equals the rotation with `sin_cos` taken at its own angle, bit for bit, as
        // the committed results need; a clone starts empty and agrees too.
        let f = Frequencies::new(8, 1e4);
        let positions = [2, 0, 2, 5, 4000, 1, 4000, 3999];
        let pre: Vec<f32> = (0..8 * positions.len())
            .map(|i| (i as f32 * 0.61).cos() * 3.0)
            .collect();
        for sign in [1.0, -1.0] {
            let mut direct = pre.clone();
            for (row, &p) in direct.chunks_exact_mut(8).zip(&positions) {
                f.rotate_row(row, p as f32, sign);
            }
            let mut tabled = pre.clone();
            f.rotate_rows(&mut tabled[..24], &positions[..3], sign);
            f.rotate_rows(&mut tabled[24..], &positions[3..], sign);
            assert_eq!(tabled, direct, "sign {sign}");
            let mut cloned = pre.clone();
            f.clone().rotate_rows(&mut cloned, &positions, sign);
            assert_eq!(cloned, direct, "clone, sign {sign}");
        }
        assert_eq!(f.angles.0.read().unwrap().0.len(), 4001 * 4);
        assert_eq!(f, f.clone());
    }

    #[test]
    fn shift_equals_rotating_at_the_new_position() {
        let f = Frequencies::new(8, 1e4);
        let pre: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut moved = pre.clone();
        f.rotate_rows(&mut moved, &[5, 40], 1.0);
        f.shift_rows(&mut moved, &[5, 40], &[1, 2]);
        let mut direct = pre;
        f.rotate_rows(&mut direct, &[1, 2], 1.0);
        assert!(close(&moved, &direct, 1e-5), "{moved:?} vs {direct:?}");
    }

    #[test]
    fn tensor_and_host_rotations_agree() {
        // Position 3 at base 100, d = 4: the burn path, the host kernel's table path and the row
        // rotation give the same vector.
        let dev = Default::default();
        let rope = Rope::<Flex>::new(4, 100.0, 8, &dev);
        let x = vec![0.5f32, -1.0, 2.0, 0.25];
        let xt = Tensor::<Flex, 3>::from_data(TensorData::new(x.clone(), [1, 1, 4]), &dev);
        let pos = Tensor::from_data(TensorData::new(vec![3i64], [1]), &dev);
        let burn: Vec<f32> = rope.apply(0, xt, pos).into_data().iter::<f32>().collect();
        let (cos, sin) = rope.host_tables(0);
        let mut host = vec![0f32; 4];
        rotate_half_scaled(&x, &cos[12..16], &sin[12..16], 1.0, &mut host);
        let mut rows = x;
        Frequencies::new(4, 100.0).rotate_rows(&mut rows, &[3], 1.0);
        assert!(close(&burn, &host, 1e-6) && close(&host, &rows, 1e-6));
    }

    #[test]
    fn each_layer_uses_its_own_base() {
        // Layers 0 and 2 at base 100, layer 1 at base 10⁴: two tables; at d = 4 pair (1, 3)
        // turns by pos·0.1 on layers 0, 2 and by pos·0.01 on layer 1.
        let set = RopeSet::per_layer(4, &[100.0, 1e4, 100.0]);
        let rope = Rope::<Flex>::from_set(&set, 4, &Default::default());
        assert_eq!(rope.tables.len(), 2);
        let (_, sin0) = rope.host_tables(0);
        let (_, sin1) = rope.host_tables(1);
        let (_, sin2) = rope.host_tables(2);
        // Position 2, j = 1: sin(0.2) vs sin(0.02).
        assert!((sin0[2 * 4 + 1] - 0.2f32.sin()).abs() < 1e-7);
        assert!((sin1[2 * 4 + 1] - 0.02f32.sin()).abs() < 1e-7);
        assert_eq!(sin0, sin2);
        assert_eq!(set.layer(1).base(), 1e4);
    }
}
