//! A table's rows: the records of one (method, budget), by column, and what a table entry or a
//! quality point says about them — the measured KV fraction (the peak over the generation where
//! recorded, [`Record::kv_held`]), the mean score with its 95% interval
//! ([`crate::stats::estimate`]: Wilson for pass rates of independent prompts, the cluster
//! bootstrap otherwise), and paired differences against SnapKV at the same budget and against
//! FullKV ([`crate::stats::paired`]) over the prompts both rows scored.
//!
//! A prompt is identified by (task, context length, depth, example): the cell key without the
//! method and budget, so records of other sources (kvpress's, in the same schema) pair with
//! kvplan's. Within a column group, values are clustered by [`Record::cluster`] (a paired
//! difference by this row's record's cluster).

use std::collections::BTreeMap;

use super::clusters;
use crate::records::Record;
use crate::results::{PairedDelta, QualityPoint, ScoreInterval};
use crate::stats::{estimate, paired, Estimate, Paired};

/// Mean of `v` (0 when empty).
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// How a row's overall score is formed from its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    /// The mean over every record of the row (NIAH: each length weighs by its examples).
    Records,
    /// The mean of the column means, over the columns with records (RULER's average of tasks).
    Columns,
}

/// What a statistic covers: the row's overall score or one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The overall score, formed as said.
    Overall(Overall),
    /// Column `i`.
    Column(usize),
}

/// The reference method of the paired differences at each budget.
pub const SNAPKV: &str = "snapkv";
/// The reference method without compression: FullKV, the method table's first line.
pub const FULL: &str = kvplan_planner::method::NAMES[0];

/// How far a ratio row's mean effective ratio may land from its target and still be compared
/// with another method at that target.
pub const AT_TARGET: f64 = 0.01;

/// The records of one (method, budget) or (method, target ratio), by column.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow<'a> {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target; `None` for `full` and ratio rows.
    pub budget: Option<usize>,
    /// Target compression ratio of a ratio row ([`crate::ratio`]).
    pub ratio: Option<f64>,
    /// The row's records of each column.
    pub columns: Vec<Vec<&'a Record>>,
}

/// A prompt's identity: (task, context length, depth's bits, example).
pub(crate) type PromptKey<'r> = (&'r str, usize, u64, usize);

pub(crate) fn prompt_key(r: &Record) -> PromptKey<'_> {
    (&r.task, r.context_len, r.depth.to_bits(), r.example)
}

/// What one scope of a row says: measured KV fraction, score and paired differences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Mean KV fraction of the scope's records, in (0, 1]: each record's peak over the
    /// generation where recorded ([`Record::kv_held`]).
    pub kv_fraction: f64,
    /// Mean score with its interval; `None` without records.
    pub score: Option<Estimate>,
    /// Paired difference against `snapkv` at the same budget (none for `snapkv` and `full`).
    pub vs_snapkv: Option<Paired>,
    /// Paired difference against `full` (none for `full`).
    pub vs_full: Option<Paired>,
}

impl<'a> RecordRow<'a> {
    /// `method @ budget`, `method @ 50%` or `method`.
    pub fn label(&self) -> String {
        match self.ratio {
            Some(r) => crate::ratio::label(&self.method, r),
            None => crate::results::label(&self.method, self.budget),
        }
    }

    /// The same budget or the same target ratio as `other`.
    pub fn same_target(&self, other: &RecordRow<'_>) -> bool {
        self.budget == other.budget && same_ratio(self.ratio, other.ratio)
    }

    /// Whether a ratio row's mean effective ratio lands within [`AT_TARGET`] of its target (rows
    /// without a target ratio do).
    pub fn lands(&self) -> bool {
        match (self.ratio, self.effective_ratio()) {
            (Some(t), Some((m, _, _))) => (m - t).abs() <= AT_TARGET + 1e-12,
            _ => true,
        }
    }

    /// Whether this row and `method`'s row at the same target both land on it ([`Self::lands`]):
    /// two methods are compared at a target only then.
    pub fn comparable_at_target(&self, rows: &[RecordRow<'_>], method: &str) -> bool {
        let other = rows
            .iter()
            .find(|r| r.method == method && r.same_target(self));
        self.lands() && other.is_none_or(RecordRow::lands)
    }

    /// Mean effective compression ratio of a ratio row's records with the smallest and largest
    /// ([`crate::ratio`]); `None` for other rows.
    pub fn effective_ratio(&self) -> Option<(f64, f64, f64)> {
        let e: Vec<f64> = self
            .columns
            .iter()
            .flatten()
            .filter_map(|r| r.ratio.as_ref().map(|c| c.effective))
            .collect();
        if e.is_empty() {
            return None;
        }
        let lo = e.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = e.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some((mean(&e), lo, hi))
    }

    /// The column indices of each group of `scope`: all columns as one group, each column its
    /// own group (a mean of column means), or one column.
    fn groups(&self, scope: Scope) -> Vec<Vec<usize>> {
        let n = self.columns.len();
        match scope {
            Scope::Overall(Overall::Records) => vec![(0..n).collect()],
            Scope::Overall(Overall::Columns) => (0..n).map(|i| vec![i]).collect(),
            Scope::Column(i) => vec![vec![i]],
        }
    }

    /// The records of the columns `cols`, in prompt order.
    fn records_of(&self, cols: &[usize]) -> Vec<&'a Record> {
        let mut out: Vec<&'a Record> = cols.iter().flat_map(|&i| self.columns[i].clone()).collect();
        out.sort_by(|a, b| prompt_key(a).cmp(&prompt_key(b)));
        out
    }

    /// Mean score of column `i`; `None` where the row has no records there.
    pub fn column_score(&self, i: usize) -> Option<f64> {
        self.estimate(Scope::Column(i)).map(|e| e.mean)
    }

    /// The mean score of `scope` with its interval; `None` without records.
    pub fn estimate(&self, scope: Scope) -> Option<Estimate> {
        let groups: Vec<Vec<Vec<f64>>> = self
            .groups(scope)
            .iter()
            .map(|cols| clusters(&self.records_of(cols), |r| r.score))
            .filter(|g| !g.is_empty())
            .collect();
        estimate(&groups)
    }

    /// The row's overall score (0 without records).
    pub fn overall(&self, how: Overall) -> f64 {
        self.estimate(Scope::Overall(how)).map_or(0.0, |e| e.mean)
    }

    /// Mean KV fraction of `scope`'s records (each its peak over the generation where recorded,
    /// [`Record::kv_held`]), kept in (0, 1] as the results schema wants it.
    pub fn kv_fraction_of(&self, scope: Scope) -> f64 {
        let cols: Vec<usize> = self.groups(scope).concat();
        let f: Vec<f64> = self.records_of(&cols).iter().map(|r| r.kv_held()).collect();
        mean(&f).clamp(f64::MIN_POSITIVE, 1.0)
    }

    /// Mean KV fraction of the row's records.
    pub fn kv_fraction(&self) -> f64 {
        self.kv_fraction_of(Scope::Overall(Overall::Records))
    }

    /// This row's scores minus `other`'s over the prompts both scored in `scope`, grouped as
    /// the scope's score is; `None` without a common prompt.
    pub fn paired(&self, other: &RecordRow<'_>, scope: Scope) -> Option<Paired> {
        let groups: Vec<Vec<Vec<(f64, f64)>>> = self
            .groups(scope)
            .iter()
            .map(|cols| {
                let theirs: BTreeMap<PromptKey<'_>, f64> = other
                    .records_of(cols)
                    .into_iter()
                    .map(|r| (prompt_key(r), r.score))
                    .collect();
                let both: Vec<&Record> = self
                    .records_of(cols)
                    .into_iter()
                    .filter(|r| theirs.contains_key(&prompt_key(r)))
                    .collect();
                clusters(&both, |r| (r.score, theirs[&prompt_key(r)]))
            })
            .filter(|g| !g.is_empty())
            .collect();
        paired(&groups)
    }

    /// This row paired with `method`'s row at `budget` and `ratio` among `rows` ([`Self::paired`]);
    /// `None` when there is none, or when that row is this one.
    pub fn paired_at(
        &self,
        rows: &[RecordRow<'_>],
        method: &str,
        budget: Option<usize>,
        ratio: Option<f64>,
        scope: Scope,
    ) -> Option<Paired> {
        let is_self =
            self.method == method && self.budget == budget && same_ratio(self.ratio, ratio);
        rows.iter()
            .find(|r| r.method == method && r.budget == budget && same_ratio(r.ratio, ratio))
            .filter(|_| !is_self)
            .and_then(|r| self.paired(r, scope))
    }

    /// This row paired with `method`'s row at its own budget or target ratio (none for FullKV's
    /// row, which has neither, and none where either ratio row misses the target by more than
    /// [`AT_TARGET`]: [`Self::comparable_at_target`]).
    pub fn paired_beside(
        &self,
        rows: &[RecordRow<'_>],
        method: &str,
        scope: Scope,
    ) -> Option<Paired> {
        let at_target = self.budget.is_some() || self.ratio.is_some();
        (at_target && self.comparable_at_target(rows, method))
            .then(|| self.paired_at(rows, method, self.budget, self.ratio, scope))
            .flatten()
    }

    /// The row's summary in `scope`, its references found among `rows`.
    pub fn summary(&self, rows: &[RecordRow<'_>], scope: Scope) -> Summary {
        Summary {
            kv_fraction: self.kv_fraction_of(scope),
            score: self.estimate(scope),
            vs_snapkv: self.paired_beside(rows, SNAPKV, scope),
            vs_full: self.paired_at(rows, FULL, None, None, scope),
        }
    }
}

impl RecordRow<'_> {
    /// The quality point of `task` for this row in `scope`, its references found among `rows`.
    pub fn quality_point(&self, task: &str, rows: &[RecordRow<'_>], scope: Scope) -> QualityPoint {
        let s = self.summary(rows, scope);
        QualityPoint {
            task: task.to_string(),
            method: self.method.clone(),
            budget: self.budget,
            ratio: self.ratio,
            kv_fraction: s.kv_fraction,
            score: s.score.map_or(0.0, |e| e.mean),
            n: s.score.map(|e| e.n),
            clusters: s.score.map(|e| e.clusters),
            interval: s.score.as_ref().and_then(ScoreInterval::of),
            vs_snapkv: s.vs_snapkv.as_ref().map(PairedDelta::from),
            vs_full: s.vs_full.as_ref().map(PairedDelta::from),
        }
    }
}

/// `records` as rows of a table of `columns` columns, in the order first met; `column_of` gives
/// a record's column (`None`: not in the table).
pub fn rows(
    records: &[Record],
    columns: usize,
    column_of: impl Fn(&Record) -> Option<usize>,
) -> Vec<RecordRow<'_>> {
    let mut rows: Vec<RecordRow<'_>> = Vec::new();
    for r in records {
        let Some(c) = column_of(r) else {
            continue;
        };
        let ratio = r.target_ratio();
        let at = rows.iter().position(|x| {
            x.method == r.method && x.budget == r.budget && same_ratio(x.ratio, ratio)
        });
        let i = at.unwrap_or_else(|| {
            rows.push(RecordRow {
                method: r.method.clone(),
                budget: r.budget,
                ratio,
                columns: vec![Vec::new(); columns],
            });
            rows.len() - 1
        });
        rows[i].columns[c].push(r);
    }
    rows
}

/// Two target ratios the same to four decimals (the cells' keys), or both absent.
fn same_ratio(a: Option<f64>, b: Option<f64>) -> bool {
    a.map(crate::ratio::key) == b.map(crate::ratio::key)
}
