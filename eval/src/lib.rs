//! kvplan's evaluation: the same examples under every method and budget, scored as RULER scores
//! them, recorded cell by cell so a run resumes, and summarised in the results schema `kvplan
//! plot` reads ([`results::EvalResults`], owned here, read by the plots crate) and a Markdown
//! table.
//!
//! Modules by layer, each naming only those below it (`tests/module_graph.rs` checks that no
//! two name each other, directly or through others):
//!
//! - [`render`]: a table and results file from records alone (`kvplan eval table`);
//!   [`leaderboard`]: RULER records in the kvpress leaderboard's form (a folder per model,
//!   method and ratio with kvpress's three files), its table and its figure's points;
//! - [`tasks`]: one folder per task with all that is its own — [`tasks::niah`] (RULER-style
//!   needles, token-exact placement in a haystack), [`tasks::ruler`] (RULER's 13 tasks ported
//!   from its generators, sized to a length with the model's tokenizer; their report), and
//!   [`tasks::ppl`] (streaming perplexity: per-token NLL, curves with block-bootstrap intervals,
//!   its table) — and, with feature `model`, each as a task of the driver;
//! - `driver` (feature `model`): the one driver every task runs through — set-up, records and
//!   resume, the per-prompt loop, results, figures and table; `runner` (feature `model`): runs
//!   the model under the runtime's presses, one shared prefill per prompt for every press that
//!   keeps the model's own forward pass;
//! - [`companion`]: kvpress's records on the same prompts, shown beside kvplan's; [`shard`]: a
//!   run split into shards by prompt (`--shard i/n`), shards merged by cell key;
//! - [`table`]: the Markdown score tables (rows by measured KV bytes, intervals, paired
//!   differences);
//! - [`aggregate`]: records into results — a table's rows, their scores, intervals and paired
//!   differences, NIAH cells and quality points;
//! - [`task`]: what every task shares apart from the model (cells grouped by prompt, progress,
//!   where scoring puts each cell, skipped cells, the records' base settings, the
//!   [`task::Reporter`]);
//! - [`records`]: per-cell records stored atomically, one run per file, resuming;
//! - [`results`]: the results schema (NIAH cells, quality points, perplexity curves) and its
//!   file, each task merging its own entries;
//! - [`prompt`]: window placement and question-agnostic mode, a prompt's ids in both forms, what
//!   its records say about it, the prompts file;
//! - [`score`]: RULER's string matching and SQuAD's token F1; [`stats`]: Wilson and (cluster)
//!   bootstrap intervals, paired differences, the exact McNemar and cluster sign tests, Holm's
//!   correction, the smallest detectable difference; [`equal_bytes`]: SpindleKV's budget
//!   re-targeted to SnapKV's measured bytes; [`ratio`]: compression as a ratio of the context,
//!   each cell's budget searched until its measured effective ratio lands on the target (the
//!   kvpress leaderboard's x axis); [`marks`]: table rows marked where a caveat applies (R2
//!   scores at chance, untrained PoD); [`rng`]: the seeded generator examples are drawn with.

pub mod aggregate;
pub mod agree;
pub mod companion;
#[cfg(feature = "model")]
pub mod driver;
pub mod equal_bytes;
pub mod leaderboard;
pub mod marks;
pub mod paired;
pub mod prompt;
pub mod ratio;
pub mod records;
pub mod render;
pub mod results;
pub mod row_method;
pub use kvplan_common::rng;
#[cfg(feature = "model")]
pub mod runner;
pub mod score;
pub mod shard;
pub mod stats;
pub mod table;
pub mod task;
pub mod tasks;
pub mod without;

/// Errors of the evaluation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A records or results file that does not parse or does not match this run.
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    /// A results file that does not parse: where in the JSON text, and what.
    #[error("results: at `{at}`: {message}")]
    Results { at: String, message: String },
    /// Another process is writing the same records or results file.
    #[error(transparent)]
    Lock(#[from] kvplan_common::lock::LockError),
    /// A bad request (haystack too short, unknown method, …).
    #[error("{0}")]
    Request(String),
    /// A generated prompt that cannot fit the length asked for (a RULER task whose smallest
    /// haystack is already too long): a run of the default tasks leaves such a task out.
    #[error("{task}: {why}")]
    DoesNotFit {
        /// The task (its name, or `every task` when none is left).
        task: String,
        /// Why, with the numbers.
        why: String,
    },
    /// The model, its tokenizer or a press failed.
    #[cfg(feature = "model")]
    #[error("model: {0}")]
    Model(#[from] kvplan_runtime::Error),
    /// The reporter failed (drawing the figures, showing the table).
    #[error(transparent)]
    Report(ReportError),
}

/// A failure of the reporter (`task::Reporter`: drawing figures, writing the table out).
pub type ReportError = Box<dyn std::error::Error + Send + Sync>;

/// Result alias of the evaluation.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `text` to `path` atomically ([`kvplan_common::fs`]), creating its folder: a reader
/// sees the old file or the new one, never a part.
pub fn write_atomic(path: &std::path::Path, text: &str) -> Result<()> {
    kvplan_common::fs::write_atomic_creating_dirs(path, text.as_bytes()).map_err(io_err(path))
}
