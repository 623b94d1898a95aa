//! Grouped-query attention's head map as the attention kernels use it.
//!
//! The kernels stack the query heads that share a cache head next to each other, `[kv][group]`,
//! so each cache head is one batched gemm. Which query heads share a KV head is the geometry's
//! query→KV map ([`Geometry::kv_of`]), not an assumption: [`QueryOrder`] puts the query heads of
//! KV head 0 (in increasing order) first, then those of KV head 1, and so on. For the usual map
//! `h → h / group` that order is the identity and nothing moves.
//!
//! A layer cache unfolded to `times` copies per KV head (SpindleKV's repeat variant,
//! [`crate::cache::LayerCache::repeat_heads`]) holds the copies of KV head `g` at
//! `g·times .. (g+1)·times`; slot `s` then reads cache head `s / (q_heads / cache_heads)`, which
//! is one of its KV head's copies.

use kvplan_planner::Geometry;

/// Where each query head sits in the kernels' `[kv][group]` stacking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryOrder {
    /// `slot_of[q]`: the slot of query head `q`.
    slot_of: Vec<usize>,
    /// `head_at[s]`: the query head in slot `s`.
    head_at: Vec<usize>,
}

impl QueryOrder {
    /// The stacking of `geometry`'s query heads by KV head.
    pub fn new(geometry: &Geometry) -> Self {
        let head_at: Vec<usize> = (0..geometry.kv_heads)
            .flat_map(|kv| geometry.q_heads_of(kv))
            .collect();
        let mut slot_of = vec![0; head_at.len()];
        for (s, &q) in head_at.iter().enumerate() {
            slot_of[q] = s;
        }
        Self { slot_of, head_at }
    }

    /// True when slot `s` holds query head `s` (the map `h → h / group`).
    pub fn is_identity(&self) -> bool {
        self.head_at.iter().enumerate().all(|(s, &q)| s == q)
    }

    /// Number of query heads.
    pub fn q_heads(&self) -> usize {
        self.head_at.len()
    }

    /// The slot of query head `q`.
    pub fn slot(&self, q: usize) -> usize {
        self.slot_of[q]
    }

    /// `slot_of[q]` for every query head.
    pub fn slots(&self) -> &[usize] {
        &self.slot_of
    }

    /// `head_at[s]` for every slot.
    pub fn heads(&self) -> &[usize] {
        &self.head_at
    }

    /// The cache head query head `q` reads in a layer cache of `cache_heads` heads (the model's
    /// KV heads, or their unfolded copies).
    pub fn cache_head(&self, q: usize, cache_heads: usize) -> usize {
        self.slot_of[q] / (self.q_heads() / cache_heads.max(1)).max(1)
    }

    /// [`Self::cache_head`] of every query head.
    pub fn cache_heads_of(&self, cache_heads: usize) -> Vec<usize> {
        (0..self.q_heads())
            .map(|q| self.cache_head(q, cache_heads))
            .collect()
    }

    /// Items in slot order → items in query-head order.
    pub fn to_heads<T>(&self, per_slot: Vec<T>) -> Vec<T> {
        if self.is_identity() {
            return per_slot;
        }
        let mut slots: Vec<Option<T>> = per_slot.into_iter().map(Some).collect();
        self.slot_of
            .iter()
            .filter_map(|&s| slots.get_mut(s).and_then(Option::take))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interleaved() -> Geometry {
        // 4 query heads on 2 KV heads, heads 0 and 2 → KV 0, heads 1 and 3 → KV 1.
        let mut g = Geometry::new(1, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        g.q_to_kv = vec![0, 1, 0, 1];
        g
    }

    #[test]
    fn the_usual_map_is_the_identity() {
        let g = Geometry::new(1, 9, 3, 8).unwrap_or_else(|e| panic!("{e}"));
        let order = QueryOrder::new(&g);
        assert!(order.is_identity());
        assert_eq!(order.cache_heads_of(3), vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
        // Unfolded to one cache head per query head: each reads its own copy.
        assert_eq!(order.cache_heads_of(9), (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn an_interleaved_map_stacks_heads_by_kv_head() {
        // Slots: [0, 2 | 1, 3]; slot_of = [0, 2, 1, 3].
        let order = QueryOrder::new(&interleaved());
        assert!(!order.is_identity());
        assert_eq!(order.heads(), &[0, 2, 1, 3]);
        assert_eq!(order.slots(), &[0, 2, 1, 3]);
        assert_eq!(order.cache_heads_of(2), vec![0, 1, 0, 1]);
        // Two copies per KV head (cache heads 0, 1 of KV 0; 2, 3 of KV 1).
        assert_eq!(order.cache_heads_of(4), vec![0, 2, 1, 3]);
        assert_eq!(
            order.to_heads(vec!['a', 'b', 'c', 'd']),
            vec!['a', 'c', 'b', 'd']
        );
    }
}
