//! The method table: every compression method kvplan knows, one line each, and the single truth
//! about it — its name, its plan section (with the options that build it), its colour, how its
//! press combines a KV head's query heads (GQA) and what it does while generating, and its help.
//!
//! [`method_table!`] holds the lines; it hands them to a macro of the caller's choosing. This file
//! reads them for a method's identity ([`Method`], [`METHODS`], [`NAMES`], [`Method::semantics`]);
//! `methods/mod.rs` reads the same lines for the plan sections and their dispatch. Everything
//! else — the order of a plan's sections, `kvplan plan --method`, the runtime's press registry,
//! the plots' colours, the plan's `budget_semantics.methods` — reads what these two generate.
//! Adding a method is one module in `methods/` and one line here.
//!
//! Line format: `Variant = "name" => module::SectionType { options_field }, [r, g, b],
//! gqa <Gqa variant>, decode <DecodePolicy>, "help";` — `{ options_field }` names the field of
//! [`crate::PlanOptions`] holding the method's options (left out: the method has none beyond the
//! shared observation window).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Hands the method table to `$then!`: first FullKV (no section), then one line per method, in
/// the order plans list sections.
macro_rules! method_table {
    ($then:ident) => {
        $then! {
            /// FullKV: keeps every entry; needs no plan.
            Full = "full", [31, 119, 180], "FullKV: keep every entry (no plan needed)";
            /// SnapKV.
            SnapKv = "snapkv" => snapkv::SnapKvSection, [214, 39, 40],
                gqa MeanOfGroup, decode DecodePolicy::Grows,
                "SnapKV: observation window plus pooled-attention selection; uniform budgets";
            /// H2O: re-selects after every generated token.
            H2o = "h2o" => h2o::H2oSection, [44, 160, 44],
                gqa MeanOfGroup, decode DecodePolicy::HeldAtBudget { compress_every: 1 },
                "H2O: heavy hitters (accumulated attention) plus recent tokens; uniform budgets";
            /// StreamingLLM: sinks and the recent window re-chosen after every generated token.
            Streaming = "streaming" => streaming::StreamingSection, [255, 127, 14],
                gqa Positions, decode DecodePolicy::HeldAtBudget { compress_every: 1 },
                "StreamingLLM: attention sinks plus recent tokens; uniform budgets";
            /// PyramidKV.
            Pyramid = "pyramid" => pyramid::PyramidSection { pyramid }, [148, 103, 189],
                gqa MeanOfGroup, decode DecodePolicy::Grows,
                "PyramidKV: SnapKV selection under an arithmetic per-layer schedule";
            /// HeadKV-R2 (retrieval-reasoning head scores).
            HeadKv = "headkv" => headkv::HeadKvSection { headkv }, [140, 86, 75],
                gqa MeanOfGroup, decode DecodePolicy::Grows,
                "HeadKV-R2: per-head budgets from retrieval-reasoning head scores";
            /// HeadKV-R (retrieval head scores).
            HeadKvR = "headkv-r" => headkv::HeadKvSection { headkv }, [227, 119, 194],
                gqa MeanOfGroup, decode DecodePolicy::Grows,
                "HeadKV-R: per-head budgets from retrieval head scores";
            /// SpindleKV.
            Spindle = "spindle" => spindle::SpindleSection { spindle }, [188, 189, 34],
                gqa MeanOfGroup, decode DecodePolicy::Grows,
                "SpindleKV: eviction schedule by layer plus codebook replacement";
            /// PoD: a KV head keeps its distant keys where any of its query heads starts a block;
            /// values grow, shared key slots drop keys leaving the proximal window at every token.
            Pod = "pod" => pod::PodSection { pod }, [23, 190, 207],
                gqa AnyQueryHead, decode DecodePolicy::ProximalKeys { compress_every: 1 },
                "PoD: distant keys shared by blocks of similar layers, proximal tokens kept";
            /// TreeKV: re-selects after every generated token.
            TreeKv = "treekv" => treekv::TreeKvSection { treekv }, [127, 127, 127],
                gqa MeanOfGroup, decode DecodePolicy::HeldAtBudget { compress_every: 1 },
                "TreeKV: tree-structured eviction (sinks, selected, recent); uniform budgets";
            /// TOVA: the newest query's attention averaged over all the layer's query heads,
            /// re-selected after every generated token.
            Tova = "tova" => plain::PlainSection, [57, 59, 121],
                gqa MeanOfLayer, decode DecodePolicy::HeldAtBudget { compress_every: 1 },
                "TOVA: the newest query's attention, averaged over the layer's heads; uniform budgets";
            /// KNorm: each KV head's own key norms, selected once after the prompt.
            KNorm = "knorm" => plain::PlainSection, [140, 162, 82],
                gqa KeyNorm, decode DecodePolicy::Grows,
                "KNorm: keep the keys of lowest L2 norm in each KV head; uniform budgets";
        }
    };
}
pub(crate) use method_table;

/// One line of the method table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodSpec {
    /// The method.
    pub method: Method,
    /// Its name everywhere: plan sections, CLI, registry, results.
    pub name: &'static str,
    /// Its colour in every figure, RGB.
    pub colour: [u8; 3],
    /// One line for CLI help: what the method keeps and where its budget goes.
    pub help: &'static str,
    /// Whether a plan holds a section for it (false for FullKV, which keeps everything).
    pub has_section: bool,
    /// Its press's GQA aggregation and decode policy (`None` for FullKV).
    pub semantics: Option<MethodSemantics>,
}

/// Generates a method's identity from the table.
macro_rules! identity {
    (
        $(#[$full_doc:meta])*
        $full:ident = $full_name:literal, $full_colour:expr, $full_help:literal;
        $(
            $(#[$doc:meta])*
            $variant:ident = $name:literal => $section:ty $({ $opts:ident })?, $colour:expr,
                gqa $gqa:ident, decode $decode:expr, $help:literal;
        )+
    ) => {
        /// A method, named the same everywhere (plan sections, runtime registry, CLI, results).
        /// Ordered as the table lists them.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Method {
            $(#[$full_doc])*
            #[serde(rename = $full_name)]
            $full,
            $(
                $(#[$doc])*
                #[serde(rename = $name)]
                $variant,
            )+
        }

        /// The method table, in order.
        pub const METHODS: &[MethodSpec] = &[
            MethodSpec {
                method: Method::$full,
                name: $full_name,
                colour: $full_colour,
                help: $full_help,
                has_section: false,
                semantics: None,
            },
            $(
                MethodSpec {
                    method: Method::$variant,
                    name: $name,
                    colour: $colour,
                    help: $help,
                    has_section: true,
                    semantics: Some(MethodSemantics { gqa: Gqa::$gqa, decode: $decode }),
                },
            )+
        ];

        /// Every method's name, in table order (FullKV first).
        pub const NAMES: &[&str] = &[$full_name, $($name),+];

        /// The names of the methods a plan holds a section for, in table order.
        pub const SECTION_NAMES: &[&str] = &[$($name),+];

        impl Method {
            /// Every method a plan can hold a section for, in the order sections appear in a
            /// plan (FullKV, which needs no plan, is not listed).
            pub const ALL: [Method; SECTION_NAMES.len()] = [$(Method::$variant),+];
        }
    };
}

method_table!(identity);

impl Method {
    /// The method's line of the table.
    pub fn spec(self) -> &'static MethodSpec {
        // The table has one line per variant, in declaration order.
        &METHODS[self as usize]
    }

    /// The method's name (`snapkv`, `headkv-r`, …).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Whether a plan holds a section for the method (every method but FullKV).
    pub fn has_section(self) -> bool {
        self.spec().has_section
    }

    /// The GQA aggregation and decode policy of the method's press (`None` for FullKV).
    pub fn semantics(self) -> Option<MethodSemantics> {
        self.spec().semantics
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not in the method table.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown method `{0}` (expected one of {names})", names = NAMES.join(", "))]
pub struct UnknownMethod(pub String);

impl FromStr for Method {
    type Err = UnknownMethod;

    fn from_str(s: &str) -> Result<Self, UnknownMethod> {
        spec(s)
            .map(|m| m.method)
            .ok_or_else(|| UnknownMethod(s.to_string()))
    }
}

/// The table's line for `name`, if it names a method.
pub fn spec(name: &str) -> Option<&'static MethodSpec> {
    METHODS.iter().find(|m| m.name == name)
}

/// `name  help` lines for CLI help, one per method (FullKV too when `with_full`).
pub fn help_lines(with_full: bool) -> String {
    let width = NAMES.iter().map(|n| n.len()).max().unwrap_or(0);
    METHODS
        .iter()
        .filter(|m| with_full || m.has_section)
        .map(|m| format!("  {:width$}  {}", m.name, m.help))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One method's press, as the runtime runs it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MethodSemantics {
    /// How scores of a KV head's query heads are combined for selection.
    pub gqa: Gqa,
    /// Cache size and compression interval while generating.
    pub decode: DecodePolicy,
}

/// How a press turns per-query-head observations into one choice per KV head.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Gqa {
    /// Mean over the KV head's query heads of their per-query-head scores (after any
    /// per-query-head pooling).
    MeanOfGroup,
    /// Mean over all query heads of the layer: one ranking per layer, shared by its KV heads.
    MeanOfLayer,
    /// No attention: each KV head ranks its own keys (by L2 norm).
    KeyNorm,
    /// No scores: entries are kept by position (sinks and the most recent ones).
    Positions,
    /// No selection: a KV head keeps its distant keys at a layer where any of its query heads
    /// starts a block.
    AnyQueryHead,
}

/// What a press does to the cache while generating, after the prompt's compression.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(tag = "cache", rename_all = "snake_case", deny_unknown_fields)]
pub enum DecodePolicy {
    /// No compression while generating: each new token adds one entry per (layer, KV head).
    Grows,
    /// Re-selected every `compress_every` generated tokens, held at the target's budget: a cache
    /// below it (a prompt shorter than the budget) grows to it before anything is evicted.
    HeldAtBudget { compress_every: usize },
    /// Values grow by one entry per token; where distant keys are shared, keys older than the
    /// proximal window (n_s + n_r) are dropped every `compress_every` tokens.
    ProximalKeys { compress_every: usize },
}

impl DecodePolicy {
    /// The compression interval while generating (`None`: the cache grows, nothing to compress).
    pub fn compress_every(self) -> Option<usize> {
        match self {
            DecodePolicy::Grows => None,
            DecodePolicy::HeldAtBudget { compress_every }
            | DecodePolicy::ProximalKeys { compress_every } => Some(compress_every),
        }
    }

    /// Whether the press evicts while generating, holding the cache at its budget
    /// ([`DecodePolicy::HeldAtBudget`]); under the other policies entries are only added (PoD's
    /// dropped distant keys are read from the shared layer, not evicted by a score).
    pub fn evicts_to_budget(self) -> bool {
        matches!(self, DecodePolicy::HeldAtBudget { .. })
    }

    /// Whether `self` and `other` are the same policy, whatever their intervals.
    pub fn same_kind(self, other: DecodePolicy) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in METHODS {
            assert_eq!(m.name.parse::<Method>().ok(), Some(m.method));
            assert_eq!(m.method.spec(), m);
            assert_eq!(m.method.name(), m.name);
        }
        let err = "pyramidkv".parse::<Method>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "unknown method `pyramidkv` (expected one of full, snapkv, h2o, streaming, \
                 pyramid, headkv, headkv-r, spindle, pod, treekv, tova, knorm)"
            )
        );
    }

    #[test]
    fn table_order_is_section_order() {
        assert_eq!(METHODS[0].method, Method::Full);
        assert!(!Method::Full.has_section());
        assert_eq!(Method::Full.semantics(), None);
        let listed: Vec<Method> = METHODS.iter().skip(1).map(|m| m.method).collect();
        assert_eq!(listed, Method::ALL.to_vec());
        assert!(Method::ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(Method::ALL.iter().all(|m| m.has_section()));
        assert!(Method::ALL.iter().all(|m| m.semantics().is_some()));
    }

    #[test]
    fn names_and_colours_are_distinct() {
        for (i, a) in METHODS.iter().enumerate() {
            for b in &METHODS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.colour, b.colour, "{} and {}", a.name, b.name);
            }
        }
    }

    /// The GQA and decode facts each press file states in its header (runtime/src/press/*.rs),
    /// restated here by hand so that a changed table line fails a test.
    #[test]
    fn semantics_per_method() {
        use DecodePolicy::*;
        let every = |c| HeldAtBudget { compress_every: c };
        let expected = [
            (Method::SnapKv, Gqa::MeanOfGroup, Grows),
            (Method::H2o, Gqa::MeanOfGroup, every(1)),
            (Method::Streaming, Gqa::Positions, every(1)),
            (Method::Pyramid, Gqa::MeanOfGroup, Grows),
            (Method::HeadKv, Gqa::MeanOfGroup, Grows),
            (Method::HeadKvR, Gqa::MeanOfGroup, Grows),
            (Method::Spindle, Gqa::MeanOfGroup, Grows),
            (
                Method::Pod,
                Gqa::AnyQueryHead,
                ProximalKeys { compress_every: 1 },
            ),
            (Method::TreeKv, Gqa::MeanOfGroup, every(1)),
            (Method::Tova, Gqa::MeanOfLayer, every(1)),
            (Method::KNorm, Gqa::KeyNorm, Grows),
        ];
        assert_eq!(expected.len(), Method::ALL.len());
        for (m, gqa, decode) in expected {
            assert_eq!(m.semantics(), Some(MethodSemantics { gqa, decode }), "{m}");
        }
    }
}
