//! The Markdown tables of a run. A score table ([`score_table`], NIAH's and RULER's) has one row
//! per (method, budget), one column per context length or task (in percent), then the overall
//! score, the KV fraction and the share of FullKV's overall score; the perplexity table reads the
//! curves at fixed positions.

use crate::records::Record;
use crate::results::{label as row_label, PerplexityCurve};

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// One row of a score table.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreRow {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target; `None` for `full`.
    pub budget: Option<usize>,
    /// The score of each column, in [0, 1]; `None` where the row has no records.
    pub columns: Vec<Option<f64>>,
    /// The row's overall score (mean or average), in [0, 1].
    pub overall: f64,
    /// Mean KV fraction of the row's records.
    pub kv_fraction: f64,
}

/// A score table: `| method @ budget | <columns> | <overall> | KV fraction | of FullKV |`,
/// scores in percent; the last column is the row's overall score over `full`'s (`–` without
/// it).
pub fn score_table(
    columns: &[String],
    overall: &str,
    rows: &[ScoreRow],
    full: Option<f64>,
) -> String {
    let mut out = String::from("| method @ budget |");
    for c in columns {
        out.push_str(&format!(" {c} |"));
    }
    out.push_str(&format!(" {overall} | KV fraction | of FullKV |\n|---|"));
    out.push_str(&"---:|".repeat(columns.len() + 3));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |", row_label(&row.method, row.budget)));
        for c in &row.columns {
            match c {
                Some(s) => out.push_str(&format!(" {:.1} |", 100.0 * s)),
                None => out.push_str(" – |"),
            }
        }
        let share = match full {
            Some(f) if f > 0.0 => format!("{:.0}%", 100.0 * row.overall / f),
            _ => "–".to_string(),
        };
        out.push_str(&format!(
            " {:.1} | {:.3} | {share} |\n",
            100.0 * row.overall,
            row.kv_fraction
        ));
    }
    out
}

/// The table of `task`'s records: a column per context length (mean over depths and examples),
/// then the mean; rows in the order first met.
pub fn markdown(task: &str, records: &[Record]) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.task == task).collect();
    let mut lengths: Vec<usize> = recs.iter().map(|r| r.context_len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut ids: Vec<(String, Option<usize>)> = Vec::new();
    for r in &recs {
        let id = (r.method.clone(), r.budget);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let of = |m: &str, b: Option<usize>, len: Option<usize>| -> Vec<&Record> {
        let wanted = |r: &&&Record| r.method == m && r.budget == b;
        let at = |r: &&&Record| len.is_none_or(|l| r.context_len == l);
        recs.iter().filter(wanted).filter(at).copied().collect()
    };
    let score = |rs: &[&Record]| mean(&rs.iter().map(|r| r.score).collect::<Vec<_>>());
    let full = Some(of("full", None, None))
        .filter(|rs| !rs.is_empty())
        .map(|rs| score(&rs));
    let rows: Vec<ScoreRow> = ids
        .into_iter()
        .map(|(method, budget)| {
            let all = of(&method, budget, None);
            let columns = lengths
                .iter()
                .map(|&l| Some(of(&method, budget, Some(l))).filter(|rs| !rs.is_empty()))
                .map(|rs| rs.map(|rs| score(&rs)))
                .collect();
            let kv: Vec<f64> = all.iter().map(|r| r.kv_fraction).collect();
            ScoreRow {
                overall: score(&all),
                kv_fraction: mean(&kv),
                method,
                budget,
                columns,
            }
        })
        .collect();
    let columns: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
    score_table(&columns, "mean", &rows, full)
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
        Record {
            task: "niah".into(),
            model: "m".into(),
            context_len: len,
            depth: 0.5,
            example: 0,
            method: method.into(),
            budget,
            needle: String::new(),
            expected: Vec::new(),
            response: String::new(),
            score,
            kv_fraction: kv,
            seconds: 0.0,
        }
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
