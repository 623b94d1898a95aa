//! Sliding-window layers under a press (Gemma 3's local layers; docs/design.md "Sliding-window
//! layers"). Such a layer holds exactly its last `window` positions, as the model's mask reads
//! them, and counts at its window in FullKV; no press may evict there or move its positions,
//! whatever budget its plan gives the layer.
//!
//! [`Session`](super::Session) enforces this for every press at once, FullKV included: after each
//! forward call it drops what left each window ([`slide`]); around each press hook it
//! parks the windowed layers ([`park`]), leaving in their slots empty layers of the same heads and
//! window, so a press sees — and spends its budget on — the global layers only; the observers it
//! builds record global layers only ([`observe_global`], [`global_observations`]). A press with its
//! own forward pass and per-layer state (SpindleKV's codebooks) leaves the parked slots alone
//! ([`LayerCache::window`] tells it).
//!
//! **Positions.** When a press re-assigns positions (the stream reached the model's context;
//! TreeKV after each eviction, §4.1), global layers move to `0..len` and the next position drops.
//! A windowed layer keeps its original spacing: its run moves as a whole so that it ends just
//! before the next position ([`follow`]). Every key turns by the same angle, so the layer's
//! attention is unchanged (RoPE scores depend only on the distance between query and key) and
//! the next query is exactly as far from each key as without re-assignment. When the global
//! layers hold fewer entries than a windowed run spans, the next position is raised to that span
//! (positions are never negative) and the global layers move up as a whole by the same amount —
//! again one angle per layer, so each keeps its positions-within-the-cache distances and its
//! newest entry stays just before the next query.

use std::borrow::Cow;

use burn::tensor::backend::Backend;

use super::move_layer;
use crate::cache::{KvCache, LayerCache};
use crate::model::rope::RopeSet;
use crate::observe::{LayerObservation, ObserveConfig, Observer};

/// `config` restricted to the layers without a window (`windows[l]`: layer `l`'s window), within
/// any layer filter it already has.
pub fn observe_global(mut config: ObserveConfig, windows: &[Option<usize>]) -> ObserveConfig {
    if windows.iter().all(Option::is_none) {
        return config;
    }
    let global = (0..windows.len()).filter(|&l| windows[l].is_none());
    let wanted = |l: &usize| config.layers.as_ref().is_none_or(|ls| ls.contains(l));
    config.layers = Some(global.filter(wanted).collect());
    config
}

/// `obs` without the records of windowed layers (borrowed when it holds none), for a press
/// adopting a prefill that another observer recorded.
pub fn global_observations<'o>(obs: &'o Observer, windows: &[Option<usize>]) -> Cow<'o, Observer> {
    let windowed = |l: usize| windows.get(l).copied().flatten().is_some();
    let empty = LayerObservation::default();
    if (0..obs.layers.len()).all(|l| !windowed(l) || obs.layers[l] == empty) {
        return Cow::Borrowed(obs);
    }
    let mut stripped = obs.clone();
    for (l, o) in stripped.layers.iter_mut().enumerate() {
        if windowed(l) {
            *o = LayerObservation::default();
        }
    }
    Cow::Owned(stripped)
}

/// Keeps each layer of `cache` at its window (`windows[l]`, [`LayerCache::slide`]), recording
/// the window in the layer. A global layer whose cache already records a window (an engine's
/// layer classes, [`super::classes`]) keeps sliding at it.
pub fn slide<B: Backend>(cache: &mut KvCache<B>, windows: &[Option<usize>]) {
    for (layer, &w) in cache.layers.iter_mut().zip(windows) {
        let w = w.or(layer.window());
        layer.slide(w);
    }
}

/// Windowed layers taken out of a cache while a press runs.
#[derive(Debug)]
pub struct Parked<B: Backend> {
    layers: Vec<(usize, LayerCache<B>)>,
}

/// Takes every windowed layer out of `cache`, leaving an empty layer with the same heads, head
/// dimension and window in its slot.
pub fn park<B: Backend>(cache: &mut KvCache<B>) -> Parked<B> {
    let mut layers = Vec::new();
    for (l, layer) in cache.layers.iter_mut().enumerate() {
        if layer.window().is_some() {
            let empty =
                LayerCache::new(layer.kv_heads(), layer.head_dim()).with_window(layer.window());
            layers.push((l, std::mem::replace(layer, empty)));
        }
    }
    Parked { layers }
}

/// Puts the parked layers back and, if the press re-assigned positions meanwhile, moves them to
/// follow ([`follow`]).
pub fn unpark<B: Backend>(cache: &mut KvCache<B>, parked: Parked<B>, rope: &RopeSet) {
    for (l, layer) in parked.layers {
        cache.layers[l] = layer;
    }
    follow(cache, rope);
}

/// Moves each windowed layer's run of positions, spacing kept, to end just before
/// `cache.next_position`, turning its keys by the shift. When a run spans more than the next
/// position, the next position is raised to that span and every global layer moves up as a whole
/// by the same amount, so its newest entry stays just before the next position. Nothing moves
/// while the runs already end there (no positions were re-assigned).
pub fn follow<B: Backend>(cache: &mut KvCache<B>, rope: &RopeSet) {
    let runs: Vec<(usize, usize, usize)> = cache
        .layers
        .iter()
        .enumerate()
        .filter(|(_, layer)| layer.window().is_some())
        .filter_map(|(l, layer)| {
            let all = (0..layer.kv_heads()).flat_map(|h| layer.positions(h).iter().copied());
            let (first, last) = all.fold(None, |acc: Option<(usize, usize)>, p| {
                Some(acc.map_or((p, p), |(a, b)| (a.min(p), b.max(p))))
            })?;
            Some((l, first, last + 1))
        })
        .collect();
    let span = runs.iter().map(|&(_, first, end)| end - first).max();
    let raise = span.unwrap_or(0).saturating_sub(cache.next_position);
    if raise > 0 {
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            if layer.window().is_none() {
                move_by(layer, rope, l, |p| p + raise);
            }
        }
        cache.next_position += raise;
    }
    let next = cache.next_position;
    for (l, _, end) in runs {
        move_by(&mut cache.layers[l], rope, l, |p| next - (end - p));
    }
}

/// Moves every entry of layer `l` from position `p` to `to(p)`, turning its key.
fn move_by<B: Backend>(
    layer: &mut LayerCache<B>,
    rope: &RopeSet,
    l: usize,
    to: impl Fn(usize) -> usize,
) {
    let new: Vec<Vec<usize>> = (0..layer.kv_heads())
        .map(|h| layer.positions(h).iter().map(|&p| to(p)).collect())
        .collect();
    move_layer(layer, rope.layer(l), new);
}

#[cfg(test)]
mod tests;
