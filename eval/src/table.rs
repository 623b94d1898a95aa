//! The Markdown tables of a run. A score table (NIAH's and RULER's, [`score_markdown`]) has one
//! row per (method, budget), one column per context length or task (in percent), then the overall
//! score, the KV fraction and the share of FullKV's overall score; the perplexity table reads the
//! curves at fixed positions. [`rows`] groups records into a table's rows, for the tables and for
//! the quality points of the results file.

use crate::records::Record;
use crate::results::{label as row_label, PerplexityCurve};

/// Mean of `v` (0 when empty).
pub(crate) fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Mean KV fraction of `records`, kept in (0, 1] as the results schema wants it.
fn kv_fraction<'r>(records: impl Iterator<Item = &'r &'r Record>) -> f64 {
    let f: Vec<f64> = records.map(|r| r.kv_fraction).collect();
    mean(&f).clamp(f64::MIN_POSITIVE, 1.0)
}

/// How a row's overall score is formed from its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    /// The mean over every record of the row (NIAH: each length weighs by its examples).
    Records,
    /// The mean of the column means, over the columns with records (RULER's average of tasks).
    Columns,
}

/// The records of one (method, budget), by column.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordRow<'a> {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target; `None` for `full`.
    pub budget: Option<usize>,
    /// The row's records of each column.
    pub columns: Vec<Vec<&'a Record>>,
}

impl RecordRow<'_> {
    /// Mean score of column `i`; `None` where the row has no records there.
    pub fn column_score(&self, i: usize) -> Option<f64> {
        let rs = &self.columns[i];
        (!rs.is_empty()).then(|| mean(&rs.iter().map(|r| r.score).collect::<Vec<_>>()))
    }

    /// The row's overall score.
    pub fn overall(&self, how: Overall) -> f64 {
        let scores: Vec<f64> = match how {
            Overall::Records => self.columns.iter().flatten().map(|r| r.score).collect(),
            Overall::Columns => (0..self.columns.len())
                .filter_map(|i| self.column_score(i))
                .collect(),
        };
        mean(&scores)
    }

    /// Mean KV fraction of the row's records.
    pub fn kv_fraction(&self) -> f64 {
        kv_fraction(self.columns.iter().flatten())
    }

    /// Mean KV fraction of column `i`'s records.
    pub fn column_kv_fraction(&self, i: usize) -> f64 {
        kv_fraction(self.columns[i].iter())
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
        let at = rows
            .iter()
            .position(|x| x.method == r.method && x.budget == r.budget);
        let i = at.unwrap_or_else(|| {
            rows.push(RecordRow {
                method: r.method.clone(),
                budget: r.budget,
                columns: vec![Vec::new(); columns],
            });
            rows.len() - 1
        });
        rows[i].columns[c].push(r);
    }
    rows
}

/// A score table: `| method @ budget | <columns> | <overall> | KV fraction | of FullKV |`,
/// scores in percent; the last column is the row's overall score over the `full` row's (`–`
/// without one).
pub fn score_markdown(
    columns: &[String],
    overall: &str,
    how: Overall,
    rows: &[RecordRow<'_>],
) -> String {
    let full = rows
        .iter()
        .find(|r| r.method == "full" && r.budget.is_none())
        .map(|r| r.overall(how));
    let mut out = String::from("| method @ budget |");
    for c in columns {
        out.push_str(&format!(" {c} |"));
    }
    out.push_str(&format!(" {overall} | KV fraction | of FullKV |\n|---|"));
    out.push_str(&"---:|".repeat(columns.len() + 3));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |", row_label(&row.method, row.budget)));
        for i in 0..row.columns.len() {
            match row.column_score(i) {
                Some(s) => out.push_str(&format!(" {:.1} |", 100.0 * s)),
                None => out.push_str(" – |"),
            }
        }
        let score = row.overall(how);
        let share = match full {
            Some(f) if f > 0.0 => format!("{:.0}%", 100.0 * score / f),
            _ => "–".to_string(),
        };
        out.push_str(&format!(
            " {:.1} | {:.3} | {share} |\n",
            100.0 * score,
            row.kv_fraction()
        ));
    }
    out
}

/// The table of `task`'s records: a column per context length (mean over depths and examples),
/// then the mean over all the row's records; rows in the order first met.
pub fn markdown(task: &str, records: &[Record]) -> String {
    let mut lengths: Vec<usize> = records
        .iter()
        .filter(|r| r.task == task)
        .map(|r| r.context_len)
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    let column_of = |r: &Record| {
        let at = lengths.binary_search(&r.context_len).ok();
        at.filter(|_| r.task == task)
    };
    let rows = rows(records, lengths.len(), column_of);
    let columns: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
    score_markdown(&columns, "mean", Overall::Records, &rows)
}

/// The perplexity table: one row per curve, the perplexity at each of `at` (positions on the
/// curve; others are skipped) and at the end.
pub fn ppl_markdown(curves: &[PerplexityCurve], at: &[usize]) -> String {
    let mut out = String::from("| method @ budget |");
    for p in at {
        out.push_str(&format!(" ≤ {p} |"));
    }
    out.push_str(" all |\n|---|");
    out.push_str(&"---:|".repeat(at.len() + 1));
    out.push('\n');
    for c in curves {
        out.push_str(&format!("| {} |", row_label(&c.method, c.budget)));
        for p in at {
            match c.positions.iter().position(|x| x == p) {
                Some(i) => out.push_str(&format!(" {:.2} |", c.perplexity[i])),
                None => out.push_str(" – |"),
            }
        }
        let last = c.perplexity.last().copied().unwrap_or(f64::NAN);
        out.push_str(&format!(" {last:.2} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(method: &str, budget: Option<usize>, len: usize, score: f64, kv: f64) -> Record {
        crate::records::test_record("niah", method, budget, len, score, kv)
    }

    #[test]
    fn table_has_a_row_per_method_budget_and_a_column_per_length() {
        let records = [
            rec("full", None, 512, 1.0, 1.0),
            rec("full", None, 1024, 0.5, 1.0),
            rec("snapkv", Some(64), 512, 0.5, 0.125),
            rec("snapkv", Some(64), 1024, 0.0, 0.0625),
        ];
        let t = markdown("niah", &records);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| method @ budget | 512 | 1024 | mean | KV fraction | of FullKV |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|");
        assert_eq!(lines[2], "| full | 100.0 | 50.0 | 75.0 | 1.000 | 100% |");
        assert_eq!(
            lines[3],
            "| snapkv @ 64 | 50.0 | 0.0 | 25.0 | 0.094 | 33% |"
        );
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn ppl_table_reads_the_curve_at_the_asked_positions() {
        let c = PerplexityCurve {
            method: "treekv".into(),
            budget: Some(64),
            positions: vec![128, 256, 300],
            perplexity: vec![20.0, 15.5, 14.25],
        };
        let t = ppl_markdown(&[c], &[128, 512]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| method @ budget | ≤ 128 | ≤ 512 | all |");
        assert_eq!(lines[2], "| treekv @ 64 | 20.00 | – | 14.25 |");
    }
}
