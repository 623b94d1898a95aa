//! kvplan profiler: measures how a model uses its attention heads and layers and writes a
//! [`kvplan_planner::Profile`] (docs/design.md, "Data flow").
//!
//! - The text it reads (Paul Graham essays, Gutenberg Shakespeare) is fetched and read into
//!   corpora by `kvplan_common::data`, which the evaluation tasks share.
//! - [`needles`]: needle examples built from that text (retrieval, retrieval-reasoning) and their
//!   placement at a depth.
//! - [`analysis`]: one file per analysis — retrieval heads (HeadKV eq. 1), retrieval-reasoning
//!   heads (eq. 2), layer similarity (PoD eq. 2), wavelets (TreeKV §3.3), funnelling (PyramidKV
//!   §3), KV redundancy and sparsity (SpindleKV §3.2) — each a pure function of observed rows.
//! - [`run`]: drives the model (generic over burn's `Backend`), resumable through [`partial`].

pub mod analysis;
pub mod config;
pub mod needles;
pub mod partial;
pub mod progress;
pub mod run;
mod samples;

pub use config::{reasoning_style_for, ProfileConfig};
pub use progress::{NoProgress, Progress};
pub use run::{profile, profile_shard, ProfileInputs, StageTiming};

use std::path::PathBuf;

/// Errors of the profiler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model or tokenizer failed.
    #[error(transparent)]
    Runtime(#[from] kvplan_runtime::Error),
    /// The profile breaks the schema.
    #[error(transparent)]
    Planner(#[from] kvplan_planner::Error),
    /// The evaluation text is unusable for profiling (empty, too short).
    #[error("data: {0}")]
    Data(String),
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// Settings that cannot produce a profile.
    #[error("profile settings: {0}")]
    Settings(String),
}

/// Result alias of the profiler.
pub type Result<T> = std::result::Result<T, Error>;
