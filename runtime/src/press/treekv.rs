//! TreeKV (`docs/papers/treekv.md` §4, Algorithm 1; §4.2; §5.2): tree-structured eviction over the
//! method-selected segment of each head's cache, at prefill (blocks) and while decoding (tokens).
//!
//! **Cache layout.** As §5.2 sets every method up, a head's cache of `c_total` entries is
//! `sinks` initial tokens, the tree's `c = selected` entries and `recent` most recent tokens
//! (the planner's split, `methods::treekv::split`). In storage order: `[sinks][tree][recent]`.
//!
//! **Importance** (Algorithm 1 lines 6–10): every entry carries `S` (attention received, summed
//! over the steps it was held) and `C` (steps held); `S̄ = S/C`. Each step appends `0` to both,
//! adds the new row's attention to `S` and `1` to `C`. GQA: the row is the mean of the KV head's
//! query heads.
//!
//! **Eviction** (lines 9–16): when the tree holds `c + 1` entries, the scope is `{idx, idx+1}`
//! (1-based within the tree): if `S̄_idx > S̄_idx+1` the `(idx+1)`-th goes, else the `idx`-th.
//! Line 16 prints `idx ← (idx+1) mod c + 1`, which contradicts the text ("cycles through 1, 2, 3,
//! 4" for c = 4, back to 1 at step 17 of Figure 3): we use `idx ← idx mod c + 1`.
//!
//! **Prefill** (§4.2): the prompt's middle segment (between the sinks and the recent window) is
//! cut into blocks of `b` tokens (the last one may be shorter); a block's importance is the mean
//! `S̄` of its tokens, where `S`/`C` come from the last block of the prompt as observation window
//! (`b` rows). Algorithm 1 is replayed over the blocks with capacity `⌊c/b⌋` blocks; the kept
//! blocks, the sinks and the recent window stay, and the recent window grows leftwards until the
//! head holds exactly `c_total` entries. With the observation rows ending at the user's question
//! ([`crate::observe::ObserveConfig::rows_end`]) the prompt's tokens after them (template tail,
//! answer prefix) are kept too: the recent segment is at least that tail, inside the budget.
//!
//! **Positions** (§4.1, after StreamingLLM): after every eviction the kept entries are
//! re-assigned the positions `0..len` and their keys re-rotated by `new − old` (RoPE is a
//! rotation, so `R(new)·k = R(new − old)·R(old)·k`); the next token takes position `len`. The
//! original positions are kept by the press.

use burn::tensor::backend::Backend;
use kvplan_planner::{Method, TreeKvSection};

use super::from_plan::{FromPlan, MethodPress};
use super::options::PositionPolicy;
use super::{group_mean, last_row_mean, observe, Allocation, Capabilities, Press, PressKind};
use crate::cache::{KvCache, LayerCache};
use crate::error::Result;
use crate::model::rope::RopeSet;
use crate::observe::{AttentionRows, LayerObservation, ObserveConfig, Observer};

/// Algorithm 1's eviction in a tree of `scores.len() == cap + 1` entries: returns the 0-based
/// index to evict and advances `idx` (1-based) as `idx ← idx mod cap + 1`.
pub fn tree_evict(scores: &[f32], idx: &mut usize, cap: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let i = (*idx).clamp(1, cap);
    let evict = if scores[i - 1] > scores[i] { i } else { i - 1 };
    *idx = i % cap + 1;
    evict
}

/// Replays Algorithm 1 over items with fixed importance `scores` (arriving in order) at
/// capacity `cap`; returns the indices kept, ascending.
pub fn tree_replay(scores: &[f32], cap: usize) -> Vec<usize> {
    let mut held: Vec<usize> = Vec::new();
    let mut idx = 1;
    for i in 0..scores.len() {
        held.push(i);
        if held.len() > cap {
            let s: Vec<f32> = held.iter().map(|&j| scores[j]).collect();
            let e = tree_evict(&s, &mut idx, cap);
            held.remove(e);
        }
    }
    held
}

/// Per-(layer, head) state of the press.
#[derive(Debug, Clone, Default)]
struct HeadState {
    s: Vec<f32>,
    c: Vec<f32>,
    orig: Vec<usize>,
    idx: usize,
}

/// TreeKV with its cache split and prefill block size.
#[derive(Debug, Clone)]
pub struct TreeKvPress {
    budget: Allocation,
    sinks: usize,
    recent: usize,
    block: usize,
    rope: RopeSet,
    /// Re-assign positions after eviction (§4.1); on by default.
    pub reassign_positions: bool,
    state: Vec<Vec<HeadState>>,
    seen: usize,
}

impl MethodPress for TreeKvPress {
    /// The model's forward pass; re-assigns positions (§4.1). It evicts one entry per decode
    /// step (Algorithm 1), as the table's decode policy says.
    const KIND: PressKind = PressKind::SELECTION;

    /// The plan's budgets and sink/recent split, the section's block size; positions kept
    /// (re-assigned only at the trained context) when the request's position policy is `keep`.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        let s: &TreeKvSection = p.section_as()?;
        let b = p.budgets;
        let rope = p.config.rope_for(p.budgets.context_len);
        let mut press = Self::new(p.allocation(), b.sinks, b.recent, s.block_size, rope);
        press.reassign_positions = p.options.positions != Some(PositionPolicy::Keep);
        Ok(Box::new(press))
    }
}

impl TreeKvPress {
    /// `budget` entries per head (sinks + tree + recent), `sinks` and `recent` of
    /// them fixed, prefill blocks of `block` tokens; `rope`: the model's frequencies, for
    /// re-rotating keys.
    pub fn new(
        budget: Allocation,
        sinks: usize,
        recent: usize,
        block: usize,
        rope: RopeSet,
    ) -> Self {
        Self {
            budget,
            sinks,
            recent,
            block: block.max(1),
            rope,
            reassign_positions: true,
            state: Vec::new(),
            seen: 0,
        }
    }

    /// Original positions of the entries of (`layer`, `head`), in storage order.
    pub fn original_positions(&self, layer: usize, head: usize) -> &[usize] {
        &self.state[layer][head].orig
    }

    /// `(sinks, tree capacity)` of a head holding at most `total` entries with `recent` recent.
    fn shape(&self, total: usize, recent: usize) -> (usize, usize) {
        let s = self.sinks.min(total);
        (s, total.saturating_sub(s + recent))
    }

    /// Prefill selection of one head: storage indices kept (ascending). `tail`: entries after
    /// the observation window (a question-end window), kept as part of the recent segment.
    fn prefill_keep(&self, total: usize, s_bar: &[f32], tail: usize) -> Vec<usize> {
        let n = s_bar.len();
        if n <= total {
            return (0..n).collect();
        }
        let recent = self.recent.max(tail);
        let (s, cap) = self.shape(total, recent);
        let mid_end = n.saturating_sub(recent).max(s);
        let blocks: Vec<(usize, usize)> = (s..mid_end)
            .step_by(self.block)
            .map(|a| (a, (a + self.block).min(mid_end)))
            .collect();
        let scores: Vec<f32> = blocks
            .iter()
            .map(|&(a, e)| s_bar[a..e].iter().sum::<f32>() / (e - a) as f32)
            .collect();
        let mut keep = vec![false; n];
        keep[..s].fill(true);
        for b in tree_replay(&scores, cap / self.block) {
            keep[blocks[b].0..blocks[b].1].fill(true);
        }
        let mut count = keep.iter().filter(|&&k| k).count();
        for k in keep.iter_mut().rev() {
            if count >= total {
                break;
            }
            if !*k {
                *k = true;
                count += 1;
            }
        }
        (0..n).filter(|&i| keep[i]).collect()
    }

    fn layer_prefill<B: Backend>(
        &mut self,
        l: usize,
        cache: &mut LayerCache<B>,
        obs: Option<&LayerObservation>,
    ) -> Vec<HeadState> {
        let kv = cache.kv_heads();
        let (sums, counts) = window_stats(cache, obs, self.block);
        let last_row = obs
            .and_then(|o| o.attention.last())
            .and_then(|r| r.query_positions.last().copied());
        let mut keep = Vec::with_capacity(kv);
        let mut states = Vec::with_capacity(kv);
        for h in 0..kv {
            let s_bar: Vec<f32> = sums[h]
                .iter()
                .zip(&counts[h])
                .map(|(s, c)| if *c > 0.0 { s / c } else { 0.0 })
                .collect();
            let tail =
                last_row.map_or(0, |q| cache.positions(h).iter().filter(|&&p| p > q).count());
            let k = self.prefill_keep(self.budget.budget(l, h), &s_bar, tail);
            states.push(HeadState {
                s: k.iter().map(|&i| sums[h][i]).collect(),
                c: k.iter().map(|&i| counts[h][i]).collect(),
                orig: k.iter().map(|&i| cache.positions(h)[i]).collect(),
                idx: 1,
            });
            keep.push(k);
        }
        if keep.iter().enumerate().any(|(h, k)| k.len() < cache.len(h)) {
            cache.retain(&keep);
        }
        states
    }

    /// One decode step of one head: update S and C with `row`, evict if the tree overflows.
    fn head_step(&mut self, l: usize, h: usize, row: Option<&[f32]>, len: usize) -> Option<usize> {
        let total = self.budget.budget(l, h);
        let recent = self.recent;
        let (s, cap) = self.shape(total, recent);
        let st = &mut self.state[l][h];
        st.s.resize(len, 0.0);
        st.c.resize(len, 0.0);
        if let Some(r) = row {
            for (x, p) in st.s.iter_mut().zip(r) {
                *x += p;
            }
        }
        for c in &mut st.c {
            *c += 1.0;
        }
        if len <= total {
            return None;
        }
        let tree_end = len.saturating_sub(recent).max(s);
        let s_bar: Vec<f32> = (s..tree_end).map(|i| st.s[i] / st.c[i].max(1.0)).collect();
        let e = s + tree_evict(&s_bar, &mut st.idx, cap);
        st.s.remove(e);
        st.c.remove(e);
        st.orig.remove(e);
        Some(e)
    }
}

/// `S` and `C` of every entry from the prefill's observation window: `S` sums the window rows'
/// attention (mean over the KV head's query heads), `C` counts the window rows that can see it.
fn window_stats<B: Backend>(
    cache: &LayerCache<B>,
    obs: Option<&LayerObservation>,
    block: usize,
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let kv = cache.kv_heads();
    let rows = obs
        .and_then(|o| o.attention.last())
        .map(|r| last_rows(r, block));
    let mut sums: Vec<Vec<f32>> = (0..kv).map(|h| vec![0.0; cache.len(h)]).collect();
    let mut counts = sums.clone();
    if let Some(rows) = &rows {
        let per_q: Vec<Vec<f32>> = rows
            .probs
            .iter()
            .map(|head_rows| {
                let len = head_rows.first().map_or(0, Vec::len);
                (0..len)
                    .map(|j| head_rows.iter().map(|r| r[j]).sum())
                    .collect()
            })
            .collect();
        sums = group_mean(&per_q, &rows.kv_of, kv);
        for (h, c) in counts.iter_mut().enumerate() {
            let pos = cache.positions(h);
            for (j, x) in c.iter_mut().enumerate() {
                *x = rows
                    .query_positions
                    .iter()
                    .filter(|&&q| q >= pos[j])
                    .count() as f32;
            }
        }
    }
    (sums, counts)
}

/// The last `n` observed rows only (an observer shared with other presses may record more).
fn last_rows(rows: &AttentionRows, n: usize) -> AttentionRows {
    let from = rows.query_positions.len().saturating_sub(n);
    AttentionRows {
        query_positions: rows.query_positions[from..].to_vec(),
        probs: rows.probs.iter().map(|r| r[from..].to_vec()).collect(),
        key_positions: rows.key_positions.clone(),
        kv_of: rows.kv_of.clone(),
    }
}

impl<B: Backend> Press<B> for TreeKvPress {
    fn name(&self) -> &str {
        Method::TreeKv.name()
    }

    fn capabilities(&self) -> Capabilities {
        Self::KIND.serving(Some(Method::TreeKv))
    }

    fn reassign_positions(&mut self, cache: &mut KvCache<B>, rope: &RopeSet) -> Result<()> {
        super::reassign_all(cache, rope);
        Ok(())
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        Some(observe(self.block, false))
    }

    fn after_prefill(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        let mut state = Vec::with_capacity(cache.layers.len());
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            let o = obs.and_then(|o| o.layers.get(l));
            state.push(self.layer_prefill(l, layer, o));
        }
        self.state = state;
        self.seen = cache.next_position;
        self.reassign(cache);
        Ok(())
    }

    fn decode_observe(&self) -> Option<ObserveConfig> {
        Some(observe(1, false))
    }

    fn after_decode(&mut self, cache: &mut KvCache<B>, obs: Option<&Observer>) -> Result<()> {
        self.seen += 1;
        let mut evicted = false;
        for (l, layer) in cache.layers.iter_mut().enumerate() {
            let kv = layer.kv_heads();
            let rows = obs
                .and_then(|o| o.layers.get(l))
                .and_then(|o| o.attention.last())
                .map(|a| last_row_mean(a, kv));
            let mut keep = Vec::with_capacity(kv);
            let mut any = false;
            for h in 0..kv {
                let len = layer.len(h);
                let seen = self.seen;
                self.state[l][h].orig.resize(len, seen - 1);
                let row = rows.as_ref().map(|r| r[h].as_slice());
                let e = self.head_step(l, h, row, len);
                any |= e.is_some();
                keep.push((0..len).filter(|&i| Some(i) != e).collect::<Vec<_>>());
            }
            if any {
                layer.retain(&keep);
                evicted = true;
            }
        }
        if evicted {
            self.reassign(cache);
        }
        Ok(())
    }
}

impl TreeKvPress {
    /// Re-assigns positions `0..len` to every head's entries (§4.1), re-rotating the keys.
    fn reassign<B: Backend>(&self, cache: &mut KvCache<B>) {
        if !self.reassign_positions {
            return;
        }
        super::reassign_all(cache, &self.rope);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed importance of tokens t1..t17 (Figure 3's 17-token sequence, c = 4).
    const S: [f32; 17] = [
        1.0, 5.0, 3.0, 2.0, 4.0, 6.0, 1.0, 7.0, 2.0, 8.0, 3.0, 5.0, 9.0, 4.0, 6.0, 2.0, 5.0,
    ];

    #[test]
    fn scope_cycles_one_to_c_and_evicts_the_lower_of_the_pair() {
        // By hand (held tokens, idx, the pair compared → evicted):
        // t5:  [1 2 3 4 5] idx 1: t1(1) vs t2(5) → t1 (Figure 3: "The" goes first); idx 2
        // t6:  [2 3 4 5 6] idx 2: t3(3) > t4(2) → t4; idx 3
        // t7:  [2 3 5 6 7] idx 3: t5(4) vs t6(6) → t5; idx 4
        // t8:  [2 3 6 7 8] idx 4: t7(1) vs t8(7) → t7; idx 1
        // t9:  [2 3 6 8 9] idx 1: t2(5) > t3(3) → t3; idx 2
        // t10: [2 6 8 9 10] idx 2: t6(6) vs t8(7) → t6; idx 3
        // t11: [2 8 9 10 11] idx 3: t9(2) vs t10(8) → t9; idx 4
        // t12: [2 8 10 11 12] idx 4: t11(3) vs t12(5) → t11; idx 1
        // t13: [2 8 10 12 13] idx 1: t2(5) vs t8(7) → t2; idx 2
        // t14: [8 10 12 13 14] idx 2: t10(8) > t12(5) → t12; idx 3
        // t15: [8 10 13 14 15] idx 3: t13(9) > t14(4) → t14; idx 4
        // t16: [8 10 13 15 16] idx 4: t15(6) > t16(2) → t16; idx 1
        // t17: [8 10 13 15 17] idx 1 (back to 1 at step 17, as the text says): t8(7) vs t10(8)
        //      → t8. Kept: t10, t13, t15, t17.
        let mut held: Vec<usize> = Vec::new();
        let mut idx = 1;
        let mut evicted = Vec::new();
        let mut idx_at_eviction = Vec::new();
        for t in 1..=17usize {
            held.push(t);
            if held.len() > 4 {
                idx_at_eviction.push(idx);
                let s: Vec<f32> = held.iter().map(|&j| S[j - 1]).collect();
                let e = tree_evict(&s, &mut idx, 4);
                evicted.push(held.remove(e));
            }
        }
        assert_eq!(evicted, vec![1, 4, 5, 7, 3, 6, 9, 11, 2, 12, 14, 16, 8]);
        assert_eq!(held, vec![10, 13, 15, 17]);
        assert_eq!(idx_at_eviction, vec![1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1]);
        assert_eq!(tree_replay(&S, 4), vec![9, 12, 14, 16]);
    }

    #[test]
    fn ties_evict_the_older_entry() {
        // Line 11 evicts idx+1 only when S̄_idx is strictly larger.
        let mut idx = 1;
        assert_eq!(tree_evict(&[2.0, 2.0, 1.0], &mut idx, 2), 0);
        assert_eq!(idx, 2);
    }

    /// The prefill's kept entries of 14 tokens of importance `s_bar` at budget `total` with a
    /// tail of `tail` tokens after the window: 2 sinks and 2 recent, blocks of 2.
    fn prefill_keep(total: usize, s_bar: &[f32; 14], tail: usize) -> Vec<usize> {
        let press = TreeKvPress::new(Allocation::Uniform(8), 2, 2, 2, RopeSet::uniform(2, 1e4, 1));
        press.prefill_keep(total, s_bar, tail)
    }

    #[test]
    fn prefill_replays_the_tree_over_blocks() {
        // 14 tokens, total 8 = 2 sinks + tree 4 + 2 recent, blocks of 2 → tree of 2 blocks.
        // Middle [2, 12) → blocks b0..b4 with mean importance 3, 1, 4, 2, 5.
        // b2 arrives: [b0 b1 b2] idx 1: 3 > 1 → b1 goes; idx 2.
        // b3: [b0 b2 b3] idx 2: 4 > 2 → b3 goes; idx 1.
        // b4: [b0 b2 b4] idx 1: 3 vs 4 → b0 goes. Kept b2 = 6,7 and b4 = 10,11.
        let s_bar = [
            0.0, 0.0, 3.0, 3.0, 1.0, 1.0, 4.0, 4.0, 2.0, 2.0, 5.0, 5.0, 9.0, 9.0,
        ];
        assert_eq!(prefill_keep(8, &s_bar, 0), vec![0, 1, 6, 7, 10, 11, 12, 13]);
        // Budget 9: the tree still holds ⌊5/2⌋ = 2 blocks; the recent window takes the spare
        // entry (token 9, the newest one not yet kept).
        assert_eq!(
            prefill_keep(9, &s_bar, 0),
            vec![0, 1, 6, 7, 9, 10, 11, 12, 13]
        );
        // A prompt within the budget is kept whole.
        assert_eq!(prefill_keep(20, &s_bar, 0).len(), 14);
    }

    #[test]
    fn prefill_keeps_the_tail_after_a_question_end_window() {
        // The 14 tokens above with a 3-token tail (11, 12, 13) after the window: the recent
        // segment is max(2, 3) = 3, so the tree holds ⌊(8 − 2 − 3)/2⌋ = 1 block of the middle
        // [2, 11): b0 3, b1 1, b2 4, b3 2, b4 = token 10 alone, 5. Capacity 1: b1 goes (3 > 1),
        // b0 (3 vs 4), b3 (4 > 2), b2 (4 vs 5): token 10 kept. Sinks 0, 1 + 10 + tail 11–13
        // hold 6; the recent segment grows leftwards by 9 and 8 to the budget of 8.
        let s_bar = [
            0.0, 0.0, 3.0, 3.0, 1.0, 1.0, 4.0, 4.0, 2.0, 2.0, 5.0, 0.0, 0.0, 0.0,
        ];
        assert_eq!(prefill_keep(8, &s_bar, 3), vec![0, 1, 8, 9, 10, 11, 12, 13]);
    }
}
