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

use serde::{Deserialize, Serialize};

use crate::geometry::Geometry;
use crate::{Error, Method, Result};

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
