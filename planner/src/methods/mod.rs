//! The methods' plan sections: one module per method, each holding its section (schema,
//! defaults, validation), its options, how the section is built from a profile, its budget rule
//! (the allocator) and its summary line — the [`MethodSection`] trait. The method table
//! ([`crate::method`]) lists them, one line per method; from the same lines this module generates
//! the [`Section`] enum a plan stores and the dispatch from a method to its module.
//! [`rules`] holds the guards and rounding every allocator shares, [`uniform`] the uniform
//! budgets of the methods that keep the target in every head.

use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::method_table;
use crate::profile::Profile;
use crate::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::fmt;

pub use crate::method::{help_lines, spec, Method, MethodSpec, METHODS, NAMES, SECTION_NAMES};

pub mod h2o;
pub mod headkv;
pub mod plain;
pub mod pod;
pub mod pyramid;
pub mod rules;
pub mod snapkv;
pub mod spindle;
pub mod streaming;
pub mod treekv;
pub mod uniform;

pub use snapkv::Pooling;

/// Options of [`crate::build_plan`]; `Default` gives the papers' settings. Options that belong
/// to one method are in that method's option struct (`methods/<name>.rs`), named by the method's
/// line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOptions {
    /// kvplan version recorded in the provenance.
    pub kvplan_version: String,
    /// Date recorded in the provenance, `YYYY-MM-DD` (an input, so output is reproducible).
    pub date: String,
    /// Context length of the preview; `None` writes no preview.
    pub preview_context_len: Option<usize>,
    /// Observation window α of every SnapKV-style method (equal for all: `docs/design.md`).
    pub window: usize,
    /// PyramidKV's options.
    pub pyramid: pyramid::PyramidOptions,
    /// HeadKV's options (both score sources).
    pub headkv: headkv::HeadKvOptions,
    /// SpindleKV's options.
    pub spindle: spindle::SpindleOptions,
    /// PoD's options.
    pub pod: pod::PodOptions,
    /// TreeKV's options.
    pub treekv: treekv::TreeKvOptions,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
            date: String::from("1970-01-01"),
            preview_context_len: None,
            window: snapkv::DEFAULT_WINDOW,
            pyramid: Default::default(),
            headkv: Default::default(),
            spindle: Default::default(),
            pod: Default::default(),
            treekv: Default::default(),
        }
    }
}

/// A method's options when it has none beyond the shared window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoOptions;

/// What a method's module provides: its plan section and the rules that read it.
pub trait MethodSection:
    Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned + Any
{
    /// The method's own options ([`NoOptions`] when it has none), a field of [`PlanOptions`]
    /// named by its table line.
    type Options;

    /// Whether the method's budgets sum to the target (false: PoD keeps every token and saves
    /// distant keys by sharing them between layers).
    const FOLLOWS_TARGET: bool = true;

    /// The section of `method` built from `profile` with the shared observation window `window`
    /// and the method's options (`method` tells methods that share a module apart, such as
    /// `headkv` and `headkv-r`).
    fn build(
        method: Method,
        profile: &Profile,
        window: usize,
        opts: &Self::Options,
    ) -> Result<Self>;

    /// Checks the section against the model's geometry; `path` is its JSON path
    /// (`sections.pyramid`), named by every error.
    fn validate(&self, path: &str, g: &Geometry) -> Result<()>;

    /// The budget rule: fills `out.per_layer_per_kv_head` (and the method's `window`, `sinks`,
    /// `recent`, key counts or codebook layers) for context `out.context_len` and the per-head
    /// target `out.per_head` (≥ 1, ≤ the context).
    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()>;

    /// The parameters the summary prints after the method's name (`β 20, α 8`).
    fn parameters(&self) -> String;
}

/// The options a table line names: `opts.<field>`, or [`NoOptions`] when it names none.
macro_rules! options_of {
    ($opts:ident) => {
        &NoOptions
    };
    ($opts:ident, $field:ident) => {
        &$opts.$field
    };
}

/// Generates the plan sections and their dispatch from the method table.
macro_rules! sections {
    (
        $(#[$full_doc:meta])*
        $full:ident = $full_name:literal, $full_colour:expr, $full_help:literal;
        $(
            $(#[$doc:meta])*
            $variant:ident = $name:literal => $section:ty $({ $opts:ident })?, $colour:expr,
                gqa $gqa:ident, decode $decode:expr, $help:literal;
        )+
    ) => {
        impl Method {
            /// Whether the method's budgets sum to the target (see
            /// [`MethodSection::FOLLOWS_TARGET`]); FullKV keeps everything.
            pub fn follows_target(self) -> bool {
                match self {
                    Method::$full => false,
                    $(Method::$variant => <$section as MethodSection>::FOLLOWS_TARGET,)+
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
                        <$section as MethodSection>::build(
                            method,
                            profile,
                            opts.window,
                            options_of!(opts $(, $opts)?),
                        )?,
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

method_table!(sections);

#[cfg(test)]
mod tests {
    use super::*;

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
