//! TreeKV (`docs/papers/treekv.md` §3–5): every KV head keeps the same cache of `c = B` entries,
//! split into sinks, tree-selected and recent entries (`alloc::treekv`); prefill evicts blocks of
//! `b` tokens, observed with the last block. The section keeps the profile's wavelet magnitudes by
//! level (§3.3), the measurement that motivates the tree, for readers and figures.

use super::streaming::DEFAULT_SINKS;
use super::{Method, MethodSection};
use crate::alloc::{treekv, uniform};
use crate::budgets::Budgets;
use crate::build::{evidence, PlanOptions};
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::semantics::DecodePolicy;
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

/// TreeKV: cache split and prefill block size (`alloc::treekv`).
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
    fn build(_: Method, p: &Profile, opts: &PlanOptions) -> Result<Self> {
        Ok(TreeKvSection {
            sinks: DEFAULT_SINKS,
            selected_fraction: DEFAULT_SELECTED_FRACTION,
            block_size: opts.treekv.block_size,
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
        let split = treekv::split(b, self.sinks, self.selected_fraction);
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

    /// Algorithm 1 evicts one tree entry per generated token once the tree is full.
    fn decode(_: Method) -> DecodePolicy {
        DecodePolicy::HeldAtBudget { compress_every: 1 }
    }
}
