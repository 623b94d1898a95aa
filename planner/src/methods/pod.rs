//! PoD (`docs/papers/pod.md` §2): head-wise blocks of similar layers share the
//! distant keys stored at a block's lowest layer (Algorithm 1, δ; `alloc::pod`); every head keeps
//! its n_s initial and n_r recent tokens, and τ gates the shared distant attention (eq. 3–4).
//! PoD does not follow the budget target: it keeps every token's value and saves key slots.
//! A windowed layer is a block of its own (it shares no keys): blocks never mix windowed and
//! global layers (`alloc::pod`).

use super::{Method, MethodSection};
use crate::alloc::pod::{self, Grouping};
use crate::budgets::Budgets;
use crate::build::PlanOptions;
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::semantics::{DecodePolicy, Gqa};
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
    /// Blocks per query head (the paper) or per KV head (`alloc::pod`, for GQA models).
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

/// PoD: head-wise layer blocks (`alloc::pod`).
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

    fn build(_: Method, p: &Profile, opts: &PlanOptions) -> Result<Self> {
        let o = &opts.pod;
        let g = &p.model.geometry;
        let sims = &p.layer_similarity.per_head;
        let delta = match o.target_saving {
            Some(t) => pod::choose_delta(sims, g, o.grouping, t)?,
            None => o.delta,
        };
        let blocks = pod::blocks(sims, delta, g, o.grouping);
        Ok(PodSection {
            delta,
            target_saving: o.target_saving,
            saving: pod::saving(&blocks, g),
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
        let saving = pod::saving(&self.blocks, g);
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
        (out.sinks, out.recent) = pod::proximal_split(b, self.sinks);
        out.per_layer_per_kv_head = vec![vec![n; g.kv_heads]; g.layers];
        out.keys_per_layer_per_kv_head = pod::keys_kept(&pod::shared_keys(&self.blocks, g), n, b);
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

    /// A KV head keeps its distant keys where any of its query heads starts a block.
    fn gqa(_: Method) -> Gqa {
        Gqa::AnyQueryHead
    }

    /// Values grow; shared key slots drop keys leaving the proximal window at every token.
    fn decode(_: Method) -> DecodePolicy {
        DecodePolicy::ProximalKeys { compress_every: 1 }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 layers, 4 query heads on 2 KV heads (heads 0, 1 read KV 0; 2, 3 read KV 1).
    fn section(blocks: Vec<Vec<[usize; 2]>>, grouping: Grouping) -> PodSection {
        let g = Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        PodSection {
            delta: 0.5,
            target_saving: None,
            saving: pod::saving(&blocks, &g),
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
