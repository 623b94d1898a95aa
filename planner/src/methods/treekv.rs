//! TreeKV (`docs/papers/treekv.md` §3–5): every KV head keeps the same cache of `c = B` entries, split into
//! sinks, tree-selected and recent entries (the allocator below); prefill evicts blocks of `b`
//! tokens, observed with the last block. The section keeps the profile's wavelet magnitudes by
//! level (§3.3), the measurement that motivates the tree, for readers and figures.
//!
//! ## The allocator
//!
//! TreeKV cache split (`docs/papers/treekv.md` §4–5, esp. §5.2).
//!
//! The cache size c is the per-head target. §5.2 splits a 1K cache into 4 initial tokens (sinks),
//! 508 recent tokens and 512 method-selected tokens; we scale that: sinks stay 4 (attention sinks
//! are a count, not a share), the selected part is ⌊c·f⌋ with f = 512/1024 = 0.5, and the recent
//! window takes the rest. Every layer and KV head gets c (TreeKV does not vary budgets).
//! The prefill stage (§4.2) evicts blocks of `b` tokens and observes with the last block; the
//! paper gives no value for b, kvplan defaults to 8 (PyramidKV's α, so windows are equal).

use super::rules::evidence;
use super::streaming::DEFAULT_SINKS;
use super::uniform;
use super::MethodSection;
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::{validate, Result};
use serde::{Deserialize, Serialize};

/// Share of the cache the tree eviction chooses (§5.2: 512 of 1024).
pub const DEFAULT_SELECTED_FRACTION: f64 = 0.5;

/// Options of the TreeKV section.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeKvOptions {
    /// Prefill block size b (the paper gives none; α of the SnapKV-style methods by default).
    pub block_size: usize,
}

impl Default for TreeKvOptions {
    fn default() -> Self {
        TreeKvOptions {
            block_size: super::snapkv::DEFAULT_WINDOW,
        }
    }
}

/// TreeKV: cache split and prefill block size (the allocator below).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TreeKvSection {
    pub sinks: usize,
    pub selected_fraction: f64,
    pub block_size: usize,
    /// The profile's wavelet magnitudes `[layer][level]`.
    pub wavelet: Vec<Vec<f64>>,
}

impl MethodSection for TreeKvSection {
    type Options = TreeKvOptions;

    fn build(_: Method, p: &Profile, _: usize, opts: &TreeKvOptions) -> Result<Self> {
        Ok(TreeKvSection {
            sinks: DEFAULT_SINKS,
            selected_fraction: DEFAULT_SELECTED_FRACTION,
            block_size: opts.block_size,
            wavelet: p
                .wavelet
                .magnitudes
                .iter()
                .map(|row| row.iter().map(|&m| evidence(m)).collect())
                .collect(),
        })
    }

    fn validate(&self, q: &str, g: &Geometry) -> Result<()> {
        validate::in_range(
            &format!("{q}.selected_fraction"),
            self.selected_fraction,
            0.0,
            1.0,
        )?;
        validate::at_least(&format!("{q}.block_size"), self.block_size, 1)?;
        let levels = self.wavelet.first().map_or(0, Vec::len);
        validate::matrix(
            &format!("{q}.wavelet"),
            &self.wavelet,
            (g.layers, "one per layer"),
            (levels, "one per level, as in layer 0"),
            0.0,
            f64::MAX,
        )
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        let split = split(b, self.sinks, self.selected_fraction);
        out.sinks = split.sinks;
        out.recent = split.recent;
        out.window = self.block_size.min(b);
        out.per_layer_per_kv_head = uniform::budgets(g.layers, g.kv_heads, n, b);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!(
            "block {}, selected {}",
            self.block_size, self.selected_fraction
        )
    }
}

// ---- The allocator ----

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
mod allocator_tests {
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
