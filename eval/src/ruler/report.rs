//! A RULER run's summary: quality points for the results file and the Markdown table.
//!
//! Per (method, budget): one quality point per task, task `ruler/<name>` (mean over examples),
//! and one `ruler` point, the mean of the task means (RULER's average); the KV fraction is the
//! mean over the records it covers. The table has one row per method @ budget and one column per
//! task, then the average, the KV fraction and the share of FullKV's average.

use crate::results::QualityPoint;
use crate::table::{score_table, ScoreRow};

use super::Task;
use crate::records::Record;

/// Task name of the average in the results file; per-task points are `ruler/<task>`.
pub const RESULTS_TASK: &str = "ruler";

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// One row: a (method, budget) and its records per task.
struct Row<'a> {
    method: String,
    budget: Option<usize>,
    per_task: Vec<Vec<&'a Record>>,
}

impl Row<'_> {
    fn task_mean(&self, i: usize) -> Option<f64> {
        let rs = &self.per_task[i];
        (!rs.is_empty()).then(|| mean(&rs.iter().map(|r| r.score).collect::<Vec<_>>()))
    }

    /// Mean of the task means, over tasks with records.
    fn average(&self) -> f64 {
        let means: Vec<f64> = (0..self.per_task.len())
            .filter_map(|i| self.task_mean(i))
            .collect();
        mean(&means)
    }

    fn kv_fraction(&self) -> f64 {
        let f: Vec<f64> = self
            .per_task
            .iter()
            .flatten()
            .map(|r| r.kv_fraction)
            .collect();
        mean(&f).clamp(f64::MIN_POSITIVE, 1.0)
    }
}

/// Rows in the order first met, for `tasks` only.
fn rows<'a>(records: &'a [Record], tasks: &[Task]) -> Vec<Row<'a>> {
    let mut rows: Vec<Row<'a>> = Vec::new();
    for r in records {
        let Some(t) = tasks.iter().position(|t| t.name() == r.task) else {
            continue;
        };
        let i = match rows
            .iter()
            .position(|x| x.method == r.method && x.budget == r.budget)
        {
            Some(i) => i,
            None => {
                rows.push(Row {
                    method: r.method.clone(),
                    budget: r.budget,
                    per_task: vec![Vec::new(); tasks.len()],
                });
                rows.len() - 1
            }
        };
        rows[i].per_task[t].push(r);
    }
    rows
}

/// Quality points of `tasks`' records: per task and the average.
pub fn quality(records: &[Record], tasks: &[Task]) -> Vec<QualityPoint> {
    let mut out = Vec::new();
    for row in rows(records, tasks) {
        out.push(QualityPoint {
            task: RESULTS_TASK.to_string(),
            method: row.method.clone(),
            budget: row.budget,
            kv_fraction: row.kv_fraction(),
            score: row.average(),
        });
        for (i, t) in tasks.iter().enumerate() {
            let Some(score) = row.task_mean(i) else {
                continue;
            };
            let f: Vec<f64> = row.per_task[i].iter().map(|r| r.kv_fraction).collect();
            out.push(QualityPoint {
                task: format!("{RESULTS_TASK}/{}", t.name()),
                method: row.method.clone(),
                budget: row.budget,
                kv_fraction: mean(&f).clamp(f64::MIN_POSITIVE, 1.0),
                score,
            });
        }
    }
    out
}

/// The table of `tasks`' records, scores in percent: a column per task, then the average.
pub fn markdown(records: &[Record], tasks: &[Task]) -> String {
    let rows = rows(records, tasks);
    let full = rows
        .iter()
        .find(|r| r.method == "full" && r.budget.is_none())
        .map(Row::average);
    let rows: Vec<ScoreRow> = rows
        .iter()
        .map(|row| ScoreRow {
            method: row.method.clone(),
            budget: row.budget,
            columns: (0..tasks.len()).map(|i| row.task_mean(i)).collect(),
            overall: row.average(),
            kv_fraction: row.kv_fraction(),
        })
        .collect();
    let columns: Vec<String> = tasks.iter().map(|t| t.name().to_string()).collect();
    score_table(&columns, "average", &rows, full)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(task: Task, method: &str, budget: Option<usize>, score: f64, kv: f64) -> Record {
        Record {
            task: task.name().into(),
            model: "m".into(),
            context_len: 4096,
            depth: 0.0,
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

    fn records() -> Vec<Record> {
        vec![
            rec(Task::Vt, "full", None, 1.0, 1.0),
            rec(Task::Vt, "full", None, 0.5, 1.0),
            rec(Task::Qa1, "full", None, 0.0, 1.0),
            rec(Task::Vt, "snapkv", Some(64), 0.5, 0.25),
            rec(Task::Qa1, "snapkv", Some(64), 0.0, 0.125),
            rec(Task::Cwe, "snapkv", Some(64), 1.0, 0.5),
        ]
    }

    #[test]
    fn table_has_a_column_per_task_and_averages_task_means() {
        let t = markdown(&records(), &[Task::Vt, Task::Qa1]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| method @ budget | vt | qa_1 | average | KV fraction | of FullKV |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|");
        // full: vt (1 + 0.5) / 2 = 75, qa_1 0 → average 37.5.
        assert_eq!(lines[2], "| full | 75.0 | 0.0 | 37.5 | 1.000 | 100% |");
        // snapkv: vt 50, qa_1 0 → 25, 67% of full; cwe is not a column here.
        assert_eq!(
            lines[3],
            "| snapkv @ 64 | 50.0 | 0.0 | 25.0 | 0.188 | 67% |"
        );
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn quality_points_hold_the_average_and_each_task() {
        let q = quality(&records(), &[Task::Vt, Task::Qa1, Task::Cwe]);
        let get = |task: &str, m: &str| {
            q.iter()
                .find(|p| p.task == task && p.method == m)
                .map(|p| (p.score, p.kv_fraction))
        };
        assert_eq!(get("ruler", "full"), Some((0.375, 1.0)));
        assert_eq!(get("ruler/vt", "full"), Some((0.75, 1.0)));
        assert_eq!(get("ruler/cwe", "full"), None);
        assert_eq!(get("ruler/cwe", "snapkv"), Some((1.0, 0.5)));
        let (s, f) = get("ruler", "snapkv").expect("average");
        assert!((s - 0.5).abs() < 1e-12 && (f - 0.875 / 3.0).abs() < 1e-12);
        // full: average, vt, qa_1; snapkv: average, vt, qa_1, cwe.
        assert_eq!(q.len(), 7);
    }
}
