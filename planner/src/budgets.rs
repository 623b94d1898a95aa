//! The budget target and the budgets a plan's rules give for one context length.
//!
//! The runtime asks [`crate::Plan::budgets`] (or [`compute`]) and never invents budgets.
//!
//! **Windowed layers.** A layer that attends over a sliding window of `W` tokens holds exactly
//! `min(W, n)` entries per KV head, as the model's mask does, under every method: no method gives
//! it a budget (nor evicts, shares keys or applies a codebook there). The target's per-head
//! average `B = target.per_head(n)` (≤ n) applies to the *global* layers only: every method but
//! PoD spends exactly `G × kv_heads × B` entries over the `G` global layers, and no head keeps
//! more than the context `n`. Every method holds the same windowed layers, so comparisons at equal
//! KV bytes between methods still hold. [`compute`] enforces both (a rule's windowed rows are
//! replaced by the spans) and the floor of one entry per (layer, KV head).

use crate::geometry::Geometry;
use crate::method::Method;
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// The fewest entries any (layer, KV head) keeps under any method (the plan's
/// `budget_semantics.min_entries_per_kv_head`).
pub const MIN_ENTRIES_PER_KV_HEAD: usize = 1;

/// Budget target: absolute entries per head (`{"tokens": N}`) or a ratio of the prompt's length
/// (`{"ratio": R}`), the observation window and sinks included either way; the per-head average
/// of the global layers (windowed layers hold their window).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum Target {
    /// N entries per (layer, KV head), capped at the context.
    Tokens(usize),
    /// ⌊R·n⌋ entries per (layer, KV head), 0 < R ≤ 1.
    Ratio(f64),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Tokens(t) => write!(f, "{t} entries per head"),
            Target::Ratio(r) => write!(f, "{r} of the prompt per head"),
        }
    }
}

impl Target {
    /// Entries per head on average at context length `n` (never above `n`).
    pub fn per_head(&self, n: usize) -> usize {
        match *self {
            Target::Tokens(t) => t.min(n),
            Target::Ratio(r) => ((r * n as f64).floor() as usize).min(n),
        }
    }

    /// Checks the target; `path` is its JSON path.
    pub fn validate(&self, path: &str) -> Result<()> {
        match *self {
            Target::Tokens(t) => validate::at_least(&format!("{path}.tokens"), t, 1),
            Target::Ratio(r) => {
                if r.is_finite() && r > 0.0 && r <= 1.0 {
                    Ok(())
                } else {
                    Err(Error::invalid(
                        format!("{path}.ratio"),
                        "a ratio in (0, 1]",
                        r,
                    ))
                }
            }
        }
    }
}

/// Budgets of one method at one context length. The method's rule (its module in `methods/`)
/// fills the grids and the fields that apply to it; the others stay 0 / false.
#[derive(Clone, Debug, PartialEq)]
pub struct Budgets {
    pub method: Method,
    /// Prompt length n the budgets are for.
    pub context_len: usize,
    /// Average entries per head of the global layers, B = target.per_head(n).
    pub per_head: usize,
    /// False when the method evicts nothing (the prompt fits every global head's budget;
    /// windowed layers hold their span whatever the method).
    pub compress: bool,
    /// Tokens kept `[layer][kv_head]` (their values, and keys unless shared), window included;
    /// `min(W, n)` in a layer with a sliding window of `W`.
    pub per_layer_per_kv_head: Vec<Vec<usize>>,
    /// Key entries stored `[layer][kv_head]`: as above, except PoD's shared distant keys.
    pub keys_per_layer_per_kv_head: Vec<Vec<usize>>,
    /// Observation window kept in every head (SnapKV-style methods, TreeKV's last block), 0 if none.
    pub window: usize,
    /// Initial tokens always kept (StreamingLLM, TreeKV, PoD's n_s), 0 if none.
    pub sinks: usize,
    /// Recent tokens always kept (StreamingLLM, H2O, TreeKV, PoD's n_r), 0 if none.
    pub recent: usize,
    /// Layers whose kept entries go through SpindleKV's codebook (all false for other methods).
    pub codebook_layers: Vec<bool>,
}

impl Budgets {
    /// `[layer][kv_head]` from one budget per layer, equal over the layer's `kv_heads`.
    pub fn per_layer(layers: Vec<usize>, kv_heads: usize) -> Vec<Vec<usize>> {
        layers.into_iter().map(|x| vec![x; kv_heads]).collect()
    }

    /// Tokens kept over all layers and KV heads.
    pub fn total(&self) -> usize {
        self.per_layer_per_kv_head.iter().flatten().sum()
    }

    /// Bytes of the cache: (keys + values) × head_dim × bytes per element, over layers and KV
    /// heads (equals 2 × entries × head_dim × bytes except where PoD shares keys).
    pub fn kv_bytes(&self, head_dim: usize, bytes_per_element: usize) -> u64 {
        let keys: usize = self.keys_per_layer_per_kv_head.iter().flatten().sum();
        ((keys + self.total()) * head_dim * bytes_per_element) as u64
    }
}

/// Bytes of the full cache at context `n`: 2 × head_dim × bytes × KV heads × Σ_layers span,
/// where a global layer's span is `n` and a windowed layer's `min(W, n)` ([`Geometry::span`]).
/// The one FullKV figure every report compares with.
pub fn full_kv_bytes(g: &Geometry, n: usize, bytes_per_element: usize) -> u64 {
    let entries: usize = (0..g.layers).map(|l| g.span(l, n)).sum();
    (2 * entries * g.head_dim * bytes_per_element * g.kv_heads) as u64
}

/// Replaces the rows of windowed layers by their span at context `n` (see the module header).
fn hold_windows(g: &Geometry, n: usize, grid: &mut [Vec<usize>]) {
    for (l, row) in grid.iter_mut().enumerate() {
        if g.is_windowed(l) {
            *row = vec![g.span(l, n); g.kv_heads];
        }
    }
}

/// The floor: every (layer, KV head) keeps at least one entry (values and keys).
fn check_floor(out: &Budgets) -> Result<()> {
    let grids = [&out.per_layer_per_kv_head, &out.keys_per_layer_per_kv_head];
    for grid in grids {
        for (l, row) in grid.iter().enumerate() {
            if let Some(h) = row.iter().position(|&x| x < MIN_ENTRIES_PER_KV_HEAD) {
                return Err(Error::budget(
                    out.method,
                    format!(
                        "layer {l}, KV head {h} would keep {} entries at context {}; every \
                         (layer, KV head) keeps at least {MIN_ENTRIES_PER_KV_HEAD}",
                        row[h], out.context_len
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Applies a method's budget rule `rule` at context `n` under `target`: the per-head average
/// `B = target.per_head(n)` is handed to the rule, then the windowed layers are held at their
/// span, the key grid defaults to the value grid and the floor is checked (the module header).
/// [`crate::sections::compute`] calls it with the rule of a plan's section.
pub fn apply_rule(
    g: &Geometry,
    method: Method,
    n: usize,
    target: Target,
    rule: impl FnOnce(&mut Budgets) -> Result<()>,
) -> Result<Budgets> {
    if !method.has_section() {
        return Err(Error::budget(
            method,
            "keeps every entry: it has no budgets and needs no plan",
        ));
    }
    let b = target.per_head(n);
    if b == 0 {
        return Err(Error::budget(
            method,
            format!("target {target} gives no entry per head at context {n}"),
        ));
    }
    let mut out = Budgets {
        method,
        context_len: n,
        per_head: b,
        compress: false,
        per_layer_per_kv_head: Vec::new(),
        keys_per_layer_per_kv_head: Vec::new(),
        window: 0,
        sinks: 0,
        recent: 0,
        codebook_layers: vec![false; g.layers],
    };
    rule(&mut out)?;
    hold_windows(g, n, &mut out.per_layer_per_kv_head);
    if out.keys_per_layer_per_kv_head.is_empty() {
        out.keys_per_layer_per_kv_head = out.per_layer_per_kv_head.clone();
    }
    hold_windows(g, n, &mut out.keys_per_layer_per_kv_head);
    check_floor(&out)?;
    out.compress = g.global_layers().into_iter().any(|l| {
        let evicts = |grid: &[Vec<usize>]| grid.get(l).is_some_and(|r| r.iter().any(|&x| x < n));
        evicts(&out.per_layer_per_kv_head) || evicts(&out.keys_per_layer_per_kv_head)
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_and_tokens_resolve_per_head() {
        // 1/8 of 32768 = 4096; 0.1 of 1000 = 100; tokens above the context are capped.
        assert_eq!(Target::Ratio(0.125).per_head(32768), 4096);
        assert_eq!(Target::Ratio(0.1).per_head(1000), 100);
        assert_eq!(Target::Tokens(512).per_head(300), 300);
    }

    #[test]
    fn target_json_forms() {
        let t: Option<Target> = serde_json::from_str(r#"{"tokens": 128}"#).ok();
        assert_eq!(t, Some(Target::Tokens(128)));
        let t: Option<Target> = serde_json::from_str(r#"{"ratio": 0.25}"#).ok();
        assert_eq!(t, Some(Target::Ratio(0.25)));
        assert!(serde_json::from_str::<Target>(r#"{"tokens": 1, "ratio": 0.5}"#).is_err());
        let err = Target::Ratio(1.5)
            .validate("target")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("target.ratio: expected a ratio in (0, 1], found 1.5")
        );
    }

    #[test]
    fn kv_bytes_by_hand() {
        // SmolLM2 at n = 1000, f32: 2 × 1000 × 64 × 4 × 30 × 3 = 46,080,000 bytes.
        let g = Geometry::new(30, 9, 3, 64).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(full_kv_bytes(&g, 1000, 4), 46_080_000);
        // 4 layers (0 and 2 windowed, W = 512), 1 KV head, head_dim 8, f32, n = 2000:
        // spans 512 + 2000 + 512 + 2000 = 5024 entries → 2 × 5024 × 8 × 4 = 321,536 bytes;
        // at n = 300 every span is 300: 2 × 1200 × 32 = 76,800.
        let w = Geometry::new(4, 2, 1, 8)
            .and_then(|g| g.with_windows(vec![Some(512), None, Some(512), None]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(full_kv_bytes(&w, 2000, 4), 321_536);
        assert_eq!(full_kv_bytes(&w, 300, 4), 76_800);
    }
}
