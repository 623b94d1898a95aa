//! kvplan planner: plan and profile schemas and budget allocators. Never depends on burn.
//!
//! Data flow (docs/design.md): the profiler writes a [`Profile`]; [`build_plan`] turns it into a
//! [`Plan`] that stores each method's parameters, measurements *and the rule* that gives budgets
//! for any context length and target; the runtime calls [`Plan::budgets`] (pure) to apply the rule.

pub mod budgets;
pub mod build;
pub mod chance;
pub mod compare;
pub mod controls;
mod error;
pub mod export;
pub mod geometry;
pub mod io;
pub mod method;
pub mod method_name;
pub mod methods;
pub mod migrate;
pub mod plan;
pub mod profile;
pub mod sections;
pub mod semantics;
mod validate;

pub use budgets::{Budgets, Target};
pub use build::{build_plan, PlanOptions};
pub use chance::{ChanceGroup, ChanceTest, NeedleTest, CHANCE_ALPHA};
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

pub use error::{Error, Result};
pub use method::UnknownMethod;
pub use method_name::{BadMethodName, MethodName};
