//! The method table: every compression method kvplan knows, in one place.
//!
//! Each method is a module here holding its plan section (schema, defaults, validation), how the
//! section is built from a profile, its budget rule (calling `alloc/`) and its summary line — the
//! [`MethodSection`] trait. [`method_table!`] below lists the modules, one line per method, and
//! generates from that list the [`Method`] names, the [`Section`] enum the plan stores, the
//! [`METHODS`] table (names, colours, CLI help) and the dispatch from a method to its module.
//! Everything else — the order of a plan's sections, `kvplan plan --method`, the runtime's press
//! registry, the plots' colours — reads the table. Adding a method is one module and one line.

use crate::budgets::Budgets;
use crate::build::PlanOptions;
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::semantics::{DecodePolicy, Gqa, MethodSemantics};
use crate::{Error, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::fmt;
use std::str::FromStr;

pub mod h2o;
pub mod headkv;
pub mod plain;
pub mod pod;
pub mod pyramid;
pub mod snapkv;
pub mod spindle;
pub mod streaming;
pub mod treekv;

pub use snapkv::Pooling;

/// What a method's module provides: its plan section and the rules that read it.
pub trait MethodSection:
    Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned + Any
{
    /// Whether the method's budgets sum to the target (false: PoD keeps every token and saves
    /// distant keys by sharing them between layers).
    const FOLLOWS_TARGET: bool = true;

    /// The section of `method` built from `profile` with `opts` (`method` tells methods that
    /// share a module apart, such as `headkv` and `headkv-r`).
    fn build(method: Method, profile: &Profile, opts: &PlanOptions) -> Result<Self>;

    /// Checks the section against the model's geometry; `path` is its JSON path
    /// (`sections.pyramid`), named by every error.
    fn validate(&self, path: &str, g: &Geometry) -> Result<()>;

    /// The budget rule: fills `out.per_layer_per_kv_head` (and the method's `window`, `sinks`,
    /// `recent`, key counts or codebook layers) for context `out.context_len` and the per-head
    /// target `out.per_head` (≥ 1, ≤ the context).
    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()>;

    /// The parameters the summary prints after the method's name (`β 20, α 8`).
    fn parameters(&self) -> String;

    /// How the runtime's press for `method` combines a KV head's query heads (default: the
    /// mean of their scores, [`Gqa::MeanOfGroup`]). A fact about the press, stated in the plan.
    fn gqa(_method: Method) -> Gqa {
        Gqa::MeanOfGroup
    }

    /// What the runtime's press for `method` does while generating (default: nothing after the
    /// prompt's compression, [`DecodePolicy::Grows`]). A fact about the press, stated in the
    /// plan and checked against the press's capabilities by the CLI tests.
    fn decode(_method: Method) -> DecodePolicy {
        DecodePolicy::Grows
    }
}

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
}

/// Declares the method table: the first line is FullKV (no section), then one line per method,
/// `Variant = "name" => SectionType, [r, g, b], "help";`, in the order plans list sections.
macro_rules! method_table {
    (
        $(#[$full_doc:meta])*
        $full:ident = $full_name:literal, $full_colour:expr, $full_help:literal;
        $(
            $(#[$doc:meta])*
            $variant:ident = $name:literal => $section:ty, $colour:expr, $help:literal;
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
            },
            $(
                MethodSpec {
                    method: Method::$variant,
                    name: $name,
                    colour: $colour,
                    help: $help,
                    has_section: true,
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

            /// Whether the method's budgets sum to the target (see
            /// [`MethodSection::FOLLOWS_TARGET`]); FullKV keeps everything.
            pub fn follows_target(self) -> bool {
                match self {
                    Method::$full => false,
                    $(Method::$variant => <$section as MethodSection>::FOLLOWS_TARGET,)+
                }
            }

            /// The GQA aggregation and decode policy of the method's press (`None` for FullKV).
            pub fn semantics(self) -> Option<MethodSemantics> {
                match self {
                    Method::$full => None,
                    $(Method::$variant => Some(MethodSemantics {
                        gqa: <$section as MethodSection>::gqa(self),
                        decode: <$section as MethodSection>::decode(self),
                    }),)+
                }
            }
        }

        /// One method's plan section.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Section {
            $(
                #[doc = concat!("The `", $name, "` section.")]
                $variant($section),
            )+
        }

        impl Section {
            /// The method the section is for.
            pub fn method(&self) -> Method {
                match self {
                    $(Section::$variant(_) => Method::$variant,)+
                }
            }

            /// The section of `method` built from a profile; None for FullKV.
            pub(crate) fn build(
                method: Method,
                profile: &Profile,
                opts: &PlanOptions,
            ) -> Result<Option<Section>> {
                Ok(match method {
                    Method::$full => None,
                    $(Method::$variant => Some(Section::$variant(
                        <$section as MethodSection>::build(method, profile, opts)?,
                    )),)+
                })
            }

            /// Checks the section; `path` is its JSON path.
            pub fn validate(&self, path: &str, g: &Geometry) -> Result<()> {
                match self {
                    $(Section::$variant(s) => s.validate(path, g),)+
                }
            }

            /// Applies the method's budget rule (see [`MethodSection::budgets`]).
            pub fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
                match self {
                    $(Section::$variant(s) => s.budgets(g, out),)+
                }
            }

            /// The summary's parameter line.
            pub fn parameters(&self) -> String {
                match self {
                    $(Section::$variant(s) => s.parameters(),)+
                }
            }

            /// The section as `Any`, for typed access ([`crate::Sections::get`]).
            pub(crate) fn as_any(&self) -> &dyn Any {
                match self {
                    $(Section::$variant(s) => s,)+
                }
            }

            /// Writes the section as the value of its method's key.
            pub(crate) fn serialize_entry<M: serde::ser::SerializeMap>(
                &self,
                map: &mut M,
            ) -> std::result::Result<(), M::Error> {
                match self {
                    $(Section::$variant(s) => map.serialize_entry($name, s),)+
                }
            }

            /// Reads the value of `method`'s key (a method with a section).
            pub(crate) fn deserialize_value<'de, A: serde::de::MapAccess<'de>>(
                method: Method,
                map: &mut A,
            ) -> std::result::Result<Section, A::Error> {
                match method {
                    Method::$full => Err(serde::de::Error::unknown_field($full_name, SECTION_NAMES)),
                    $(Method::$variant => map.next_value::<$section>().map(Section::$variant),)+
                }
            }
        }
    };
}

method_table! {
    /// FullKV: keeps every entry; needs no plan.
    Full = "full", [31, 119, 180], "FullKV: keep every entry (no plan needed)";
    /// SnapKV.
    SnapKv = "snapkv" => snapkv::SnapKvSection, [214, 39, 40],
        "SnapKV: observation window plus pooled-attention selection; uniform budgets";
    /// H2O.
    H2o = "h2o" => h2o::H2oSection, [44, 160, 44],
        "H2O: heavy hitters (accumulated attention) plus recent tokens; uniform budgets";
    /// StreamingLLM.
    Streaming = "streaming" => streaming::StreamingSection, [255, 127, 14],
        "StreamingLLM: attention sinks plus recent tokens; uniform budgets";
    /// PyramidKV.
    Pyramid = "pyramid" => pyramid::PyramidSection, [148, 103, 189],
        "PyramidKV: SnapKV selection under an arithmetic per-layer schedule";
    /// HeadKV-R2 (retrieval-reasoning head scores).
    HeadKv = "headkv" => headkv::HeadKvSection, [140, 86, 75],
        "HeadKV-R2: per-head budgets from retrieval-reasoning head scores";
    /// HeadKV-R (retrieval head scores).
    HeadKvR = "headkv-r" => headkv::HeadKvSection, [227, 119, 194],
        "HeadKV-R: per-head budgets from retrieval head scores";
    /// SpindleKV.
    Spindle = "spindle" => spindle::SpindleSection, [188, 189, 34],
        "SpindleKV: eviction schedule by layer plus codebook replacement";
    /// PoD.
    Pod = "pod" => pod::PodSection, [23, 190, 207],
        "PoD: distant keys shared by blocks of similar layers, proximal tokens kept";
    /// TreeKV.
    TreeKv = "treekv" => treekv::TreeKvSection, [127, 127, 127],
        "TreeKV: tree-structured eviction (sinks, selected, recent); uniform budgets";
    /// TOVA.
    Tova = "tova" => plain::PlainSection, [57, 59, 121],
        "TOVA: the newest query's attention, averaged over the layer's heads; uniform budgets";
    /// KNorm.
    KNorm = "knorm" => plain::PlainSection, [140, 162, 82],
        "KNorm: keep the keys of lowest L2 norm in each KV head; uniform budgets";
}

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
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        METHODS
            .iter()
            .find(|m| m.name == s)
            .map(|m| m.method)
            .ok_or_else(|| Error::UnknownMethod(s.to_string()))
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
        assert!("pyramidkv".parse::<Method>().is_err());
    }

    #[test]
    fn table_order_is_section_order() {
        assert_eq!(METHODS[0].method, Method::Full);
        assert!(!Method::Full.has_section());
        let listed: Vec<Method> = METHODS.iter().skip(1).map(|m| m.method).collect();
        assert_eq!(listed, Method::ALL.to_vec());
        assert!(Method::ALL.windows(2).all(|w| w[0] < w[1]));
        assert!(Method::ALL.iter().all(|m| m.has_section()));
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

    #[test]
    fn only_pod_and_full_do_not_follow_the_target() {
        let off: Vec<&str> = METHODS
            .iter()
            .filter(|m| !m.method.follows_target())
            .map(|m| m.name)
            .collect();
        assert_eq!(off, ["full", "pod"]);
    }
}
