//! PoD (`docs/papers/pod.md` §2): head-wise blocks of similar layers share the
//! distant keys stored at a block's lowest layer (Algorithm 1, δ; the allocator below); every head
//! keeps its n_s initial and n_r recent tokens, and τ gates the shared distant attention (eq. 3–4).
//! PoD does not follow the budget target: it keeps every token's value and saves key slots. A
//! windowed layer is a block of its own (it shares no keys): blocks never mix windowed and global
//! layers (the allocator below).
//!
//! ## The allocator
//!
//! PoD head-wise layer blocks (`docs/papers/pod.md` §2.1, eq. 2, Algorithm 1;
//! paper defaults δ = 0.5, n_s = 16, n_r = 4080 at 32K, τ = 0.7).
//!
//! **Similarity.** The paper calls the average Jensen–Shannon *divergence* of eq. 2 a
//! "similarity" and merges layers when it is ≥ δ, which would group the *least* similar layers.
//! We resolve it as similarity = 1 − JS with log base 2 (so JS and the similarity lie in [0, 1]);
//! the profiler stores that similarity, and layers merge when it is ≥ δ.
//!
//! **Algorithm 1** (per query head, bottom-up greedy): start with block {0}; layer ℓ joins the
//! last block if its similarity with *every* layer already in it is ≥ δ, else opens a new block.
//!
//! **Windowed layers** (kvplan's rule; the paper's models have none): a layer with a sliding
//! window holds its window whatever the method, so it shares no keys — it is a block of its own —
//! and a block never mixes windowed and global layers. Blocks group adjacent global layers only
//! (Gemma 3's global layers 5, 11, 17 are never adjacent, so PoD shares nothing there).
//!
//! **Saving, per KV head.** Within a block, distant keys are stored only at its lowest layer. The
//! cache stores KV heads, shared by several query heads that may be grouped differently, so a KV
//! head's distant keys at layer ℓ can be dropped only if ℓ is not the lowest layer of a block for
//! *any* of its query heads. The saving is the fraction of (layer, KV head) slots whose distant
//! keys are dropped: the share of key states saved as n grows (values are kept everywhere).
//!
//! **Proximal window.** n_s + n_r equals the per-head target, as the paper sets PoD's proximal
//! tokens to the baselines' window (n_s = 16, n_r = 4080 at a 4096 budget): n_s = min(16, B),
//! n_r = B − n_s. τ gates the distant attention of layers that are not the lowest of their block.
//!
//! **Blocks per KV head** (`Grouping::KvHead`, kvplan's option for GQA models; the paper's models
//! are evaluated with head-wise blocks and say nothing of GQA): with one grouping per query head a
//! KV head of g query heads drops its keys at a layer only where none of the g starts a block,
//! which on Qwen2.5-0.5B (7 per KV head) and Gemma 3 (4) happens nowhere — PoD then saves
//! nothing. Under `KvHead` Algorithm 1 runs once per KV head on the *least* similarity of its
//! query heads, `sim_kv(a, b) = min_h sim_h(a, b)`, and each of its query heads takes those
//! blocks: every query head of a block is still ≥ δ-similar across it (Algorithm 1's condition
//! holds per head), and every layer past a block's lowest drops the KV head's distant keys.
//!
//! δ can be chosen for a target saving: the largest δ (among the similarity values, so the choice
//! is exact) whose blocks reach it.

use super::MethodSection;
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// PoD δ, n_s and τ (§3).
pub const DEFAULT_POD_DELTA: f64 = 0.5;
/// See [`DEFAULT_POD_DELTA`].
pub const DEFAULT_POD_SINKS: usize = 16;
/// See [`DEFAULT_POD_DELTA`].
pub const DEFAULT_POD_TAU: f64 = 0.7;

/// Options of the PoD section.
#[derive(Clone, Debug, PartialEq)]
pub struct PodOptions {
    /// Similarity threshold δ; ignored when `target_saving` is set.
    pub delta: f64,
    /// Choose δ for this saving instead.
    pub target_saving: Option<f64>,
    /// Gate threshold τ.
    pub tau: f64,
    /// Blocks per query head (the paper) or per KV head (the allocator below, for GQA models).
    pub grouping: Grouping,
}

impl Default for PodOptions {
    fn default() -> Self {
        PodOptions {
            delta: DEFAULT_POD_DELTA,
            target_saving: None,
            tau: DEFAULT_POD_TAU,
            grouping: Grouping::QueryHead,
        }
    }
}

/// PoD: head-wise layer blocks (the allocator below).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PodSection {
    /// Similarity threshold used for the blocks.
    pub delta: f64,
    /// The saving δ was chosen for, if it was (null: δ given).
    pub target_saving: Option<f64>,
    /// Saving of these blocks: fraction of (layer, KV head) slots sharing distant keys.
    pub saving: f64,
    /// n_s, initial tokens in the proximal window (n_r is the budget minus n_s).
    pub sinks: usize,
    /// Gate threshold τ for layers that are not the lowest of their block.
    pub tau: f64,
    /// `[q_head][block] = [first_layer, last_layer]`, bottom-up.
    pub blocks: Vec<Vec<[usize; 2]>>,
    /// Whose similarities the blocks group: `query-head` (the paper; left out of the file) or
    /// `kv-head` (the query heads of a KV head share its blocks).
    #[serde(default, skip_serializing_if = "Grouping::is_query_head")]
    pub grouping: Grouping,
}

impl MethodSection for PodSection {
    const FOLLOWS_TARGET: bool = false;

    type Options = PodOptions;

    fn build(_: Method, p: &Profile, _: usize, opts: &PodOptions) -> Result<Self> {
        let o = opts;
        let g = &p.model.geometry;
        let sims = &p.layer_similarity.per_head;
        let delta = match o.target_saving {
            Some(t) => choose_delta(sims, g, o.grouping, t)?,
            None => o.delta,
        };
        let blocks = blocks(sims, delta, g, o.grouping);
        Ok(PodSection {
            delta,
            target_saving: o.target_saving,
            saving: saving(&blocks, g),
            sinks: DEFAULT_POD_SINKS,
            tau: o.tau,
            blocks,
            grouping: o.grouping,
        })
    }

    fn validate(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::in_range(&format!("{p}.delta"), self.delta, 0.0, 1.0)?;
        validate::in_range(&format!("{p}.tau"), self.tau, 0.0, 1.0)?;
        if let Some(t) = self.target_saving {
            validate::in_range(&format!("{p}.target_saving"), t, 0.0, 1.0)?;
        }
        self.validate_blocks(p, g)?;
        let saving = saving(&self.blocks, g);
        if !self.saving.is_finite() || (self.saving - saving).abs() > 1e-9 {
            return Err(Error::invalid(
                format!("{p}.saving"),
                format!("{saving} (from the blocks)"),
                self.saving,
            ));
        }
        Ok(())
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        (out.sinks, out.recent) = proximal_split(b, self.sinks);
        out.per_layer_per_kv_head = vec![vec![n; g.kv_heads]; g.layers];
        out.keys_per_layer_per_kv_head = keys_kept(&shared_keys(&self.blocks, g), n, b);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!(
            "δ {}, τ {}, blocks per {}, saving {:.4} of key slots",
            self.delta,
            self.tau,
            self.grouping.name(),
            self.saving
        )
    }
}

impl PodSection {
    /// Every query head's blocks cover the layers bottom-up without gaps.
    fn validate_blocks(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::len(
            &format!("{p}.blocks"),
            self.blocks.len(),
            g.q_heads,
            "one per query head",
        )?;
        for (h, blocks) in self.blocks.iter().enumerate() {
            let mut next = 0;
            for (i, b) in blocks.iter().enumerate() {
                let q = format!("{p}.blocks[{h}][{i}]");
                if b[0] != next || b[1] < b[0] || b[1] >= g.layers {
                    return Err(Error::invalid(
                        q,
                        format!("a block [{next}, l] with {next} <= l < {}", g.layers),
                        format!("[{}, {}]", b[0], b[1]),
                    ));
                }
                if let Some(w) = (b[0]..=b[1]).find(|&l| g.is_windowed(l)) {
                    if b[1] > b[0] {
                        return Err(Error::invalid(
                            q,
                            format!("a single-layer block for windowed layer {w}"),
                            format!("[{}, {}]", b[0], b[1]),
                        ));
                    }
                }
                next = b[1] + 1;
            }
            if next != g.layers {
                return Err(Error::invalid(
                    format!("{p}.blocks[{h}]"),
                    format!("blocks covering layers 0..{}", g.layers),
                    format!("blocks ending at layer {}", next as i64 - 1),
                ));
            }
        }
        if self.grouping == Grouping::KvHead {
            for h in 0..g.q_heads {
                let first = g.q_heads_of(g.kv_of(h)).next().unwrap_or(h);
                if self.blocks[h] != self.blocks[first] {
                    return Err(Error::invalid(
                        format!("{p}.blocks[{h}]"),
                        format!(
                            "the blocks of query head {first} (grouping kv-head: the query heads \
                             of KV head {} share them)",
                            g.kv_of(h)
                        ),
                        "other blocks",
                    ));
                }
            }
        }
        Ok(())
    }
}

// ---- The allocator ----

/// Whose similarities Algorithm 1 groups (module header).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Grouping {
    /// One grouping per query head (the paper's head-wise blocks).
    #[default]
    QueryHead,
    /// One grouping per KV head on its query heads' least similarity, shared by them.
    KvHead,
}

impl Grouping {
    /// The name in plans and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Grouping::QueryHead => "query-head",
            Grouping::KvHead => "kv-head",
        }
    }

    /// True for the default (plans leave it out).
    pub fn is_query_head(&self) -> bool {
        *self == Grouping::QueryHead
    }
}

impl std::str::FromStr for Grouping {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        [Grouping::QueryHead, Grouping::KvHead]
            .into_iter()
            .find(|g| g.name() == s)
            .ok_or_else(|| format!("expected query-head or kv-head, found `{s}`"))
    }
}

/// Algorithm 1 for one head: `sim[a][b]` (layers × layers) → blocks `[first, last]`, bottom-up;
/// `windowed[l]` marks layers with a sliding window, each a block of its own.
pub fn group_layers(sim: &[Vec<f64>], delta: f64, windowed: &[bool]) -> Vec<[usize; 2]> {
    let own = |l: usize| windowed.get(l).copied().unwrap_or(false);
    let mut blocks: Vec<[usize; 2]> = Vec::new();
    for (l, row) in sim.iter().enumerate() {
        match blocks.last_mut() {
            Some(block)
                if !own(l) && !own(block[0]) && (block[0]..=block[1]).all(|m| row[m] >= delta) =>
            {
                block[1] = l
            }
            _ => blocks.push([l, l]),
        }
    }
    blocks
}

/// Blocks of every query head: `per_head[q_head][layer][layer]` → `[q_head][block]`, windowed
/// layers of `geometry` alone in their blocks; under `Grouping::KvHead` the query heads of a KV
/// head share the blocks of their least similarity (module header).
pub fn blocks(
    per_head: &[Vec<Vec<f64>>],
    delta: f64,
    geometry: &Geometry,
    grouping: Grouping,
) -> Vec<Vec<[usize; 2]>> {
    let windowed: Vec<bool> = (0..geometry.layers)
        .map(|l| geometry.is_windowed(l))
        .collect();
    match grouping {
        Grouping::QueryHead => per_head
            .iter()
            .map(|s| group_layers(s, delta, &windowed))
            .collect(),
        Grouping::KvHead => {
            let per_kv: Vec<Vec<[usize; 2]>> = (0..geometry.kv_heads)
                .map(|kv| group_layers(&least_similarity(per_head, geometry, kv), delta, &windowed))
                .collect();
            (0..per_head.len())
                .map(|h| per_kv[geometry.kv_of(h)].clone())
                .collect()
        }
    }
}

/// `sim_kv[a][b]`: the least of `a`, `b`'s similarity over the query heads reading KV head `kv`.
fn least_similarity(per_head: &[Vec<Vec<f64>>], geometry: &Geometry, kv: usize) -> Vec<Vec<f64>> {
    let mut heads = geometry.q_heads_of(kv).map(|h| &per_head[h]);
    let Some(first) = heads.next() else {
        return Vec::new();
    };
    heads.fold(first.clone(), |mut least, s| {
        for (row, other) in least.iter_mut().zip(s) {
            for (x, y) in row.iter_mut().zip(other) {
                *x = x.min(*y);
            }
        }
        least
    })
}

/// `[layer][kv_head]`: true when the KV head's distant keys at that layer are shared (dropped),
/// i.e. the layer is not the lowest of a block for any query head reading the KV head.
pub fn shared_keys(blocks: &[Vec<[usize; 2]>], geometry: &Geometry) -> Vec<Vec<bool>> {
    let mut lowest = vec![vec![false; geometry.kv_heads]; geometry.layers];
    for (h, head_blocks) in blocks.iter().enumerate() {
        for b in head_blocks {
            if let Some(row) = lowest.get_mut(b[0]) {
                row[geometry.kv_of(h)] = true;
            }
        }
    }
    lowest
        .into_iter()
        .map(|row| row.into_iter().map(|low| !low).collect())
        .collect()
}

/// Fraction of (layer, KV head) slots whose distant keys are shared.
pub fn saving(blocks: &[Vec<[usize; 2]>], geometry: &Geometry) -> f64 {
    let shared = shared_keys(blocks, geometry);
    let n = shared.iter().flatten().filter(|&&s| s).count();
    n as f64 / (geometry.layers * geometry.kv_heads) as f64
}

/// The largest δ whose blocks (under `grouping`) save at least `target` (a fraction in [0, 1)).
pub fn choose_delta(
    per_head: &[Vec<Vec<f64>>],
    geometry: &Geometry,
    grouping: Grouping,
    target: f64,
) -> Result<f64> {
    let mut candidates: Vec<f64> = per_head.iter().flatten().flatten().copied().collect();
    candidates.push(0.0);
    candidates.sort_by(|a, b| b.total_cmp(a));
    candidates.dedup();
    let mut best = 0.0_f64;
    for &delta in &candidates {
        let s = saving(&blocks(per_head, delta, geometry, grouping), geometry);
        if s >= target {
            return Ok(delta);
        }
        best = best.max(s);
    }
    Err(Error::budget(
        Method::Pod,
        format!(
            "no δ reaches a saving of {target}; the most these similarities allow is {best:.4}"
        ),
    ))
}

/// Key entries kept `[layer][kv_head]` at context `n` with proximal window `proximal`
/// (n_s + n_r): the whole context where distant keys are stored, the proximal window elsewhere.
pub fn keys_kept(shared: &[Vec<bool>], n: usize, proximal: usize) -> Vec<Vec<usize>> {
    shared
        .iter()
        .map(|row| {
            row.iter()
                .map(|&s| if s { proximal.min(n) } else { n })
                .collect()
        })
        .collect()
}

/// PoD's split of the proximal window: `(n_s, n_r)` with n_s + n_r = `budget`.
pub fn proximal_split(budget: usize, sinks: usize) -> (usize, usize) {
    let s = sinks.min(budget);
    (s, budget - s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 layers, 4 query heads on 2 KV heads (heads 0, 1 read KV 0; 2, 3 read KV 1).
    fn section(blocks: Vec<Vec<[usize; 2]>>, grouping: Grouping) -> PodSection {
        let g = Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        PodSection {
            delta: 0.5,
            target_saving: None,
            saving: saving(&blocks, &g),
            sinks: DEFAULT_POD_SINKS,
            tau: DEFAULT_POD_TAU,
            blocks,
            grouping,
        }
    }

    #[test]
    fn kv_head_grouping_is_written_and_checked_query_head_is_left_out() {
        let g = Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        let (one, two) = (vec![[0, 1]], vec![[0, 0], [1, 1]]);
        // Query-head blocks (the default) may differ within a KV head and are written as before:
        // no `grouping` key, so plans made before the option keep their bytes and hashes.
        let q = section(
            vec![one.clone(), two.clone(), one.clone(), one.clone()],
            Grouping::QueryHead,
        );
        q.validate("pod", &g).unwrap_or_else(|e| panic!("{e}"));
        let text = serde_json::to_string(&q).unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("grouping"), "{text}");
        // KV 0's heads differ in layer 1, KV 1's share [0, 1]: saving 1/4 (layer 1 of KV 1).
        assert!((q.saving - 0.25).abs() < 1e-12);
        // The same blocks under kv-head are refused at query head 1, naming the rule.
        let bad = section(q.blocks.clone(), Grouping::KvHead);
        let err = bad
            .validate("pod", &g)
            .expect_err("heads of KV 0 differ")
            .to_string();
        assert!(
            err.contains("pod.blocks[1]") && err.contains("kv-head"),
            "{err}"
        );
        // Shared within each KV head: valid, written, and read back.
        let kv = section(vec![two.clone(), two, one.clone(), one], Grouping::KvHead);
        kv.validate("pod", &g).unwrap_or_else(|e| panic!("{e}"));
        let text = serde_json::to_string(&kv).unwrap_or_else(|e| panic!("{e}"));
        assert!(text.contains(r#""grouping":"kv-head""#), "{text}");
        let back: PodSection = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, kv);
    }
}

#[cfg(test)]
mod allocator_tests {
    use super::*;

    /// 4 layers. Head A: layers 0–1 alike (0.9), 2 like 1 (0.8) but not 0 (0.3); 3 alone.
    fn head_a() -> Vec<Vec<f64>> {
        vec![
            vec![1.0, 0.9, 0.3, 0.1],
            vec![0.9, 1.0, 0.8, 0.2],
            vec![0.3, 0.8, 1.0, 0.4],
            vec![0.1, 0.2, 0.4, 1.0],
        ]
    }

    /// Head B: every pair 0.6.
    fn head_b() -> Vec<Vec<f64>> {
        (0..4)
            .map(|a| (0..4).map(|b| if a == b { 1.0 } else { 0.6 }).collect())
            .collect()
    }

    #[test]
    fn greedy_grouping_needs_every_pair_in_the_block() {
        // δ = 0.5, head A: {0}; 1 vs 0: 0.9 ≥ .5 → {0,1}; 2 vs 0: 0.3 < .5 → new {2};
        // 3 vs 2: 0.4 < .5 → {3}. Blocks [0,1], [2,2], [3,3].
        let global = [false; 4];
        assert_eq!(
            group_layers(&head_a(), 0.5, &global),
            vec![[0, 1], [2, 2], [3, 3]]
        );
        // δ = 0.25: 2 vs 0 (0.3) and 1 (0.8) pass → {0,1,2}; 3 vs 0: 0.1 fails → {3}.
        assert_eq!(group_layers(&head_a(), 0.25, &global), vec![[0, 2], [3, 3]]);
        // Head B at δ = 0.5: one block.
        assert_eq!(group_layers(&head_b(), 0.5, &global), vec![[0, 3]]);
    }

    #[test]
    fn windowed_layers_are_blocks_of_their_own() {
        // Head B (every pair 0.6) at δ = 0.5 is one block [0, 3] when all layers are global.
        // Windows on 0 and 2: each windowed layer opens its own block and no layer joins it
        // → four single-layer blocks; the same with windows on 1 and 3. Windows on 2 and 3:
        // 0 and 1 (global, 0.6 ≥ 0.5) share [0, 1]; 2 and 3 stand alone.
        let one = |w: [bool; 4]| group_layers(&head_b(), 0.5, &w);
        let singles = vec![[0, 0], [1, 1], [2, 2], [3, 3]];
        assert_eq!(one([true, false, true, false]), singles);
        assert_eq!(one([false, true, false, true]), singles);
        assert_eq!(
            one([false, false, true, true]),
            vec![[0, 1], [2, 2], [3, 3]]
        );
        // The geometry's windows: layers 0 and 2 windowed, 2 query heads on 1 KV head.
        // Both heads' blocks are singletons: every layer keeps its keys, saving 0.
        let g = Geometry::new(4, 2, 1, 8)
            .and_then(|g| g.with_windows(vec![Some(512), None, Some(512), None]))
            .unwrap_or_else(|e| panic!("{e}"));
        let bl = blocks(&[head_b(), head_b()], 0.5, &g, Grouping::QueryHead);
        assert_eq!(bl, vec![singles.clone(), singles]);
        assert_eq!(saving(&bl, &g), 0.0);
    }

    #[test]
    fn a_kv_head_keeps_keys_where_any_query_head_starts_a_block() {
        // 2 query heads on 1 KV head. δ = 0.5: A starts blocks at 0, 2, 3; B at 0.
        // Union of lowest layers {0, 2, 3}: only layer 1 drops its distant keys → saving 1/4.
        let g = Geometry::new(4, 2, 1, 8).unwrap_or_else(|e| panic!("{e}"));
        let bl = blocks(&[head_a(), head_b()], 0.5, &g, Grouping::QueryHead);
        assert_eq!(
            shared_keys(&bl, &g),
            vec![vec![false], vec![true], vec![false], vec![false]]
        );
        assert!((saving(&bl, &g) - 0.25).abs() < 1e-12);
        // Per query head the saving would be (1 + 3)/8 = 0.5: the KV rule is stricter.
    }

    #[test]
    fn kv_head_blocks_group_on_the_least_similarity_of_the_query_heads() {
        // 2 query heads on 1 KV head, A and B. The least similarity: 0–1 min(0.9, 0.6) = 0.6,
        // 0–2 0.3, 1–2 0.6, 0–3 0.1, 1–3 0.2, 2–3 0.4. δ = 0.5: {0,1}; 2 vs 0: 0.3 → {2};
        // 3 vs 2: 0.4 → {3}. Both heads get [0,1], [2,2], [3,3]: layer 1 drops the KV head's
        // distant keys → saving 1/4, as under query-head blocks (A's starts cover B's).
        let g = Geometry::new(4, 2, 1, 8).unwrap_or_else(|e| panic!("{e}"));
        let want = vec![[0, 1], [2, 2], [3, 3]];
        let bl = blocks(&[head_a(), head_b()], 0.5, &g, Grouping::KvHead);
        assert_eq!(bl, vec![want.clone(), want]);
        assert!((saving(&bl, &g) - 0.25).abs() < 1e-12);
        // A head C whose blocks start where A's do not: every pair 0.6 but 1–2 (0.2), so C
        // alone is [0,1], [2,3]. Query-head blocks: starts {0, 2, 3} ∪ {0, 2} → only layer 1
        // shared. KV-head blocks on min(A, C): 0–1 0.6, 0–2 0.3 → [0,1]; 2–3 min(0.4, 0.6) = 0.4
        // < 0.5 → [2], [3]: the same 1/4. At δ = 0.35: query-head A [0,1],[2,3] (0–2 0.3 fails;
        // 2–3 0.4), C [0,1],[2,3] → starts {0, 2}: layers 1 and 3 shared, 2/4; KV-head on the
        // least: [0,1], [2,3] (2–3 0.4 ≥ 0.35) → 2/4.
        let c: Vec<Vec<f64>> = (0..4)
            .map(|a| {
                (0..4)
                    .map(|b| match (a.min(b), a.max(b)) {
                        (x, y) if x == y => 1.0,
                        (1, 2) => 0.2,
                        _ => 0.6,
                    })
                    .collect()
            })
            .collect();
        let sims = [head_a(), c];
        for grouping in [Grouping::QueryHead, Grouping::KvHead] {
            assert!((saving(&blocks(&sims, 0.5, &g, grouping), &g) - 0.25).abs() < 1e-12);
            let bl = blocks(&sims, 0.35, &g, grouping);
            assert!(
                (saving(&bl, &g) - 0.5).abs() < 1e-12,
                "{grouping:?}: {bl:?}"
            );
        }
    }

    #[test]
    fn kv_head_blocks_save_where_query_head_blocks_on_a_gqa_model_cannot() {
        // 2 query heads on 1 KV head that split at different layers. Query-head blocks at
        // δ = 0.5: A {0,1},{2},{3} starts {0, 2, 3}; E {0},{1,2},{3} starts {0, 1, 3} — their union
        // is every layer, so the KV head keeps its keys everywhere (saving 0). KV-head blocks on
        // the least similarity: 0–1 min(0.9, 0.4) = 0.4 → {0}; 1–2 min(0.8, 0.9) = 0.8 → {1,2};
        // 3 vs 1: 0.2 → {3}. Layer 2 drops the KV head's distant keys: saving 1/4.
        let g = Geometry::new(4, 2, 1, 8).unwrap_or_else(|e| panic!("{e}"));
        let e = vec![
            vec![1.0, 0.4, 0.3, 0.1],
            vec![0.4, 1.0, 0.9, 0.2],
            vec![0.3, 0.9, 1.0, 0.4],
            vec![0.1, 0.2, 0.4, 1.0],
        ];
        let sims = [head_a(), e];
        assert_eq!(
            saving(&blocks(&sims, 0.5, &g, Grouping::QueryHead), &g),
            0.0
        );
        let bl = blocks(&sims, 0.5, &g, Grouping::KvHead);
        assert_eq!(bl[0], vec![[0, 0], [1, 2], [3, 3]]);
        assert_eq!(bl[0], bl[1]);
        assert!((saving(&bl, &g) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn delta_is_chosen_for_a_target_saving() {
        // Two KV heads (one query head each) to see the saving move:
        // δ = 1: nothing merges (0/8). δ = 0.9: A {0,1}; B none → 1/8.
        // δ = 0.8: A {0,1},{2},{3} (2 vs 0: 0.3) → 1/8. δ = 0.6: A same; B one block → 4/8.
        let g = Geometry::new(4, 2, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        let sims = [head_a(), head_b()];
        assert_eq!(
            choose_delta(&sims, &g, Grouping::QueryHead, 0.1).ok(),
            Some(0.9)
        );
        assert_eq!(
            choose_delta(&sims, &g, Grouping::QueryHead, 0.5).ok(),
            Some(0.6)
        );
        // δ = 0.1: A one block too → 6/8; more is impossible (layer 0 always keeps its keys).
        assert_eq!(
            choose_delta(&sims, &g, Grouping::QueryHead, 0.75).ok(),
            Some(0.1)
        );
        assert!(choose_delta(&sims, &g, Grouping::QueryHead, 0.8).is_err());
    }

    #[test]
    fn keys_and_proximal_window() {
        // Proximal window 4096 = n_s 16 + n_r 4080 (the paper at 32K).
        assert_eq!(proximal_split(4096, 16), (16, 4080));
        let shared = vec![vec![false, true]];
        assert_eq!(keys_kept(&shared, 32768, 4096), vec![vec![32768, 4096]]);
    }
}
