//! SpindleKV (`docs/papers/spindlekv.md` §3.3–3.4, eq. 2–3, 7–15, Algorithm 1): eviction under the plan's
//! per-layer ratio schedule (eq. 5–6, the planner's `methods::spindle`), then a codebook replaces
//! the kept entries' pre-RoPE keys and values — in every layer by default (eq. 15), in the layers
//! the plan's `codebook_layers` names when its shallow/deep split is set.
//!
//! **Eviction** (eq. 2–3, 7): a key `a` scores the attention the observation window's rows give
//! it over a denominator ([`Denominator`]), combined over the KV head's query heads (eq. 3's
//! mean, or as the request's [`GqaAggregation`] says) unless the GQA repeat unfolds the group;
//! the window is kept and the top entries of the rest fill the layer's budget. With the window
//! placed at the end of the question ([`crate::observe::ObserveConfig::rows_end`]) the entries
//! after it are kept too; `l` stays the number of entries held.
//!
//! **Eq. 2's denominator.** Eq. 2 prints `ac_a = Σ_{b=l−l_w}^{l−1} A_{a,b} / (l − a)`: a sum
//! over the `l_w` window rows divided by the count of *all* queries that see key `a`
//! (PyramidInfer's accumulated attention, whose sum runs over all `l − a` of them). With the
//! sum cut to the window, every key before the window is seen by exactly `l_w` summed rows, so
//! `l − a` only weights recency: at `l = 4096`, `l_w = 8`, the first key is divided by 4096 and
//! the last key before the window by 9 — a 455× factor; a key 100 tokens back needs 41× less
//! window attention than the first token to rank equal (4096 / 100), one at the middle 2× less
//! than the first. The paper's own text defines `ac` as "the average attention score in a
//! window `l_w` for each query", and its needle results (Table 4, Figure 6: retrieval at every
//! depth with 15% of the cache) are not what a 455× recency weight would keep. **Decision**:
//! by default divide by the number of window rows that see the key, `min(l_w, l − a)`
//! ([`Denominator::WindowRows`]: the mean over the window, a constant `l_w` before it, so the
//! ranking there is the window sum's); eq. 2 as printed stays selectable for the ablation
//! ([`Denominator::Printed`], `--spindle-denominator l-a`).
//!
//! **Codebook** (eq. 8–14, [`codebook`]), one per (layer, KV head) and per K/V: unit vectors
//! grouped greedily at θ_K/θ_V, a magnitude and a reference per token. Reconstruction is eq. 14,
//! `γ = C[r]·m`, with RoPE re-applied to keys at the entry's position. Pre-RoPE keys are
//! recovered from the cache by rotating back by the entry's position (RoPE is a rotation).
//!
//! **Decode**: each new entry is merged into the code of highest cosine above θ (the token
//! references it; the code vector is unchanged), or added as a new code.
//!
//! **GQA repeat** (§3.3, "directly repeat these KV vectors h_n times"; the default for GQA
//! models, [`SpindleGqa::Repeat`], [`SpindlePress::with_repeat`]; Table 2 measures it against the
//! group mean of eq. 3 on LLaMA-3-8B: 39.59 vs 36.58 at a 30% ratio): after prefill each codebook layer's cache is unfolded to one
//! head per query head ([`LayerCache::repeat_heads`]), so eviction is decided per query head
//! from that head's own eq. 2 scores (the scorer then sees groups of 1: no eq. 3 mean) and each
//! query head keeps its KV head's budget. The layer then has ONE codebook for K and one for V
//! over all its query heads' entries, with per-head references: the repeated copies are identical
//! vectors (cosine 1) and collapse to one code, so the unfolding adds no codes (§3.4), only
//! per-token references and magnitudes — `h_n` times as many, eq. 15 with `h_g = h`. Attention
//! sees the unfolded layer as `n_heads` heads of group 1 (the model's attention repeats the new
//! tokens' K/V on append). Layers without a codebook (a split plan) are not unfolded: there the
//! copies would cost `h_n`× with nothing to absorb them, so they keep the eq. 3 mean. The plan's
//! budgets are per KV head, and with the repeat each of the `h_n` query heads keeps that budget,
//! so the held bytes per token grow (×`h_n` references and magnitudes); comparisons at equal
//! memory re-target the budget until the bytes match (`kvplan eval`'s `--spindle-bytes`).
//! [`SpindleGqa::Group`] keeps one decision per KV head (eq. 3). A model without GQA (`h_n = 1`)
//! has nothing to repeat.
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
use burn::tensor::Tensor;
use kvplan_planner::{Method, SpindleSection};

use super::from_plan::{FromPlan, MethodPress};
pub use super::options::{Denominator, SpindleGqa};
use super::{
    keep_from, observe, window_scores, window_start, Allocation, Capabilities, GqaAggregation,
    LayerView, Press, PressKind, Scorer, Scores, SelectionPress,
};
use crate::cache::{host_vec, HostKv, KvCache, LayerCache};
use crate::error::Result;
use crate::model::rope::{Frequencies, RopeSet};
use crate::model::Model;
use crate::observe::{ObserveConfig, Observer};
pub use codebook::{Codebook, Entries, MAX_GROUP};

/// Eq. 2–3 scores: window attention over the [`Denominator`], combined over the group as
/// [`GqaAggregation`] says (no pooling, so `pool-then-mean` = `mean-then-pool`, eq. 3's mean);
/// window kept.
#[derive(Debug, Clone)]
pub struct SpindleScorer {
    window: usize,
    denominator: Denominator,
    gqa: GqaAggregation,
}

impl SpindleScorer {
    /// Window `l_w`, eq. 2's denominator and the group's combination.
    pub fn new(window: usize, denominator: Denominator, gqa: GqaAggregation) -> Self {
        Self {
            window,
            denominator,
            gqa,
        }
    }
}

impl Scorer for SpindleScorer {
    fn prefill_observe(&self) -> ObserveConfig {
        observe(self.window, false)
    }

    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores {
        let LayerView { positions, obs, .. } = at;
        let den = self.denominator;
        // Query heads per stored head: the model's group, or 1 once the layer is unfolded.
        let eq2 = |l: usize, _: usize, rows: &[Vec<f32>]| -> Vec<f32> {
            (0..l)
                .map(|a| rows.iter().map(|r| r[a]).sum::<f32>() / den.of(l, a, rows.len()))
                .collect()
        };
        let scores = window_scores(positions, obs, self.window, self.gqa, eq2, <[f32]>::to_vec);
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
    scorer: SpindleScorer,
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
    /// so it can adopt a shared one; codebooks hold pre-RoPE keys by original position, so
    /// positions are not re-assigned (the table's decode policy: new entries are added, nothing
    /// evicted).
    const KIND: PressKind = PressKind {
        changes_forward: true,
        streams_past_context: false,
        adopts_shared_prefill: true,
    };

    /// The plan's budgets, window and codebook layers, the section's θ_K and θ_V; eq. 2's
    /// denominator, the GQA handling and the group's combination as the request's
    /// [`super::options::PressOptions`] say.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let s: &SpindleSection = p.section_as()?;
        let books = Codebooks {
            layers: p.budgets.codebook_layers.clone(),
            theta_k: s.theta_k,
            theta_v: s.theta_v,
        };
        let o = p.options;
        let scorer = SpindleScorer::new(p.budgets.window, o.spindle_denominator, o.gqa);
        let press = Self::new(
            p.allocation(),
            p.budgets.window,
            books,
            p.config.rope_for(p.budgets.context_len),
        )
        .with_scorer(scorer);
        let h_n = p.geometry().group_size();
        Ok(Box::new(match o.spindle_gqa {
            SpindleGqa::Repeat if h_n > 1 => press.with_repeat(h_n),
            _ => press,
        }))
    }
}

impl SpindlePress {
    /// Budgets `alloc` (window `window` inside), codebooks as `books` says.
    /// Scores with [`Denominator::WindowRows`] and the group mean until
    /// [`SpindlePress::with_scorer`] says otherwise.
    pub fn new(alloc: Allocation, window: usize, books: Codebooks, rope: RopeSet) -> Self {
        let scorer = SpindleScorer::new(window, Denominator::default(), GqaAggregation::default());
        Self {
            evict: SelectionPress::new(Method::Spindle, Box::new(scorer.clone()), alloc),
            scorer,
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
        let scorer = Box::new(self.scorer.clone());
        self.evict = SelectionPress::new(Method::Spindle, scorer, alloc);
        self.repeat = Some(h_n);
        self
    }

    /// The same press scoring with `scorer` (eq. 2's denominator, the group's combination).
    /// Call before [`SpindlePress::with_repeat`].
    pub fn with_scorer(mut self, scorer: SpindleScorer) -> Self {
        let alloc = self.evict.allocation().clone();
        self.evict = SelectionPress::new(Method::Spindle, Box::new(scorer.clone()), alloc);
        self.scorer = scorer;
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
                // Only the entries the book does not hold yet are read: from the host rows
                // where the CPU kernel appended them, else from the tensors.
                let first = entries.positions.len();
                let (mut k, v) = if let Some(kv) = layer.host() {
                    (
                        kv.keys[h][first * d..].to_vec(),
                        kv.values[h][first * d..].to_vec(),
                    )
                } else {
                    let Some((k, v)) = layer.head(h) else {
                        counts.push(0);
                        continue;
                    };
                    let rows = |t: Tensor<B, 2>| {
                        let n = t.dims()[0];
                        host_vec(t.narrow(0, first, n - first))
                    };
                    (rows(k), rows(v))
                };
                let pos = layer.positions(h)[first..].to_vec();
                freqs.rotate_rows(&mut k, &pos, -1.0);
                keys.extend_from_slice(&k);
                values.extend_from_slice(&v);
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

    /// Puts the reconstructed K (RoPE re-applied) and V of every head back into the layer, as
    /// host rows: the CPU kernel attends over them and appends the step's entry in place, and
    /// [`Self::absorb`] reads that entry back without a tensor round trip (other backends make
    /// their tensors from the rows on first use).
    fn restore<B: Backend>(
        &self,
        layer: &mut LayerCache<B>,
        freqs: &Frequencies,
        books: &[Book],
        device: &B::Device,
    ) {
        let mut kv = HostKv::default();
        let mut positions = Vec::new();
        for book in books {
            for e in &book.heads {
                let mut k = book.keys.reconstruct(&e.keys);
                freqs.rotate_rows(&mut k, &e.positions, 1.0);
                kv.keys.push(k);
                kv.values.push(book.values.reconstruct(&e.values));
                positions.push(e.positions.clone());
            }
        }
        layer.replace_host(kv, positions, device);
    }
}

impl<B: Backend> Press<B> for SpindlePress {
    fn name(&self) -> &str {
        Method::Spindle.name()
    }

    fn capabilities(&self) -> Capabilities {
        Self::KIND.serving(Some(Method::Spindle))
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
