//! kvplan plots: figures of profiles, plans and evaluation results (plotters, PNG and SVG).
//!
//! One file per figure kind under [`figures`]; [`sets`] chooses the figures a file implies and
//! names them (`heads-r2.png`, `plan-pyramid.png`, `niah-snapkv-128.png`, …); [`results`]
//! re-exports the evaluation results schema, which belongs to `kvplan-eval` (its producer). Text
//! is drawn with a bundled font ([`font`]), so rendering never depends on the machine's fonts.

pub mod colour;
pub mod figures;
pub mod font;
pub mod heatmap;
pub mod lines;
pub mod render;
pub mod results;
pub mod sets;

pub use render::{write_figures, Draw, Format, Rendered};
pub use results::{EvalResults, NiahCell, PerplexityCurve, QualityPoint, RESULTS_SCHEMA_VERSION};
pub use sets::{
    default_context_len, detect, plan_figures, profile_figures, results_figures, FileKind,
    ProfileExtras, Skipped,
};

use std::path::PathBuf;

/// Errors of the plots crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// plotters failed while drawing (a font or backend error).
    #[error("drawing {figure}: {message}")]
    Draw { figure: String, message: String },
    /// PNG encoding failed.
    #[error("encoding {figure} as PNG: {message}")]
    Png { figure: String, message: String },
    /// The file is not a profile, plan or results file.
    #[error("{0}")]
    UnknownKind(String),
    /// An error from the planner (a profile or plan that does not validate, budgets), or input
    /// data that cannot be drawn (empty, mismatched lengths, NaN), said as the planner's
    /// [`kvplan_planner::Error::Invalid`] with its JSON path.
    #[error(transparent)]
    Planner(#[from] kvplan_planner::Error),
    /// Reading or writing a file failed.
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// Result alias of the plots crate.
pub type Result<T> = std::result::Result<T, Error>;
