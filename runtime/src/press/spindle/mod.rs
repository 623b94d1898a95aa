//! SpindleKV (`spindlekv.md` §3.3–3.4, eq. 2–3, 7–15, Algorithm 1): eviction under the plan's
//! per-layer ratio schedule (eq. 5–6, the planner's `alloc::spindle`), then a codebook replaces
//! the kept entries' pre-RoPE keys and values — in every layer by default (eq. 15), in the layers
//! the plan's `codebook_layers` names when its shallow/deep split is set.
//!
//! **Eviction** (eq. 2–3, 7): a key `a` scores the attention the observation window's rows give
//! it divided by `l − a` (eq. 2 as printed), averaged over the KV head's query heads (eq. 3);
//! the window is kept and the top entries of the rest fill the layer's budget. With the window
//! placed at the end of the question ([`crate::observe::ObserveConfig::rows_end`]) the entries
//! after it are kept too; `l` stays the number of entries held.
//!
//! **Codebook** (eq. 8–14, [`codebook`]), one per (layer, KV head) and per K/V: unit vectors
//! grouped greedily at θ_K/θ_V, a magnitude and a reference per token. Reconstruction is eq. 14,
//! `γ = C[r]·m`, with RoPE re-applied to keys at the entry's position. Pre-RoPE keys are
//! recovered from the cache by rotating back by the entry's position (RoPE is a rotation).
//!
//! **Decode**: each new entry is merged into the code of highest cosine above θ (the token
//! references it; the code vector is unchanged), or added as a new code.
//!
//! **GQA repeat** (§3.3, "directly repeat these KV vectors h_n times"; opt-in,
//! [`SpindlePress::with_repeat`]): after prefill each codebook layer's cache is unfolded to one
//! head per query head ([`LayerCache::repeat_heads`]), so eviction is decided per query head
//! from that head's own eq. 2 scores (the scorer then sees groups of 1: no eq. 3 mean) and each
//! query head keeps its KV head's budget. The layer then has ONE codebook for K and one for V
//! over all its query heads' entries, with per-head references: the repeated copies are identical
//! vectors (cosine 1) and collapse to one code, so the unfolding adds no codes (§3.4), only
//! per-token references and magnitudes — `h_n` times as many, eq. 15 with `h_g = h`. Attention
//! sees the unfolded layer as `n_heads` heads of group 1 (the model's attention repeats the new
//! tokens' K/V on append). Layers without a codebook (a split plan) are not unfolded: there the
//! copies would cost `h_n`× with nothing to absorb them, so they keep the eq. 3 mean. Off by
//! default: the plan's budgets are per KV head, and with the repeat each of the `h_n` query heads
//! keeps that budget, so the held bytes per token grow (×`h_n` references and magnitudes).
//!
//! **Memory**: between forward calls a codebook layer holds no K/V tensors, only its codebooks:
//! `(|C_K| + |C_V|) × head_dim × 4` bytes plus, per (head, token), a 4-byte reference and a
//! 4-byte magnitude for K and for V. For a forward call the layer's K/V are reconstructed
//! (eq. 14) and dropped again after it. Sliding-window layers get no codebook: they hold their
//! window as plain K/V ([`super::windowed`]).

pub mod codebook;
#[cfg(test)]
mod tests;

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use kvplan_planner::SpindleSection;

use super::registry::{FromPlan, MethodPress};
use super::{
    keep_from, observe, window_scores, window_start, Allocation, Capabilities, Press, Scorer,
    Scores, SelectionPress,
};
use crate::cache::{KvCache, KvStore, LayerCache};
use crate::error::Result;
use crate::model::rope::{Frequencies, RopeSet};
use crate::model::Model;
use crate::observe::{LayerObservation, ObserveConfig, Observer};
pub use codebook::{Codebook, Entries, MAX_GROUP};

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
        // Query heads per stored head: the model's group, or 1 once the layer is unfolded.
        let scores = window_scores(positions, obs, self.window, |l, _, rows| {
            (0..l)
                .map(|a| rows.iter().map(|r| r[a]).sum::<f32>() / (l - a) as f32)
                .collect()
        });
        // The window and what follows it are kept; unobserved: the last `window` entries.
        match window_start(obs, self.window) {
            Some(start) => keep_from(scores, positions, Some(start)),
            None => scores
                .into_iter()
                .map(|mut s| {
                    let from = s.len().saturating_sub(self.window);
                    s[from..].fill(f32::INFINITY);
                    s
                })
                .collect(),
        }
    }
}

/// One cache head's entries in a [`Book`].
#[derive(Debug, Clone, Default)]
struct HeadEntries {
    keys: Entries,
    values: Entries,
    positions: Vec<usize>,
}

/// A K and a V codebook and the cache heads referencing them: one head (a KV head) per book by
/// default, every query head of the layer under the repeat variant.
#[derive(Debug, Clone)]
struct Book {
    keys: Codebook,
    values: Codebook,
    heads: Vec<HeadEntries>,
}

impl Book {
    fn bytes(&self) -> usize {
        let entries: usize = self
            .heads
            .iter()
            .map(|h| h.keys.bytes() + h.values.bytes())
            .sum();
        self.keys.bytes() + self.values.bytes() + entries
    }
}

/// SpindleKV: eviction, then codebooks in the codebook layers.
pub struct SpindlePress {
    evict: SelectionPress,
    window: usize,
    codebook_layers: Vec<bool>,
    theta_k: f32,
    theta_v: f32,
    rope: RopeSet,
    /// `h_n` when the GQA repeat variant is on.
    repeat: Option<usize>,
    books: Vec<Option<Vec<Book>>>,
}

/// Where SpindleKV's codebooks go and how close two vectors must be to share a code.
#[derive(Debug, Clone, PartialEq)]
pub struct Codebooks {
    /// Layers whose kept entries go through a codebook (the plan's `codebook_layers`).
    pub layers: Vec<bool>,
    /// θ_K: cosine similarity at which two keys share a code (eq. 8–9).
    pub theta_k: f64,
    /// θ_V: the same for values.
    pub theta_v: f64,
}

impl MethodPress for SpindlePress {
    /// Its forward pass reconstructs the codebook layers (eq. 14); its prefill is the model's,
    /// so it can adopt a shared one; decoding merges new entries into codes without evicting;
    /// codebooks hold pre-RoPE keys by original position, so positions are not re-assigned.
    const CAPABILITIES: Capabilities = Capabilities {
        changes_forward: true,
        streams_past_context: false,
        evicts_while_decoding: false,
        adopts_shared_prefill: true,
    };

    /// The plan's budgets, window and codebook layers, the section's θ_K and θ_V; the GQA
    /// repeat when [`super::registry::PressOptions::spindle_repeat`] asks for it.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let s: &SpindleSection = p.section_as()?;
        let books = Codebooks {
            layers: p.budgets.codebook_layers.clone(),
            theta_k: s.theta_k,
            theta_v: s.theta_v,
        };
        let press = Self::new(p.allocation(), p.budgets.window, books, p.config.rope());
        Ok(Box::new(if p.options.spindle_repeat {
            press.with_repeat(p.geometry().group_size())
        } else {
            press
        }))
    }
}

impl SpindlePress {
    /// Budgets `alloc` (window `window` inside), codebooks as `books` says.
    pub fn new(alloc: Allocation, window: usize, books: Codebooks, rope: RopeSet) -> Self {
        Self {
            evict: SelectionPress::new("spindle", Box::new(SpindleScorer { window }), alloc),
            window,
            codebook_layers: books.layers,
            theta_k: books.theta_k as f32,
            theta_v: books.theta_v as f32,
            rope,
            repeat: None,
            books: Vec::new(),
        }
    }

    /// The GQA repeat variant (§3.3): every codebook layer's KV heads are repeated `h_n` times
    /// (`h_n = n_heads / n_kv_heads`) after prefill, each query head keeps its KV head's budget
    /// from its own scores, and the layer shares one K and one V codebook across its heads.
    pub fn with_repeat(mut self, h_n: usize) -> Self {
        assert!(h_n >= 1, "spindle repeat: h_n ≥ 1");
        let alloc = match self.evict.allocation() {
            Allocation::PerHead(grid) => Allocation::PerHead(
                grid.iter()
                    .enumerate()
                    .map(|(l, row)| {
                        let times = if self.is_codebook_layer(l) { h_n } else { 1 };
                        row.iter()
                            .flat_map(|&b| std::iter::repeat_n(b, times))
                            .collect()
                    })
                    .collect(),
            ),
            other => other.clone(),
        };
        let scorer = Box::new(SpindleScorer {
            window: self.window,
        });
        self.evict = SelectionPress::new("spindle", scorer, alloc);
        self.repeat = Some(h_n);
        self
    }

    fn is_codebook_layer(&self, layer: usize) -> bool {
        self.codebook_layers.get(layer).copied().unwrap_or(false)
    }

    /// The book serving cache head `head` of `layer` and the head's entries in it.
    fn locate(&self, layer: usize, head: usize) -> Option<(&Book, &HeadEntries)> {
        let books = self.books.get(layer)?.as_ref()?;
        let per_book = books.first()?.heads.len();
        let book = books.get(head / per_book)?;
        Some((book, book.heads.get(head % per_book)?))
    }

    /// Entries (tokens) held by cache head `head` of `layer` in its codebooks, when the layer
    /// has them (under the repeat variant a head is a query head).
    pub fn entries(&self, layer: usize, head: usize) -> Option<usize> {
        Some(self.locate(layer, head)?.1.positions.len())
    }

    /// Original positions of the entries of cache head `head` of `layer`, in storage order.
    pub fn positions(&self, layer: usize, head: usize) -> Option<&[usize]> {
        Some(&self.locate(layer, head)?.1.positions)
    }

    /// Codes `(keys, values)` of the codebook serving cache head `head` of `layer` (under the
    /// repeat variant, the layer's one codebook).
    pub fn codes(&self, layer: usize, head: usize) -> Option<(usize, usize)> {
        let (b, _) = self.locate(layer, head)?;
        Some((b.keys.len(), b.values.len()))
    }

    /// Moves the layer's entries the codebooks do not hold yet into them (merging or adding
    /// codes), the entries of all heads sharing a book in one call; the layer then holds no
    /// tensor.
    fn absorb<B: Backend>(
        &self,
        layer: &mut LayerCache<B>,
        freqs: &Frequencies,
        books: &mut Vec<Book>,
    ) {
        let heads = layer.kv_heads();
        let d = layer.head_dim();
        let per_book = if self.repeat.is_some() { heads } else { 1 };
        if books.is_empty() {
            books.extend((0..heads / per_book).map(|_| Book {
                keys: Codebook::new(d, self.theta_k),
                values: Codebook::new(d, self.theta_v),
                heads: vec![HeadEntries::default(); per_book],
            }));
        }
        for (b, book) in books.iter_mut().enumerate() {
            let (mut keys, mut values, mut counts) = (Vec::new(), Vec::new(), Vec::new());
            for (j, entries) in book.heads.iter_mut().enumerate() {
                let h = b * per_book + j;
                let Some((k, v)) = layer.head(h) else {
                    counts.push(0);
                    continue;
                };
                let first = entries.positions.len();
                let pos = layer.positions(h)[first..].to_vec();
                let mut k: Vec<f32> = k.into_data().iter::<f32>().collect();
                let v: Vec<f32> = v.into_data().iter::<f32>().collect();
                let k = &mut k[first * d..];
                freqs.rotate_rows(k, &pos, -1.0);
                keys.extend_from_slice(k);
                values.extend_from_slice(&v[first * d..]);
                counts.push(pos.len());
                entries.positions.extend(pos);
            }
            let (mut k_new, mut v_new) = (Entries::default(), Entries::default());
            book.keys.extend(&keys, &mut k_new);
            book.values.extend(&values, &mut v_new);
            let mut at = 0;
            for (entries, n) in book.heads.iter_mut().zip(counts) {
                entries.keys.extend_from(&k_new, at..at + n);
                entries.values.extend_from(&v_new, at..at + n);
                at += n;
            }
        }
        layer.replace(None, vec![Vec::new(); heads]);
    }

    /// Puts the reconstructed K (RoPE re-applied) and V of every head back into the layer.
    fn restore<B: Backend>(
        &self,
        layer: &mut LayerCache<B>,
        freqs: &Frequencies,
        books: &[Book],
        device: &B::Device,
    ) {
        let d = layer.head_dim();
        let mut keys = Vec::new();
        let mut values = Vec::new();
        let mut positions = Vec::new();
        for book in books {
            for e in &book.heads {
                let n = e.positions.len();
                let mut k = book.keys.reconstruct(&e.keys);
                freqs.rotate_rows(&mut k, &e.positions, 1.0);
                keys.push(Tensor::<B, 2>::from_data(
                    TensorData::new(k, [n, d]),
                    device,
                ));
                let v = book.values.reconstruct(&e.values);
                values.push(Tensor::<B, 2>::from_data(
                    TensorData::new(v, [n, d]),
                    device,
                ));
                positions.push(e.positions.clone());
            }
        }
        layer.replace(Some(KvStore::from_heads(keys, values)), positions);
    }
}

impl<B: Backend> Press<B> for SpindlePress {
    fn name(&self) -> &str {
        "spindle"
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        Press::<B>::prefill_observe(&self.evict)
    }

    fn after_prefill(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        if let Some(h_n) = self.repeat {
            for (l, layer) in cache.layers.iter_mut().enumerate() {
                if self.is_codebook_layer(l) && layer.window().is_none() {
                    layer.repeat_heads(h_n);
                }
            }
        }
        self.evict.after_prefill(cache, obs)?;
        let mut books = Vec::with_capacity(cache.layers.len());
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            // A sliding-window layer (parked by the session) is the model's to keep: no book.
            if self.is_codebook_layer(l) && layer.window().is_none() {
                let mut b = Vec::new();
                self.absorb(layer, self.rope.layer(l), &mut b);
                books.push(Some(b));
            } else {
                books.push(None);
            }
        }
        self.books = books;
        Ok(())
    }

    fn held_bytes(&self, cache: &KvCache<B>) -> usize {
        let books: usize = self.books.iter().flatten().flatten().map(Book::bytes).sum();
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
                self.restore(&mut cache.layers[l], self.rope.layer(l), b, &device);
            }
        }
        let out = model.forward(ids, cache, obs, crate::model::Logits::Last);
        for (l, b) in books.iter_mut().enumerate() {
            if let Some(b) = b {
                self.absorb(&mut cache.layers[l], self.rope.layer(l), b);
            }
        }
        self.books = books;
        out
    }
}
