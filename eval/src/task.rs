//! What every evaluation task shares, apart from the model: the cells of a run grouped by the
//! prompt (or text) they are scored on, progress, skipped cells, where scoring puts each cell
//! ([`Sink`]), the settings every records file holds, and the [`Reporter`] the driver
//! (`crate::driver`, feature `model`) tells what happens.

use std::collections::BTreeMap;
use std::path::Path;

use kvplan_planner::MethodName;

use crate::records::{CellKey, CellRecord, RecordsFile};
use crate::results::label;
use crate::Result;

pub use crate::ReportError;

/// One (method, budget) or (method, target ratio) cell of a prompt, with its record's key.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Method, parsed.
    pub method: MethodName,
    /// `--budget` target; `None` for `full` and ratio cells.
    pub budget: Option<usize>,
    /// Target compression ratio of the context ([`crate::ratio`]); `None` for budget cells.
    pub ratio: Option<f64>,
    /// Identity of its record.
    pub key: CellKey,
}

/// Every (method, budget) cell of one example: each method at each budget, `full` once and
/// without one.
pub fn variants(methods: &[MethodName], budgets: &[usize]) -> Vec<(MethodName, Option<usize>)> {
    let mut out = Vec::new();
    for &m in methods {
        if m.is_full() {
            out.push((m, None));
        } else {
            out.extend(budgets.iter().map(|&b| (m, Some(b))));
        }
    }
    out
}

/// One prompt (or streamed text) of a run and its cells: the driver builds its input once and
/// scores every cell not yet recorded on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    /// Where it is, for messages (`1024 tokens, depth 0.5, example 0`).
    pub at: String,
    /// Its cells, in run order.
    pub cells: Vec<Cell>,
}

impl Unit {
    /// A unit at `at` with one cell per (method, budget) of `variants`, keyed by `key`.
    pub fn new(
        at: String,
        variants: &[(MethodName, Option<usize>)],
        key: impl Fn(&str, Option<usize>) -> CellKey,
    ) -> Self {
        let cells = variants
            .iter()
            .map(|&(m, b)| Cell {
                method: m,
                budget: b,
                ratio: None,
                key: key(&m.to_string(), b),
            })
            .collect();
        Self { at, cells }
    }

    /// Adds a cell per (method, target ratio) of `ratios`, keyed by `key` at that ratio.
    pub fn with_ratios(
        mut self,
        ratios: &[(MethodName, f64)],
        key: impl Fn(&str) -> CellKey,
    ) -> Self {
        self.cells.extend(ratios.iter().map(|&(m, r)| Cell {
            method: m,
            budget: None,
            ratio: Some(r),
            key: key(&m.to_string()).at_ratio(r),
        }));
        self
    }
}

/// Progress of a run, after each cell.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Cells done (reused and skipped included).
    pub done: usize,
    /// Cells reused from earlier records.
    pub reused: usize,
    /// Cells in the run.
    pub total: usize,
    /// The last cell, `method @ budget where: score`.
    pub last: String,
}

impl Progress {
    /// A run of `total` cells.
    pub fn new(total: usize) -> Self {
        Self {
            done: 0,
            reused: 0,
            total,
            last: String::new(),
        }
    }

    /// Counts `reused` cells taken from earlier records.
    pub fn reuse(&mut self, reused: usize) {
        self.done += reused;
        self.reused += reused;
    }
}

/// A cell not run: its press could not be built for the prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target.
    pub budget: Option<usize>,
    /// Target compression ratio of a ratio cell.
    pub ratio: Option<f64>,
    /// Why, as the press registry says.
    pub reason: String,
}

/// Where a task's scoring puts each record and skipped cell: the records file (saved after
/// every record, [`RecordsFile::save`]) and the progress.
pub struct Sink<'s, R: CellRecord> {
    file: &'s mut RecordsFile<R>,
    path: &'s Path,
    progress: &'s mut Progress,
    reporter: &'s mut dyn Reporter,
    what: &'s str,
    recorded: usize,
    skipped: Vec<Skipped>,
}

impl<'s, R: CellRecord> Sink<'s, R> {
    /// A sink into the records `file` saved at `path`, counting on `progress` and telling
    /// `reporter`, for the cells of the prompt described by `what`.
    pub fn new(
        file: &'s mut RecordsFile<R>,
        path: &'s Path,
        progress: &'s mut Progress,
        reporter: &'s mut dyn Reporter,
        what: &'s str,
    ) -> Self {
        Self {
            file,
            path,
            progress,
            reporter,
            what,
            recorded: 0,
            skipped: Vec::new(),
        }
    }

    /// Records a scored cell, saves the records and reports progress.
    pub fn record(&mut self, r: R) -> Result<()> {
        self.progress.done += 1;
        self.progress.last = r.progress_line(self.what);
        self.file.insert(r);
        self.file.save(self.path)?;
        self.recorded += 1;
        self.reporter.progress(self.progress);
        Ok(())
    }

    /// A cell not run (not recorded, so a re-run tries again): counted as done.
    pub fn skip(&mut self, cell: Skipped) {
        self.progress.done += 1;
        self.skipped.push(cell);
    }

    /// The cells recorded and those skipped.
    pub fn finish(self) -> (usize, Vec<Skipped>) {
        (self.recorded, self.skipped)
    }
}

/// One line per (method, budget) of `skipped` (`(where, cell)` pairs): on how many prompts it was
/// not run, where, and why.
pub fn skip_lines(skipped: &[(String, Skipped)]) -> Vec<String> {
    let mut lines: Vec<(String, Vec<&str>, &str)> = Vec::new();
    for (at, cell) in skipped {
        let name = match cell.ratio {
            Some(r) => crate::ratio::label(&cell.method, r),
            None => label(&cell.method, cell.budget),
        };
        match lines.iter_mut().find(|(l, _, _)| *l == name) {
            Some((_, ats, _)) => ats.push(at),
            None => lines.push((name, vec![at], &cell.reason)),
        }
    }
    lines
        .into_iter()
        .map(|(name, ats, reason)| {
            format!(
                "{name} not run on {} prompt(s) ({}): {reason}",
                ats.len(),
                ats.join("; ")
            )
        })
        .collect()
}

/// What every records file is made under: a run with other values does not reuse its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Model name (records, file names).
    pub model: String,
    /// SHA-256 of the model file.
    pub model_sha256: String,
    /// SHA-256 of the plan file, when there is a plan.
    pub plan_sha256: Option<String>,
    /// The burn backend's name.
    pub backend: String,
    /// SHA-256 of the weights file applied over the model's (`--weights`), when given.
    pub weights_sha256: Option<String>,
}

impl Identity {
    /// The base settings of every records file; tasks add their own.
    pub fn settings(&self) -> BTreeMap<String, String> {
        let mut s = BTreeMap::from([
            ("model".to_string(), self.model.clone()),
            ("model_sha256".to_string(), self.model_sha256.clone()),
            (
                "plan_sha256".to_string(),
                self.plan_sha256.clone().unwrap_or_else(|| "none".into()),
            ),
            ("backend".to_string(), self.backend.clone()),
        ]);
        if let Some(w) = &self.weights_sha256 {
            s.insert("weights_sha256".to_string(), w.clone());
        }
        s
    }
}

/// Where a run says what happens: the command line shows a progress bar, lines on stderr, the
/// table on stdout, and draws the figures.
pub trait Reporter {
    /// A line for the user.
    fn note(&mut self, line: &str);
    /// The run of `task` starts, `total` cells.
    fn start(&mut self, task: &str, total: usize);
    /// Progress after a cell (or a prompt's reused or skipped cells).
    fn progress(&mut self, p: &Progress);
    /// The loop is over.
    fn finish(&mut self);
    /// Draws the figures of the results file at `results` into the folder `dir`
    /// (`<out>/figures/<model>/`: models evaluated into one folder keep their own figures).
    fn figures(&mut self, results: &Path, dir: &Path) -> std::result::Result<(), ReportError>;
    /// Shows the Markdown table of the run.
    fn table(&mut self, markdown: &str) -> std::result::Result<(), ReportError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(method: &str, budget: Option<usize>, reason: &str) -> Skipped {
        Skipped {
            method: method.into(),
            budget,
            ratio: None,
            reason: reason.into(),
        }
    }

    #[test]
    fn skips_are_grouped_per_method_and_budget() {
        let skipped = vec![
            ("a".to_string(), skip("spindle", Some(64), "below β")),
            ("b".to_string(), skip("pod", None, "no plan")),
            ("c".to_string(), skip("spindle", Some(64), "below β")),
            (
                "d".to_string(),
                Skipped {
                    ratio: Some(0.75),
                    ..skip("spindle", None, "below β")
                },
            ),
        ];
        assert_eq!(
            skip_lines(&skipped),
            [
                "spindle @ 64 not run on 2 prompt(s) (a; c): below β",
                "pod not run on 1 prompt(s) (b): no plan",
                "spindle @ 75% not run on 1 prompt(s) (d): below β",
            ]
        );
    }

    #[test]
    fn settings_name_the_plan_or_none_and_the_weights_when_given() {
        let mut id = Identity {
            model: "m".into(),
            model_sha256: "aa".into(),
            plan_sha256: None,
            backend: "flex".into(),
            weights_sha256: None,
        };
        let s = id.settings();
        assert_eq!(s.get("plan_sha256").map(String::as_str), Some("none"));
        assert_eq!(s.len(), 4);
        id.weights_sha256 = Some("bb".into());
        assert_eq!(
            id.settings().get("weights_sha256").map(String::as_str),
            Some("bb")
        );
    }
}
