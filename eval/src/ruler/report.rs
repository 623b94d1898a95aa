//! A RULER run's summary: quality points for the results file and the Markdown table.
//!
//! Per (method, budget): one quality point per task, task `ruler/<name>` (mean over examples),
//! and one `ruler` point, the mean of the task means (RULER's average); the KV fraction is the
//! mean over the records it covers. The table has one row per method @ budget and one column per
//! task, then the average, the KV fraction and the share of FullKV's average.

use crate::records::Record;
use crate::results::QualityPoint;
use crate::table::{self, Overall, RecordRow};

use super::Task;

/// Task name of the average in the results file; per-task points are `ruler/<task>`.
pub const RESULTS_TASK: &str = "ruler";

/// Rows in the order first met, a column per task of `tasks`.
fn rows<'a>(records: &'a [Record], tasks: &[Task]) -> Vec<RecordRow<'a>> {
    table::rows(records, tasks.len(), |r| {
        tasks.iter().position(|t| t.name() == r.task)
    })
}

/// Quality points of `tasks`' records: per task and the average.
pub fn quality(records: &[Record], tasks: &[Task]) -> Vec<QualityPoint> {
    let mut out = Vec::new();
    for row in rows(records, tasks) {
        let point = |task: String, kv_fraction: f64, score: f64| QualityPoint {
            task,
            method: row.method.clone(),
            budget: row.budget,
            kv_fraction,
            score,
        };
        out.push(point(
            RESULTS_TASK.to_string(),
            row.kv_fraction(),
            row.overall(Overall::Columns),
        ));
        for (i, t) in tasks.iter().enumerate() {
            if let Some(score) = row.column_score(i) {
                let task = format!("{RESULTS_TASK}/{}", t.name());
                out.push(point(task, row.column_kv_fraction(i), score));
            }
        }
    }
    out
}

/// The table of `tasks`' records, scores in percent: a column per task, then the average.
pub fn markdown(records: &[Record], tasks: &[Task]) -> String {
    let columns: Vec<String> = tasks.iter().map(|t| t.name().to_string()).collect();
    table::score_markdown(&columns, "average", Overall::Columns, &rows(records, tasks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(task: Task, method: &str, budget: Option<usize>, score: f64, kv: f64) -> Record {
        crate::records::test_record(task.name(), method, budget, 4096, score, kv)
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
