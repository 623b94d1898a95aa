//! Presses: KV-cache compression methods applied to a [`KvCache`] (the method table,
//! docs/methods.md).
//!
//! The design follows kvpress (NVIDIA/kvpress @ 08a43bf, `kvpress/presses/scorer_press.py`): a
//! [`Scorer`] only says how important each held entry is; *where the budget goes* is an
//! [`Allocation`] (uniform, per layer, per KV head); [`SelectionPress`] joins the two and turns
//! scores into kept indices with [`LayerCache::retain`], so memory shrinks for real (heads with
//! different budgets switch to per-head storage: no padding, no masking). Methods that are not a
//! plain selection (TreeKV's tree, SpindleKV's codebook, PoD's shared attention) implement
//! [`Press`] directly; what each can do is on its type ([`Capabilities`]).
//!
//! **GQA.** Attention is observed per query head; the cache stores KV heads. Window-based
//! selections combine a KV head's query heads as [`GqaAggregation`] says (the mean after each
//! head's pooling by default, as kvpress's SnapKV does; [`gqa`] has the other orders); the
//! methods that accumulate attention (H2O, TreeKV) take the group's mean ([`group_mean`]).
//!
//! Budgets always come from the plan (`kvplan_planner::Plan::budgets`); see [`registry`].
//! [`driver::generate_pressed`] runs prefill, the press, then decode steps with the press's
//! decode hook.

pub mod classes;
pub mod driver;
pub mod from_plan;
pub mod full;
pub mod gqa;
pub mod h2o;
pub mod knorm;
pub mod options;
pub mod pod;
pub mod registry;
pub mod snapkv;
pub mod spindle;
pub mod stale;
pub mod streaming;
pub mod tova;
pub mod treekv;
pub mod windowed;

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod controls_tests;
#[cfg(test)]
mod prompt_end_tests;
#[cfg(test)]
mod tests;

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use kvplan_planner::Method;

use crate::cache::{KvCache, LayerCache};
use crate::error::Result;
use crate::model::rope::{Frequencies, RopeSet};
use crate::model::{Logits, Model};
use crate::observe::{LayerObservation, ObserveConfig, Observer};

pub use driver::{generate_pressed, shared_observe, MemoryReport, PressedRun, Session};
pub use gqa::{group_max, group_mean, last_row_mean, GqaAggregation};
pub use registry::{build_press, capabilities, PressSpec, PRESS_NAMES};

/// What a press can do. Callers ask the press ([`Press::capabilities`]) or, before building
/// one, the registry ([`registry::capabilities`]) — never a list of method names. Made from two
/// truths: what the press's type can do ([`PressKind`], a `KIND` constant on each press type)
/// and what the method table says the method does while decoding ([`Method::semantics`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Runs its own forward pass instead of the model's ([`Press::forward`]: SpindleKV's
    /// codebook reconstruction, PoD's shared attention).
    pub changes_forward: bool,
    /// Can move its entries to positions `0..len` ([`Press::reassign_positions`]), so a stream
    /// can go on past the model's trained context.
    pub streams_past_context: bool,
    /// Evicts while decoding, holding its budget; otherwise the cache grows by one entry a step.
    /// The method table's decode policy ([`kvplan_planner::DecodePolicy::evicts_to_budget`]).
    pub evicts_while_decoding: bool,
    /// Can take over a cache that another press's prefill (the model's own forward, observed)
    /// filled ([`Session::adopt`]), so several presses share one prefill.
    pub adopts_shared_prefill: bool,
}

/// What a press type can do whatever method it serves (one type can serve several: SnapKV's
/// scorer serves PyramidKV and HeadKV too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PressKind {
    /// [`Capabilities::changes_forward`].
    pub changes_forward: bool,
    /// [`Capabilities::streams_past_context`].
    pub streams_past_context: bool,
    /// [`Capabilities::adopts_shared_prefill`].
    pub adopts_shared_prefill: bool,
}

impl PressKind {
    /// The model's forward pass, positions fixed (FullKV).
    pub const PLAIN: Self = Self {
        changes_forward: false,
        streams_past_context: false,
        adopts_shared_prefill: true,
    };

    /// A [`SelectionPress`] over a scorer: the model's forward pass, positions re-assignable.
    pub const SELECTION: Self = Self {
        changes_forward: false,
        streams_past_context: true,
        adopts_shared_prefill: true,
    };

    /// A press that runs its own prefill, unlike the model's (an engine's layer windows, a
    /// second request's rows, PoD's shared attention): nothing shared, nothing re-assigned.
    pub const OWN_PREFILL: Self = Self {
        changes_forward: true,
        streams_past_context: false,
        adopts_shared_prefill: false,
    };

    /// A press of this kind serving `method` (`None`: no method of the table, nothing evicted
    /// while decoding): it evicts while decoding where the method table's decode policy says so.
    pub fn serving(self, method: Option<Method>) -> Capabilities {
        let decode = method.and_then(Method::semantics).map(|s| s.decode);
        Capabilities {
            changes_forward: self.changes_forward,
            streams_past_context: self.streams_past_context,
            evicts_while_decoding: decode.is_some_and(|d| d.evicts_to_budget()),
            adopts_shared_prefill: self.adopts_shared_prefill,
        }
    }
}

/// A compression method applied to the cache around forward calls.
pub trait Press<B: Backend> {
    /// The registry name (`snapkv`, `pyramid`, …).
    fn name(&self) -> &str;

    /// What this press can do; must agree with the hooks it overrides ([`Press::forward`],
    /// [`Press::reassign_positions`], [`Press::after_decode`]).
    fn capabilities(&self) -> Capabilities;

    /// [`Capabilities::changes_forward`].
    fn changes_forward(&self) -> bool {
        self.capabilities().changes_forward
    }

    /// [`Capabilities::streams_past_context`].
    fn streams_past_context(&self) -> bool {
        self.capabilities().streams_past_context
    }

    /// [`Capabilities::evicts_while_decoding`].
    fn evicts_while_decoding(&self) -> bool {
        self.capabilities().evicts_while_decoding
    }

    /// [`Capabilities::adopts_shared_prefill`].
    fn adopts_shared_prefill(&self) -> bool {
        self.capabilities().adopts_shared_prefill
    }

    /// What the prefill forward must record for [`Press::after_prefill`] (`None`, the default:
    /// nothing).
    fn prefill_observe(&self) -> Option<ObserveConfig> {
        None
    }

    /// Compresses the cache after the prompt's forward pass (default: nothing to do — a press
    /// that keeps everything, or that does its work in its own forward pass or before each
    /// step, [`Press::forward`], [`Press::prepare`]).
    fn after_prefill(&mut self, _cache: &mut KvCache<B>, _obs: Option<&Observer>) -> Result<()> {
        Ok(())
    }

    /// What each decode step must record (`None`: decode runs unobserved).
    fn decode_observe(&self) -> Option<ObserveConfig> {
        None
    }

    /// Decode-time hook, after each decode step's forward call.
    fn after_decode(&mut self, _cache: &mut KvCache<B>, _obs: Option<&Observer>) -> Result<()> {
        Ok(())
    }

    /// The prompt's tokens at positions `from..` follow the observation window (the chat
    /// template's tail and answer prefix after a window that ends at the user's question,
    /// [`Session::rows_end`](driver::Session::rows_end)): the prefill's compression must keep
    /// them in every head (`budget_semantics.prompt_end`). Called before
    /// [`Press::after_prefill`]; the default does nothing (a press that keeps them by its own
    /// rule: a recent window, or its window scorer's `∞` from [`window_start`] on).
    fn keep_prompt_tail(&mut self, _from: usize) {}

    /// `entries` tokens were appended after the compression without a press hook
    /// ([`Session::extend`](driver::Session::extend): question-agnostic evaluation's question).
    /// A press that holds a budget while generating holds them on top of it, so decoding keeps
    /// the bytes the appended tokens were counted in instead of evicting context to make room
    /// (default: nothing to do — the press does not evict while decoding, or never below what it
    /// holds).
    fn appended_uncompressed(&mut self, _entries: usize) {}

    /// Sets the plan's decode-time compression interval (`budget_semantics.methods.<m>.decode`,
    /// `compress_every`): the press compresses after every `every`-th generated token, the cache
    /// growing by one entry per token in between. The default accepts only 1 (a press without
    /// decode-time compression, or one whose method compresses at every token by definition).
    fn set_compress_every(&mut self, every: usize) -> Result<()> {
        if every == 1 {
            Ok(())
        } else {
            Err(crate::error::Error::Request(format!(
                "{}: compresses at every generated token or never; the plan's compress_every \
                 must be 1, found {every}",
                self.name()
            )))
        }
    }

    /// Bytes the compressed cache actually holds (default: the K/V tensors of `cache`).
    fn held_bytes(&self, cache: &KvCache<B>) -> usize {
        cache.bytes()
    }

    /// Readies `cache` for running `ids` (default: nothing). A press that changes what the
    /// cache holds before each step but keeps the model's own forward (the layer classes'
    /// sliding windows, the stale windows' detached blocks) does it here.
    fn prepare(&mut self, _model: &Model<B>, _ids: &[u32], _cache: &mut KvCache<B>) -> Result<()> {
        Ok(())
    }

    /// Runs `ids` after what `cache` holds (default: [`Press::prepare`], then the model's own
    /// forward). Presses that change how attention reads the cache (SpindleKV's codebook, PoD's
    /// shared attention) override it, and say so in [`Capabilities::changes_forward`].
    ///
    /// # Shapes
    /// - ids: `t` tokens → `[1, vocab]`
    fn forward(
        &mut self,
        model: &Model<B>,
        ids: &[u32],
        cache: &mut KvCache<B>,
        obs: Option<&mut Observer>,
    ) -> Result<Tensor<B, 2>> {
        self.prepare(model, ids, cache)?;
        model.forward(ids, cache, obs, Logits::Last)
    }

    /// Called by [`Session::step`] when the next position would reach the model's trained
    /// context: move the entries the cache holds to positions `0..len` (keys re-rotated, as
    /// StreamingLLM §3.2 and TreeKV §4.1 assign positions within the cache), so a stream can go on
    /// past the context. The default refuses: presses whose cache is not plain K/V tensors
    /// (SpindleKV's codebooks, PoD's shared keys) or that never evict (FullKV) cannot.
    fn reassign_positions(&mut self, _cache: &mut KvCache<B>, _rope: &RopeSet) -> Result<()> {
        Err(crate::error::Error::Request(format!(
            "{}: the stream reached the model's trained context and this press cannot re-assign \
             positions within its cache",
            self.name()
        )))
    }
}

/// Re-assigns positions `0..len` to the entries of every global layer (keys re-rotated at each
/// layer's own RoPE frequencies) and moves the cache's next position to just after the longest
/// head; sliding-window layers keep their spacing and follow ([`windowed::follow`], which moves
/// the global layers up as a whole when a window spans more).
pub fn reassign_all<B: Backend>(cache: &mut KvCache<B>, rope: &RopeSet) {
    let mut next = 0;
    for (l, layer) in cache.layers.iter_mut().enumerate() {
        if layer.window().is_some() {
            continue;
        }
        next = next.max(
            (0..layer.kv_heads())
                .map(|h| layer.len(h))
                .max()
                .unwrap_or(0),
        );
        reassign_layer(layer, rope.layer(l));
    }
    cache.next_position = next;
    windowed::follow(cache, rope);
}

/// Moves every head's entries of one layer to positions `0..len_h`, turning each key by
/// `new − old` ([`Frequencies::shift_rows`]).
pub fn reassign_layer<B: Backend>(cache: &mut LayerCache<B>, freqs: &Frequencies) {
    let new = (0..cache.kv_heads())
        .map(|h| (0..cache.len(h)).collect())
        .collect();
    move_layer(cache, freqs, new);
}

/// Moves head `h`'s entries of one layer to positions `new[h]` (one per entry, storage order),
/// turning each key by `new − old` ([`Frequencies::shift_rows`]).
pub fn move_layer<B: Backend>(
    cache: &mut LayerCache<B>,
    freqs: &Frequencies,
    new: Vec<Vec<usize>>,
) {
    let moved = (0..cache.kv_heads()).any(|h| cache.positions(h) != new[h].as_slice());
    if !moved {
        return;
    }
    cache.move_keys(new, |rows, old, to| freqs.shift_rows(rows, old, to));
}

/// Where the budget goes: entries each (layer, KV head) keeps, the observation window included.
#[derive(Debug, Clone, PartialEq)]
pub enum Allocation {
    /// The same number everywhere (SnapKV, H2O, StreamingLLM, TreeKV).
    Uniform(usize),
    /// One number per layer (PyramidKV, SpindleKV's schedule).
    PerLayer(Vec<usize>),
    /// One number per (layer, KV head) (HeadKV).
    PerHead(Vec<Vec<usize>>),
}

impl Allocation {
    /// The simplest form holding `grid` (`[layer][kv_head]`, as the planner gives it).
    pub fn from_grid(grid: &[Vec<usize>]) -> Self {
        let first = grid.first().and_then(|r| r.first()).copied().unwrap_or(0);
        if grid.iter().flatten().all(|&b| b == first) {
            Allocation::Uniform(first)
        } else if grid.iter().all(|r| r.windows(2).all(|w| w[0] == w[1])) {
            Allocation::PerLayer(
                grid.iter()
                    .map(|r| r.first().copied().unwrap_or(0))
                    .collect(),
            )
        } else {
            Allocation::PerHead(grid.to_vec())
        }
    }

    /// Budget of KV head `head` in `layer`.
    pub fn budget(&self, layer: usize, head: usize) -> usize {
        match self {
            Allocation::Uniform(b) => *b,
            Allocation::PerLayer(v) => v[layer],
            Allocation::PerHead(g) => g[layer][head],
        }
    }

    /// Every budget raised by `n` entries.
    pub fn widen(&mut self, n: usize) {
        match self {
            Allocation::Uniform(b) => *b += n,
            Allocation::PerLayer(v) => v.iter_mut().for_each(|b| *b += n),
            Allocation::PerHead(g) => g.iter_mut().flatten().for_each(|b| *b += n),
        }
    }

    /// Budgets of every KV head of `layer`.
    pub fn layer(&self, layer: usize, kv_heads: usize) -> Vec<usize> {
        (0..kv_heads).map(|h| self.budget(layer, h)).collect()
    }
}

/// Scores of one layer: `[kv_head][entry]` in storage order; `f32::INFINITY` marks entries the
/// method always keeps (window, sinks, recent tokens).
pub type Scores = Vec<Vec<f32>>;

/// What a [`Scorer`] reads of one layer: its held entries, what the forward observed of it,
/// and what each of its KV heads will keep.
#[derive(Clone, Copy, Debug)]
pub struct LayerView<'a> {
    /// The layer's index, bottom first.
    pub layer: usize,
    /// `positions[h]`: original positions of KV head `h`'s entries.
    pub positions: &'a [Vec<usize>],
    /// What the forward recorded of the layer (`None`: nothing asked or recorded).
    pub obs: Option<&'a LayerObservation>,
    /// `budgets[h]`: what KV head `h` will keep (for splits such as H2O's recent share).
    pub budgets: &'a [usize],
}

impl<'a> LayerView<'a> {
    /// The view of layer `layer` from its parts.
    pub fn new(
        layer: usize,
        positions: &'a [Vec<usize>],
        obs: Option<&'a LayerObservation>,
        budgets: &'a [usize],
    ) -> Self {
        LayerView {
            layer,
            positions,
            obs,
            budgets,
        }
    }
}

/// How important each held entry is. Host-side only: scorers read positions and observations,
/// never tensors, so they are tested on hand-made scores.
pub trait Scorer {
    /// What the prefill forward must record.
    fn prefill_observe(&self) -> ObserveConfig;

    /// Scores of the layer `at` after prefill.
    fn prefill_scores(&mut self, at: LayerView<'_>) -> Scores;

    /// What each decode step must record, for methods that evict while decoding.
    fn decode_observe(&self) -> Option<ObserveConfig> {
        None
    }

    /// Scores after a decode step (`None`: nothing to evict at this step). Acted on only when
    /// the method table's decode policy evicts while decoding ([`Capabilities`]).
    fn decode_scores(&mut self, _at: LayerView<'_>) -> Option<Scores> {
        None
    }

    /// Told which storage indices each head kept, so per-entry state stays aligned.
    fn retained(&mut self, _layer: usize, _keep: &[Vec<usize>]) {}
}

/// A [`Scorer`] under an [`Allocation`]: keeps each head's top-`budget` entries; optionally
/// re-assigns positions `0..len` after every eviction ([`SelectionPress::reassigning`]).
pub struct SelectionPress {
    method: Method,
    scorer: Box<dyn Scorer>,
    allocation: Allocation,
    reassign: Option<RopeSet>,
    /// Compress after every `compress_every`-th decode step ([`Press::set_compress_every`]).
    compress_every: usize,
    /// Decode steps since the prompt.
    steps: usize,
    /// Prompt positions kept in every head at prefill whatever the scorer says
    /// ([`Press::keep_prompt_tail`]).
    tail_from: Option<usize>,
}

impl SelectionPress {
    /// `scorer` under `allocation`, serving `method`: its name and whether it evicts while
    /// decoding come from the method table.
    pub fn new(method: Method, scorer: Box<dyn Scorer>, allocation: Allocation) -> Self {
        Self {
            method,
            scorer,
            allocation,
            reassign: None,
            compress_every: 1,
            steps: 0,
            tail_from: None,
        }
    }

    /// The same press re-assigning positions `0..len` after every eviction (keys re-rotated at
    /// `rope`'s frequencies, [`reassign_all`]), as TreeKV §4.1 and StreamingLLM §3.2 do, instead
    /// of only when a stream reaches the trained context.
    pub fn reassigning(mut self, rope: RopeSet) -> Self {
        self.reassign = Some(rope);
        self
    }

    /// Re-assigns positions when the press does so after evictions and `evicted`.
    fn after_eviction<B: Backend>(&self, cache: &mut KvCache<B>, evicted: bool) {
        if let (Some(rope), true) = (&self.reassign, evicted) {
            reassign_all(cache, rope);
        }
    }

    /// The allocation in use.
    pub fn allocation(&self) -> &Allocation {
        &self.allocation
    }

    /// Scores every layer with `score` (the scorer and the layer's view: its entries'
    /// positions, its observation and budgets) and, where that gives scores, keeps each head's
    /// top entries; then re-assigns positions if anything was evicted.
    fn score_and_evict<B: Backend>(
        &mut self,
        cache: &mut KvCache<B>,
        obs: Option<&Observer>,
        mut score: impl FnMut(&mut dyn Scorer, LayerView<'_>) -> Option<Scores>,
    ) {
        let mut evicted = false;
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            let budgets = self.allocation.layer(l, layer.kv_heads());
            let positions = positions_of(layer);
            let view = LayerView::new(l, &positions, layer_obs(obs, l), &budgets);
            if let Some(scores) = score(self.scorer.as_mut(), view) {
                evicted |= self.apply(l, layer, &scores);
            }
        }
        self.after_eviction(cache, evicted);
    }

    /// Keeps each head's top entries; true when an entry was evicted.
    fn apply<B: Backend>(
        &mut self,
        layer: usize,
        cache: &mut LayerCache<B>,
        scores: &Scores,
    ) -> bool {
        let budgets = self.allocation.layer(layer, cache.kv_heads());
        let keep: Vec<Vec<usize>> = scores
            .iter()
            .zip(&budgets)
            .map(|(s, &b)| top_k(s, b))
            .collect();
        let changed = keep.iter().enumerate().any(|(h, k)| k.len() < cache.len(h));
        if changed {
            self.scorer.retained(layer, &keep);
            cache.retain(&keep);
        }
        changed
    }
}

fn positions_of<B: Backend>(cache: &LayerCache<B>) -> Vec<Vec<usize>> {
    (0..cache.kv_heads())
        .map(|h| cache.positions(h).to_vec())
        .collect()
}

fn layer_obs(obs: Option<&Observer>, layer: usize) -> Option<&LayerObservation> {
    obs.and_then(|o| o.layers.get(layer))
}

impl<B: Backend> Press<B> for SelectionPress {
    fn name(&self) -> &str {
        self.method.name()
    }

    fn capabilities(&self) -> Capabilities {
        PressKind::SELECTION.serving(Some(self.method))
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        let c = self.scorer.prefill_observe();
        (c != ObserveConfig::default()).then_some(c)
    }

    fn after_prefill(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        let tail_from = self.tail_from;
        self.score_and_evict(cache, obs, |scorer, view| {
            let scores = scorer.prefill_scores(view);
            Some(keep_from(scores, view.positions, tail_from))
        });
        Ok(())
    }

    fn decode_observe(&self) -> Option<ObserveConfig> {
        self.scorer.decode_observe()
    }

    /// Scores every step (a scorer accumulating attention, H2O, sees every token); evicts down
    /// to the budgets at every `compress_every`-th step only, and only where the method table
    /// says the method evicts while decoding.
    fn after_decode(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        self.steps += 1;
        let compress = <Self as Press<B>>::capabilities(self).evicts_while_decoding
            && self.steps.is_multiple_of(self.compress_every);
        // Scored at every step (the scorer may accumulate), evicted only when compressing.
        self.score_and_evict(cache, obs, |scorer, view| {
            scorer.decode_scores(view).filter(|_| compress)
        });
        Ok(())
    }

    fn keep_prompt_tail(&mut self, from: usize) {
        self.tail_from = Some(from);
    }

    /// Decoding holds the appended entries on top of each head's budget.
    fn appended_uncompressed(&mut self, entries: usize) {
        self.allocation.widen(entries);
    }

    fn set_compress_every(&mut self, every: usize) -> Result<()> {
        let evicts = <Self as Press<B>>::capabilities(self).evicts_while_decoding;
        if every == 0 || (every > 1 && !evicts) {
            return Err(crate::error::Error::Request(format!(
                "{}: compress_every must be at least 1 (and 1 for a press that does not compress \
                 while generating), found {every}",
                self.method
            )));
        }
        self.compress_every = every;
        Ok(())
    }

    fn reassign_positions(&mut self, cache: &mut KvCache<B>, rope: &RopeSet) -> Result<()> {
        reassign_all(cache, rope);
        Ok(())
    }
}

/// Storage indices of the `k` highest scores, ascending; ties keep the earlier entry. Entries
/// scored `+∞` (the observation window, the prompt's tail after it, sinks) are always kept, also
/// when there are more of them than `k`: the head then holds exactly those (the floor of
/// `budget_semantics.prompt_end`), never a part of them chosen by position.
pub fn top_k(scores: &[f32], k: usize) -> Vec<usize> {
    let forced = scores.iter().filter(|&&s| s == f32::INFINITY).count();
    let k = k.max(forced);
    if scores.len() <= k {
        return (0..scores.len()).collect();
    }
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    idx.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

/// Scores of a layer from its observation window: `per_row(len, before, rows)` gets, for each
/// query head, the entry count of its KV head, how many of them lie before the window
/// ([`window_start`]) and the last `window` observed rows (an observer shared with other presses
/// may record more), and returns one score per key before the window; `gqa` then combines the
/// query heads of each KV head with the scorer's `pool` ([`GqaAggregation::combine`]; a layer
/// unfolded to one head per query head has groups of one). Zeros when nothing was observed.
pub fn window_scores(
    positions: &[Vec<usize>],
    obs: Option<&LayerObservation>,
    window: usize,
    gqa: GqaAggregation,
    per_row: impl Fn(usize, usize, &[Vec<f32>]) -> Vec<f32>,
    pool: impl Fn(&[f32]) -> Vec<f32>,
) -> Scores {
    let kv = positions.len();
    let Some(rows) = obs.and_then(|o| o.attention.last()) else {
        return positions.iter().map(|p| vec![0.0; p.len()]).collect();
    };
    let kv_of = unfolded(&rows.kv_of, kv);
    let start = window_start(obs, window).unwrap_or(usize::MAX);
    let per_q: Vec<Vec<f32>> = rows
        .probs
        .iter()
        .zip(&kv_of)
        .map(|(head_rows, &g)| {
            let from = head_rows.len().saturating_sub(window);
            let before = positions[g].iter().filter(|&&p| p < start).count();
            per_row(positions[g].len(), before, &head_rows[from..])
        })
        .collect();
    gqa.combine(&per_q, &kv_of, kv, pool)
}

/// Where the observation window starts: the position of the first of the last `window` observed
/// rows (`None` when nothing was observed). Keys at or after it — the window and whatever
/// follows it in the prompt (a chat template's tail after a question-end window) — are kept;
/// only the keys before it are scored.
pub fn window_start(obs: Option<&LayerObservation>, window: usize) -> Option<usize> {
    let q = &obs?.attention.last()?.query_positions;
    q.get(q.len().saturating_sub(window)).copied()
}

/// `scores` with every entry at or after position `start` set to `∞` (kept).
pub fn keep_from(mut scores: Scores, positions: &[Vec<usize>], start: Option<usize>) -> Scores {
    let Some(start) = start else { return scores };
    for (s, p) in scores.iter_mut().zip(positions) {
        for (x, &pos) in s.iter_mut().zip(p) {
            if pos >= start {
                *x = f32::INFINITY;
            }
        }
    }
    scores
}

/// Observation of every layer: only `attn_rows` rows and/or column sums, as asked.
/// The cache head each query head reads once the layer holds `cache_heads` heads, from the map
/// `kv_of` an observation recorded: the same map, or — when the layer was unfolded after the
/// observation (SpindleKV's repeat, [`LayerCache::repeat_heads`]: KV head `g` becomes copies
/// `g·times ..`) — the copy that serves the query head, in the query heads' order within `g`.
pub fn unfolded(kv_of: &[usize], cache_heads: usize) -> Vec<usize> {
    let observed = kv_of.iter().max().map_or(0, |m| m + 1);
    if observed == 0 || observed >= cache_heads {
        return kv_of.to_vec();
    }
    let times = cache_heads / observed;
    let per_copy = (kv_of.len() / observed / times).max(1);
    let mut rank = vec![0; observed];
    kv_of
        .iter()
        .map(|&g| {
            let r = rank[g];
            rank[g] += 1;
            g * times + r / per_copy
        })
        .collect()
}

/// Observation of every layer: only `attn_rows` rows and/or column sums, as asked.
pub fn observe(attn_rows: usize, column_sums: bool) -> ObserveConfig {
    ObserveConfig {
        attn_rows,
        rows_end: None,
        keys_values: false,
        column_sums,
        layers: None,
    }
}
