//! TreeKV cache split (`docs/papers/treekv.md` §4–5, esp. §5.2).
//!
//! The cache size c is the per-head target. §5.2 splits a 1K cache into 4 initial tokens (sinks),
//! 508 recent tokens and 512 method-selected tokens; we scale that: sinks stay 4 (attention sinks
//! are a count, not a share), the selected part is ⌊c·f⌋ with f = 512/1024 = 0.5, and the recent
//! window takes the rest. Every layer and KV head gets c (TreeKV does not vary budgets).
//! The prefill stage (§4.2) evicts blocks of `b` tokens and observes with the last block; the
//! paper gives no value for b, kvplan defaults to 8 (PyramidKV's α, so windows are equal).

/// How one head's cache of `cache` entries splits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeKvSplit {
    /// Initial tokens always kept.
    pub sinks: usize,
    /// Most recent tokens always kept.
    pub recent: usize,
    /// Entries the tree eviction chooses.
    pub selected: usize,
}

/// Splits a cache of `cache` entries into sinks, recent and selected entries.
pub fn split(cache: usize, sinks: usize, selected_fraction: f64) -> TreeKvSplit {
    let sinks = sinks.min(cache);
    let selected = ((cache as f64 * selected_fraction).floor() as usize).min(cache - sinks);
    TreeKvSplit {
        sinks,
        recent: cache - sinks - selected,
        selected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_split_at_1024() {
        // §5.2: 4 initial + 508 recent + 512 selected = 1024.
        let s = split(1024, 4, 0.5);
        assert_eq!((s.sinks, s.recent, s.selected), (4, 508, 512));
    }

    #[test]
    fn scaled_split() {
        // c = 128: selected ⌊128/2⌋ = 64, sinks 4, recent 128 − 4 − 64 = 60.
        // c = 3: sinks take all, nothing left.
        assert_eq!(
            split(128, 4, 0.5),
            TreeKvSplit {
                sinks: 4,
                recent: 60,
                selected: 64
            }
        );
        assert_eq!(
            split(3, 4, 0.5),
            TreeKvSplit {
                sinks: 3,
                recent: 0,
                selected: 0
            }
        );
    }
}
