//! The results file as a run updates it: each task replaces its own entries (NIAH cells,
//! quality points of the task and its sub-tasks, perplexity curves) and keeps the others', under
//! a lock held for the read-merge-write, so tasks writing into one folder side by side never
//! drop each other's entries.

use std::path::Path;

use kvplan_common::lock::Lock;

use super::{EvalResults, NiahCell, PerplexityCurve, QualityPoint, RESULTS_SCHEMA_VERSION};
use crate::{write_atomic, Error, Result};

/// Reads the results file at `path` (or starts one for `model`), replaces `task`'s NIAH cells
/// and quality points (those of `task` and of its sub-tasks `task/…`) with `niah` and
/// `quality`, and writes it back atomically.
pub fn merge_results(
    path: &Path,
    model: &str,
    task: &str,
    niah: Vec<NiahCell>,
    quality: Vec<QualityPoint>,
) -> Result<EvalResults> {
    let _lock = lock_results(path)?;
    let mut results = load_or_new(path, model)?;
    if task == "niah" {
        results.niah = niah;
    }
    let sub = format!("{task}/");
    results
        .quality
        .retain(|q| q.task != task && !q.task.starts_with(&sub));
    results.quality.extend(quality);
    save_results(path, &results)?;
    Ok(results)
}

/// Reads the results file at `path` (or starts one for `model`), replaces its perplexity curves
/// with `curves`, and writes it back atomically.
pub fn merge_perplexity(
    path: &Path,
    model: &str,
    curves: Vec<PerplexityCurve>,
) -> Result<EvalResults> {
    let _lock = lock_results(path)?;
    let mut results = load_or_new(path, model)?;
    results.perplexity = curves;
    save_results(path, &results)?;
    Ok(results)
}

/// The lock on a results file for one read-merge-write: tasks running side by side into one
/// folder share `<model>.results.json`, and each merge must start from the other's last write.
/// The section is short, so a holder is waited for (up to a minute) rather than refused.
fn lock_results(path: &Path) -> Result<Lock> {
    Ok(Lock::acquire_within(
        path,
        std::time::Duration::from_secs(60),
        &mut |_| {},
    )?)
}

fn load_or_new(path: &Path, model: &str) -> Result<EvalResults> {
    if path.exists() {
        let mut results = EvalResults::load(path).map_err(|e| Error::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        // An earlier version's entries are valid in this one (its fields are all optional).
        results.schema_version = RESULTS_SCHEMA_VERSION;
        Ok(results)
    } else {
        Ok(EvalResults {
            schema_version: RESULTS_SCHEMA_VERSION,
            model: model.to_string(),
            niah: Vec::new(),
            quality: Vec::new(),
            perplexity: Vec::new(),
        })
    }
}

fn save_results(path: &Path, results: &EvalResults) -> Result<()> {
    write_atomic(path, &results.to_json()?)
}
