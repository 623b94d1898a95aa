//! One real-text sample: a teacher-forced prefill observed twice — the row of generation step t
//! (TreeKV's signal) and the last q rows (PoD, funnel, sparsity) — plus pre-RoPE keys and values
//! (SpindleKV redundancy, the a∘V signal). Everything is reduced to per-sample figures here.

use burn::tensor::backend::Backend;
use kvplan_runtime::model::{Logits, ModelConfig};
use kvplan_runtime::observe::{LayerObservation, ObserveConfig, Observer};

use super::ProfileInputs;
use crate::analysis::funnel::funnel_of;
use crate::analysis::redundancy::{attention_sparsity, cosine_fraction};
use crate::analysis::similarity::layer_similarity;
use crate::analysis::wavelet::{detail_magnitudes, truncate_to_levels, Signal};
use crate::config::ProfileConfig;
use crate::partial::SampleOutcome;
use crate::samples::text_tokens;
use crate::Result;

/// Per-layer keys and values gathered over the forward calls: `[kv_head][token · head_dim]`.
struct LayerKv {
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

fn gather_kv(layer: &LayerObservation, cfg: &ModelConfig) -> LayerKv {
    let d = cfg.geometry.head_dim;
    let mut kv = LayerKv {
        keys: vec![Vec::new(); cfg.geometry.kv_heads],
        values: vec![Vec::new(); cfg.geometry.kv_heads],
    };
    for call in &layer.keys_values {
        let t = call.positions.len();
        for g in 0..cfg.geometry.kv_heads {
            kv.keys[g].extend_from_slice(&call.keys[g * t * d..(g + 1) * t * d]);
            kv.values[g].extend_from_slice(&call.values[g * t * d..(g + 1) * t * d]);
        }
    }
    kv
}

/// Wavelet figures of one layer: `([level] over heads and middle positions, [level][pos])`.
fn layer_wavelet(
    row_of: impl Fn(usize) -> (Vec<f32>, Vec<usize>),
    values: &[Vec<f32>],
    cfg: &ModelConfig,
    c: &ProfileConfig,
    step: usize,
) -> (Vec<f64>, Vec<Vec<f64>>, usize, usize) {
    let d = cfg.geometry.head_dim;
    let levels = c.wavelet_levels;
    let mut per_level = vec![0.0; levels];
    let mut by_pos: Vec<Vec<f64>> = Vec::new();
    let (mut dropped, mut edge) = (0, 0);
    for h in 0..cfg.geometry.q_heads {
        let (probs, keys) = row_of(h);
        let mut a = vec![0.0f64; step];
        for (&p, &x) in keys.iter().zip(&probs) {
            if p < step {
                a[p] = f64::from(x);
            }
        }
        let v = &values[cfg.kv_head_of(h)];
        let s: Signal = (0..step)
            .map(|t| {
                v[t * d..(t + 1) * d]
                    .iter()
                    .map(|&x| a[t] * f64::from(x))
                    .collect()
            })
            .collect();
        let (kept, drop) = truncate_to_levels(&s, levels);
        dropped = drop;
        let len = kept.len();
        edge = if len > 2 * c.wavelet_edge {
            c.wavelet_edge
        } else {
            0
        };
        let mags = detail_magnitudes(kept, levels);
        if by_pos.is_empty() {
            by_pos = vec![vec![0.0; len - 2 * edge]; levels];
        }
        for (l, m) in mags.iter().enumerate() {
            let mid = &m[edge..len - edge];
            per_level[l] += mid.iter().sum::<f64>() / mid.len().max(1) as f64;
            for (acc, x) in by_pos[l].iter_mut().zip(mid) {
                *acc += x;
            }
        }
    }
    let heads = cfg.geometry.q_heads as f64;
    per_level.iter_mut().for_each(|x| *x /= heads);
    by_pos.iter_mut().flatten().for_each(|x| *x /= heads);
    (per_level, by_pos, dropped, edge)
}

/// Accumulated-attention sparsity of one layer (SpindleKV eq. 3: mean over the window rows and
/// the query heads of each KV head), over the context keys every window row sees.
fn layer_sparsity(
    rows: &[Vec<Vec<f32>>],
    keys: &[Vec<usize>],
    cfg: &ModelConfig,
    ctx: usize,
    mass: f64,
) -> f64 {
    let mut total = 0.0;
    for (g, key_pos) in keys.iter().enumerate() {
        let mut ac = vec![0.0f64; ctx];
        let mut count = 0usize;
        for h in (0..cfg.geometry.q_heads).filter(|&h| cfg.kv_head_of(h) == g) {
            for row in &rows[h] {
                for (&p, &x) in key_pos.iter().zip(row) {
                    if p < ctx {
                        ac[p] += f64::from(x);
                    }
                }
                count += 1;
            }
        }
        ac.iter_mut().for_each(|x| *x /= count.max(1) as f64);
        total += attention_sparsity(&ac, mass);
    }
    total / keys.len().max(1) as f64
}

/// The observed prefill of one sample.
struct Observed {
    obs: Observer,
    /// Prompt tokens.
    n: usize,
    /// Generation step of the wavelet signal (TreeKV's t).
    step: usize,
    /// Whether step t had its own call (its row is the first observation's only row).
    two_calls: bool,
}

/// Two calls when there is room: the first ends at generation step t and records its last row;
/// the second records the last q rows. Otherwise one call, t = n.
fn observe<B: Backend>(inp: &ProfileInputs<'_, B>, ids: &[u32]) -> Result<Observed> {
    let (model, c) = (inp.model, &inp.config);
    let (n, q) = (ids.len(), c.observation_rows);
    let two_calls = c.wavelet_step < n && n - c.wavelet_step >= q;
    let step = if two_calls { c.wavelet_step } else { n };
    let obs_config = ObserveConfig {
        attn_rows: if two_calls { 1 } else { q },
        keys_values: true,
        ..ObserveConfig::default()
    };
    let mut obs = Observer::new(obs_config, model.config.geometry.layers);
    let mut cache = model.new_cache();
    if two_calls {
        model.forward(&ids[..step], &mut cache, Some(&mut obs), Logits::Last)?;
        obs.config.attn_rows = q;
        model.forward(&ids[step..], &mut cache, Some(&mut obs), Logits::Last)?;
    } else {
        model.forward(ids, &mut cache, Some(&mut obs), Logits::Last)?;
    }
    Ok(Observed {
        obs,
        n,
        step,
        two_calls,
    })
}

/// Adds `by_pos` (one layer's `[level][position]` wavelet magnitudes) to the layer mean.
fn add_layer_mean(acc: &mut Vec<Vec<f64>>, by_pos: &[Vec<f64>], layers: usize) {
    if acc.is_empty() {
        *acc = vec![vec![0.0; by_pos.first().map_or(0, Vec::len)]; by_pos.len()];
    }
    for (a, row) in acc.iter_mut().zip(by_pos) {
        a.iter_mut()
            .zip(row)
            .for_each(|(a, x)| *a += x / layers as f64);
    }
}

/// Reduces one layer's observation into `out` (wavelet, funnel, redundancy).
fn reduce_layer(
    layer: &LayerObservation,
    seen: &Observed,
    c: &ProfileConfig,
    cfg: &ModelConfig,
    out: &mut SampleOutcome,
) {
    let kv = gather_kv(layer, cfg);
    let first = &layer.attention[0];
    let window = layer.attention.last().unwrap_or(first);
    let row_of = |h: usize| {
        let rows = &first.probs[h];
        let r = if seen.two_calls { 0 } else { rows.len() - 1 };
        (
            rows[r].clone(),
            first.key_positions[cfg.kv_head_of(h)].clone(),
        )
    };
    let (w, by_pos, dropped, edge) = layer_wavelet(row_of, &kv.values, cfg, c, seen.step);
    out.wavelet.push(w);
    add_layer_mean(&mut out.wavelet_by_position, &by_pos, cfg.geometry.layers);
    (out.wavelet_dropped, out.wavelet_edge) = (dropped, edge);
    let flat: Vec<&[f32]> = window.probs.iter().flatten().map(Vec::as_slice).collect();
    out.funnel.push(funnel_of(&flat, c.funnel_top_k));
    let context = seen.n - c.observation_rows;
    let sparsity = layer_sparsity(
        &window.probs,
        &window.key_positions,
        cfg,
        context,
        c.sparsity_mass,
    );
    let (d, r_tokens) = (cfg.geometry.head_dim, c.redundancy_tokens.min(seen.n));
    let frac = |xs: &[Vec<f32>], theta: f64| {
        xs.iter()
            .map(|x| cosine_fraction(&x[..r_tokens * d], d, theta))
            .sum::<f64>()
            / xs.len() as f64
    };
    out.redundancy.push((
        frac(&kv.keys, c.theta_k),
        frac(&kv.values, c.theta_v),
        sparsity,
    ));
}

/// Runs text sample `index` and reduces it.
pub(super) fn run_sample<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    index: usize,
    seed: u64,
) -> Result<SampleOutcome> {
    let (c, cfg) = (&inp.config, &inp.model.config);
    let corpus = inp.texts[index % inp.texts.len()];
    // BOS first when the tokenizer adds one (Gemma's attention leans on it as a sink).
    let bos: Vec<u32> = inp.tokenizer.bos_id().into_iter().collect();
    let text = text_tokens(
        inp.tokenizer,
        corpus,
        seed,
        c.sample_tokens - bos.len(),
        true,
    )?;
    let ids = [bos, text].concat();
    let mut seen = observe(inp, &ids)?;
    let mut out = SampleOutcome {
        index,
        similarity: Vec::new(),
        wavelet: Vec::new(),
        wavelet_by_position: Vec::new(),
        wavelet_step: seen.step,
        wavelet_dropped: 0,
        wavelet_edge: 0,
        funnel: Vec::new(),
        redundancy: Vec::new(),
    };
    let mut layers = std::mem::take(&mut seen.obs.layers);
    let mut window_rows = Vec::with_capacity(layers.len());
    for layer in &mut layers {
        reduce_layer(layer, &seen, c, cfg, &mut out);
        // The observation window's rows `[q_head][row][key]` go to the layer similarity; the
        // rest of the layer's (large) observation is freed once reduced.
        let window = layer.attention.pop().map(|a| a.probs).unwrap_or_default();
        window_rows.push(window);
        *layer = LayerObservation::default();
    }
    out.similarity = layer_similarity(&window_rows);
    Ok(out)
}
