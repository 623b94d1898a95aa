//! kvplan planner: plan and profile schemas and budget allocators. Never depends on burn.
//!
//! Data flow (docs/design.md): the profiler writes a [`Profile`]; [`build_plan`] turns it into a
//! [`Plan`] that stores each method's parameters, measurements *and the rule* that gives budgets
//! for any context length and target; the runtime calls [`Plan::budgets`] (pure) to apply the rule.

pub mod alloc;
pub mod budgets;
pub mod build;
pub mod chance;
pub mod compare;
pub mod controls;
pub mod export;
pub mod geometry;
pub mod io;
pub mod methods;
pub mod migrate;
pub mod plan;
pub mod profile;
pub mod sections;
pub mod semantics;
mod validate;

pub use budgets::{Budgets, Target};
pub use build::{build_plan, PlanOptions};
pub use chance::{ChanceGroup, ChanceTest, CHANCE_ALPHA};
pub use geometry::{Geometry, ModelIdentity};
pub use methods::h2o::H2oSection;
pub use methods::headkv::{HeadKvSection, ScoreSource};
pub use methods::pod::PodSection;
pub use methods::pyramid::PyramidSection;
pub use methods::snapkv::{Pooling, SnapKvSection};
pub use methods::spindle::SpindleSection;
pub use methods::streaming::StreamingSection;
pub use methods::treekv::TreeKvSection;
pub use methods::{Method, MethodSection, MethodSpec, Section, METHODS};
pub use plan::{Plan, Preview, PreviewEntry, Provenance, PLAN_SCHEMA_VERSION};
pub use profile::{
    HeadScores, LayerFunnel, LayerRedundancy, LayerSimilarity, Profile, ProfileDetails,
    ProfileSettings, Trial, Wavelet, PROFILE_SCHEMA_VERSION,
};
pub use sections::Sections;
pub use semantics::{BudgetSemantics, DecodePolicy, Gqa, MethodSemantics};

use std::path::PathBuf;

/// Errors of the planner. Every schema or validation error names the JSON path it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value breaks the schema: `path` is a JSON path such as `sections.pyramid.beta`.
    #[error("{path}: expected {expected}, found {found}")]
    Invalid {
        path: String,
        expected: String,
        found: String,
    },
    /// The JSON text does not parse into the schema (missing or unknown field, wrong type).
    #[error("{what}: at `{path}`: {message}")]
    Parse {
        what: &'static str,
        path: String,
        message: String,
    },
    /// Reading or writing a file failed. (The I/O error is part of the message, not a source,
    /// so that error chains do not print it twice.)
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The plan has no section for the method asked for.
    #[error("the plan has no `{0}` section (build it with --method {0})")]
    MissingSection(Method),
    /// A budget asked of an allocator that its rule cannot produce.
    #[error("{method}: {message}")]
    Budget { method: Method, message: String },
    /// A method with no plan section (FullKV) was asked to be planned.
    #[error("`{0}` keeps every entry and has no plan section")]
    NoSection(Method),
    /// A file of an older schema version: `kvplan migrate` upgrades it.
    #[error(
        "schema_version: expected {expected}, found {found} (a version-{found} {what}: upgrade \
         it with `kvplan migrate FILE`)"
    )]
    OldSchema {
        what: &'static str,
        found: u64,
        expected: u32,
    },
    /// A target that cannot honour a plan for this architecture
    /// ([`export::capability::Refusal`]): why, and what it can do instead.
    #[error("{0}")]
    Refused(String),
    /// An unknown method name.
    #[error("unknown method `{0}` (expected one of {names})", names = methods::NAMES.join(", "))]
    UnknownMethod(String),
}

/// Result alias of the planner.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Invalid`] from displayable parts.
    pub fn invalid(
        path: impl Into<String>,
        expected: impl std::fmt::Display,
        found: impl std::fmt::Display,
    ) -> Self {
        Error::Invalid {
            path: path.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    /// An [`Error::Budget`] for `method`.
    pub fn budget(method: Method, message: impl Into<String>) -> Self {
        Error::Budget {
            method,
            message: message.into(),
        }
    }
}
