//! The plan's `budget_semantics`: what a budget means, stated in the plan for its readers and
//! exporters, and checked on load against what this build does (a plan claiming other semantics
//! is an error naming the field).
//!
//! Every value is a fact about the code, not a wish:
//! - the target counts cache entries (one key and one value vector) per (layer, KV head) — the
//!   cache stores KV heads, never query heads; `{"tokens": N}` is `min(N, n)` entries and
//!   `{"ratio": R}` is `⌊R·n⌋`, `n` the prompt's length in tokens (`budgets::Target`);
//! - the target's per-head average applies to the global layers; a layer with a sliding window
//!   of `W` holds `min(W, n)` entries per KV head under every method (`budgets`);
//! - the observation window (SnapKV, PyramidKV, HeadKV, SpindleKV's l_w, TreeKV's last block)
//!   and the sinks (StreamingLLM, TreeKV, PoD's n_s) count inside a head's budget;
//! - no (layer, KV head) keeps fewer than one entry (`budgets::MIN_ENTRIES_PER_KV_HEAD`);
//! - the prompt's end is never evicted ([`PromptEnd`]): the observation window and every prompt
//!   token after it stay in every head, inside its budget; the allocators' floor is the window α
//!   (every head keeps `α` plus its selected entries), and where a prompt's tail after a window
//!   that ends at the question makes that suffix longer than a head's budget, the head keeps the
//!   whole suffix (the runtime's floor, counted in the bytes it reports);
//! - per method, how the runtime's press combines the query heads of a KV head ([`Gqa`]) and what
//!   it does while generating ([`DecodePolicy`]), declared by each method's module
//!   ([`crate::MethodSection::gqa`], [`crate::MethodSection::decode`]).

use crate::budgets::MIN_ENTRIES_PER_KV_HEAD;
use crate::geometry::Geometry;
pub use crate::method::{DecodePolicy, Gqa, MethodSemantics};
use crate::{Error, Method, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Budget semantics of a plan (see the module header).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetSemantics {
    /// Budgets are per (layer, KV head).
    pub granularity: Granularity,
    /// What the target counts.
    pub target_unit: TargetUnit,
    /// What a `ratio` target is a share of.
    pub ratio_of: RatioOf,
    /// Which layers the target's per-head average applies to.
    pub target_applies_to: AppliesTo,
    /// What a layer with a sliding window holds.
    pub windowed_layers: WindowedLayers,
    /// Whether the observation window counts inside a head's budget.
    pub observation_window_inside_budget: bool,
    /// Whether sinks (initial tokens always kept) count inside a head's budget.
    pub sinks_inside_budget: bool,
    /// Fewest entries any (layer, KV head) keeps.
    pub min_entries_per_kv_head: usize,
    /// What happens to the prompt's end (absent in plans made before this field: those builds
    /// could evict it when a head's budget was below the suffix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_end: Option<PromptEnd>,
    /// Per planned method: GQA aggregation and decode-time policy of its press.
    pub methods: BTreeMap<Method, MethodSemantics>,
}

/// `kv_head`: one budget per (layer, KV head).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    KvHead,
}

/// `entries_per_kv_head`: cached (key, value) entries of one KV head in one layer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TargetUnit {
    EntriesPerKvHead,
}

/// `prompt_tokens`: a ratio R keeps ⌊R·n⌋ entries per head, n the prompt's length in tokens.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RatioOf {
    PromptTokens,
}

/// `global_layers`: the target's per-head average is spent over the global layers' KV heads.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AppliesTo {
    GlobalLayers,
}

/// `hold_window`: `min(W, n)` entries per KV head, whatever the method (no budget, no eviction,
/// no shared keys, no codebook).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WindowedLayers {
    HoldWindow,
}

/// `kept_in_every_head`: the observation window and the prompt's tokens after it (a chat
/// template's tail and answer prefix after a window that ends at the question) are kept in every
/// (layer, KV head), as the papers keep the last α tokens on top of the selection (PyramidKV
/// §4.2, HeadKV §3.2). They count inside a head's budget; a head whose budget is below the suffix
/// keeps the whole suffix (the floor). Methods without a window (KNorm, StreamingLLM, H2O) keep
/// the tokens after the window's end the same way.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PromptEnd {
    KeptInEveryHead,
}

impl BudgetSemantics {
    /// What this build does, for a plan holding `methods`.
    pub fn of(methods: &[Method]) -> Self {
        BudgetSemantics {
            granularity: Granularity::KvHead,
            target_unit: TargetUnit::EntriesPerKvHead,
            ratio_of: RatioOf::PromptTokens,
            target_applies_to: AppliesTo::GlobalLayers,
            windowed_layers: WindowedLayers::HoldWindow,
            observation_window_inside_budget: true,
            sinks_inside_budget: true,
            min_entries_per_kv_head: MIN_ENTRIES_PER_KV_HEAD,
            prompt_end: Some(PromptEnd::KeptInEveryHead),
            methods: methods
                .iter()
                .filter_map(|&m| Some((m, m.semantics()?)))
                .collect(),
        }
    }

    /// Checks that the semantics are this build's for `methods`; the error names the first
    /// field that differs (`budget_semantics.methods.h2o.decode`).
    pub fn validate(&self, methods: &[Method]) -> Result<()> {
        let want = Self::of(methods);
        let path = |f: &str| format!("budget_semantics.{f}");
        let differ = |f: &str, w: &dyn std::fmt::Debug, found: &dyn std::fmt::Debug| {
            Err(Error::invalid(
                path(f),
                format!("{w:?} (what this build does)"),
                format!("{found:?}"),
            ))
        };
        let flags = [
            (
                "observation_window_inside_budget",
                want.observation_window_inside_budget,
                self.observation_window_inside_budget,
            ),
            (
                "sinks_inside_budget",
                want.sinks_inside_budget,
                self.sinks_inside_budget,
            ),
        ];
        for (f, w, found) in flags {
            if w != found {
                return differ(f, &w, &found);
            }
        }
        if self.min_entries_per_kv_head != want.min_entries_per_kv_head {
            let (w, f) = (want.min_entries_per_kv_head, self.min_entries_per_kv_head);
            return differ("min_entries_per_kv_head", &w, &f);
        }
        if self.prompt_end.is_some() && self.prompt_end != want.prompt_end {
            return differ("prompt_end", &want.prompt_end, &self.prompt_end);
        }
        let planned: Vec<&Method> = want.methods.keys().collect();
        let found: Vec<&Method> = self.methods.keys().collect();
        if planned != found {
            return differ("methods", &planned, &found);
        }
        for (m, s) in &self.methods {
            let w = &want.methods[m];
            if s.gqa != w.gqa {
                return differ(&format!("methods.{m}.gqa"), &w.gqa, &s.gqa);
            }
            // The kind of policy is the press's; its interval is the user's to set (≥ 1).
            if !s.decode.same_kind(w.decode) {
                return differ(&format!("methods.{m}.decode"), &w.decode, &s.decode);
            }
            if s.decode.compress_every() == Some(0) {
                return Err(Error::invalid(
                    format!("budget_semantics.methods.{m}.decode.compress_every"),
                    "at least 1 generated token",
                    0,
                ));
            }
        }
        Ok(())
    }
}

/// The plan's notes for readers: how the geometry changes the methods' rules. Empty for a model
/// whose layers all attend globally and have several KV heads.
pub fn notes(g: &Geometry, methods: &[Method]) -> Vec<String> {
    let mut notes = Vec::new();
    let windowed: Vec<usize> = (0..g.layers).filter(|&l| g.is_windowed(l)).collect();
    if !windowed.is_empty() {
        let global = g.global_layers();
        notes.push(format!(
            "layers {} attend over a sliding window: under every method each holds min(window, \
             context) entries per KV head (windows {}) and takes no budget; the target's per-head \
             average applies to the {} global layers {}",
            list(&windowed),
            list(&distinct_windows(g)),
            global.len(),
            list(&global)
        ));
        if methods.contains(&Method::Pod) {
            notes.push(String::from(
                "pod: a windowed layer is a block of its own; blocks group adjacent global layers only",
            ));
        }
    }
    let headkv = methods
        .iter()
        .any(|m| matches!(m, Method::HeadKv | Method::HeadKvR));
    if g.kv_heads == 1 && headkv {
        notes.push(String::from(
            "one KV head per layer: HeadKV's per-head budgets are per-layer budgets",
        ));
    }
    notes
}

fn distinct_windows(g: &Geometry) -> Vec<usize> {
    let mut w: Vec<usize> = g.layer_windows.iter().flatten().copied().collect();
    w.sort_unstable();
    w.dedup();
    w
}

fn list(xs: &[usize]) -> String {
    let items: Vec<String> = xs.iter().map(usize::to_string).collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_names() {
        let s = BudgetSemantics::of(&[Method::SnapKv, Method::H2o, Method::Pod]);
        let v = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(v["granularity"], "kv_head");
        assert_eq!(v["target_unit"], "entries_per_kv_head");
        assert_eq!(v["ratio_of"], "prompt_tokens");
        assert_eq!(v["windowed_layers"], "hold_window");
        assert_eq!(
            v["methods"]["snapkv"],
            serde_json::json!({"gqa": "mean_of_group", "decode": {"cache": "grows"}})
        );
        assert_eq!(
            v["methods"]["h2o"]["decode"],
            serde_json::json!({"cache": "held_at_budget", "compress_every": 1})
        );
        assert_eq!(v["methods"]["pod"]["gqa"], "any_query_head");
    }

    #[test]
    fn other_semantics_are_refused_naming_the_field() {
        let methods = [Method::SnapKv, Method::Tova];
        let mut s = BudgetSemantics::of(&methods);
        assert!(s.validate(&methods).is_ok());
        s.sinks_inside_budget = false;
        let e = s.validate(&methods).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("budget_semantics.sinks_inside_budget: expected true (what this build does), found false")
        );
        let mut s = BudgetSemantics::of(&methods);
        if let Some(t) = s.methods.get_mut(&Method::Tova) {
            t.decode = DecodePolicy::Grows;
        }
        let e = s.validate(&methods).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "budget_semantics.methods.tova.decode: expected HeldAtBudget { compress_every: 1 } \
                 (what this build does), found Grows"
            )
        );
    }

    #[test]
    fn the_decode_interval_is_the_users_but_at_least_one() {
        let methods = [Method::H2o, Method::Pod];
        let mut s = BudgetSemantics::of(&methods);
        if let Some(h) = s.methods.get_mut(&Method::H2o) {
            h.decode = DecodePolicy::HeldAtBudget { compress_every: 8 };
        }
        assert!(s.validate(&methods).is_ok());
        assert_eq!(s.methods[&Method::H2o].decode.compress_every(), Some(8));
        if let Some(h) = s.methods.get_mut(&Method::H2o) {
            h.decode = DecodePolicy::HeldAtBudget { compress_every: 0 };
        }
        let e = s.validate(&methods).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("budget_semantics.methods.h2o.decode.compress_every: expected at least 1 generated token, found 0")
        );
        assert_eq!(DecodePolicy::Grows.compress_every(), None);
    }

    #[test]
    fn notes_for_windows_and_one_kv_head() {
        let g = Geometry::new(4, 2, 1, 8)
            .and_then(|g| g.with_windows(vec![Some(512), None, Some(512), None]))
            .unwrap_or_else(|e| panic!("{e}"));
        let n = notes(&g, &[Method::HeadKv, Method::Pod]);
        assert_eq!(n.len(), 3);
        assert!(
            n[0].starts_with("layers 0, 2 attend over a sliding window"),
            "{}",
            n[0]
        );
        assert!(n[0].ends_with("the 2 global layers 1, 3"), "{}", n[0]);
        assert!(n[2].contains("per-layer budgets"));
        let llama = Geometry::new(30, 9, 3, 64).unwrap_or_else(|e| panic!("{e}"));
        assert!(notes(&llama, &Method::ALL).is_empty());
    }
}
