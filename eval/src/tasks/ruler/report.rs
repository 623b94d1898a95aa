//! A RULER run's summary: quality points for the results file and the Markdown table.
//!
//! Per (method, budget): one quality point per task, task `ruler/<name>` (mean over examples),
//! and one `ruler` point, the mean of the task means (RULER's average); the KV fraction is the
//! mean over the records it covers; each point carries its 95% interval and paired differences
//! (`crate::stats`; the average's bootstrap resamples each task within itself). The tables
//! ([`crate::table::score_markdown`]) have one row per method @ budget by measured KV bytes: the
//! average with its interval and differences, then each task's score with its interval. A run
//! with target ratios (`--ratios`) adds [`ratio_markdown`]: how close each row's effective
//! compression ratios came to its target.

use crate::aggregate::{self, Overall, RecordRow, Scope};
use crate::records::Record;
use crate::results::QualityPoint;
use crate::table;

use super::Task;

/// Task name of the average in the results file; per-task points are `ruler/<task>`.
pub const RESULTS_TASK: &str = "ruler";

/// Rows in the order first met, a column per task of `tasks`.
fn rows<'a>(records: &'a [Record], tasks: &[Task]) -> Vec<RecordRow<'a>> {
    aggregate::rows(records, tasks.len(), |r| {
        tasks.iter().position(|t| t.name() == r.task)
    })
}

/// Quality points of `tasks`' records: per task and the average, each with its interval and
/// paired differences.
pub fn quality(records: &[Record], tasks: &[Task]) -> Vec<QualityPoint> {
    let rows = rows(records, tasks);
    let mut out = Vec::new();
    for row in &rows {
        out.push(row.quality_point(RESULTS_TASK, &rows, Scope::Overall(Overall::Columns)));
        for (i, t) in tasks.iter().enumerate() {
            if !row.columns[i].is_empty() {
                let task = format!("{RESULTS_TASK}/{}", t.name());
                out.push(row.quality_point(&task, &rows, Scope::Column(i)));
            }
        }
    }
    crate::results::adjust_holm_by_task(&mut out);
    out
}

/// The table of `tasks`' records, scores in percent: a column per task, then the average; then
/// the effective ratios of ratio rows, when there are.
pub fn markdown(records: &[Record], tasks: &[Task]) -> String {
    let columns: Vec<String> = tasks.iter().map(|t| t.name().to_string()).collect();
    let rows = rows(records, tasks);
    let md = table::score_markdown(&columns, "average", Overall::Columns, &rows);
    match ratio_markdown(&rows) {
        Some(r) => format!("{md}\n{r}"),
        None => md,
    }
}

/// How close the ratio rows' effective compression ratios came to their targets, rows by
/// target then method: the mean effective ratio over the row's prompts, its range, the mean
/// distance from the target, and the mean budget found; `None` without ratio rows.
pub fn ratio_markdown(rows: &[RecordRow<'_>]) -> Option<String> {
    let mut ratio_rows: Vec<&RecordRow<'_>> = rows.iter().filter(|r| r.ratio.is_some()).collect();
    if ratio_rows.is_empty() {
        return None;
    }
    ratio_rows.sort_by(|a, b| {
        let t = |r: &RecordRow<'_>| r.ratio.unwrap_or(0.0);
        t(a).total_cmp(&t(b)).then(a.method.cmp(&b.method))
    });
    let mut out = String::from(
        "| method @ target | target | effective [min, max] | mean |effective − target| | \
         budget (mean) | searched | n |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in ratio_rows {
        let cells: Vec<&crate::ratio::RatioCell> = row
            .columns
            .iter()
            .flatten()
            .filter_map(|r| r.ratio.as_ref())
            .collect();
        let target = row.ratio.unwrap_or(0.0);
        let Some((mean, lo, hi)) = row.effective_ratio() else {
            continue;
        };
        let n = cells.len() as f64;
        let off = cells
            .iter()
            .map(|c| (c.effective - target).abs())
            .sum::<f64>()
            / n;
        let budget = cells.iter().map(|c| c.budget as f64).sum::<f64>() / n;
        let searched = cells.iter().filter(|c| c.probes > 0).count();
        out.push_str(&format!(
            "| {} | {target:.3} | {mean:.4} [{lo:.4}, {hi:.4}] | {off:.4} | {budget:.0} | \
             {searched}/{} | {} |\n",
            row.label(),
            cells.len(),
            cells.len()
        ));
    }
    out.push_str(
        "\nEffective compression ratio: 1 − bytes held / FullKV bytes of the compressed tokens \
         (the context in question-agnostic mode), measured on each prompt once compressed, before \
         the question is appended; sinks, windows and codebooks counted, a sliding-window layer's \
         FullKV at most its window. Each prompt's budget is the largest whose effective ratio is \
         not below the target (searched: budgets measured on the shared prefill; a press with its \
         own prefill runs at ⌊(1 − target)·n⌋ unsearched).\n",
    );
    Some(out)
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
            Record {
                example: 1,
                needle: "another".into(),
                ..rec(Task::Vt, "full", None, 0.5, 1.0)
            },
            rec(Task::Qa1, "full", None, 0.0, 1.0),
            rec(Task::Vt, "snapkv", Some(64), 0.5, 0.25),
            rec(Task::Qa1, "snapkv", Some(64), 0.0, 0.125),
            rec(Task::Cwe, "snapkv", Some(64), 1.0, 0.5),
        ]
    }

    #[test]
    fn tables_give_the_average_then_each_task_with_intervals() {
        let t = markdown(&records(), &[Task::Vt, Task::Qa1]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| method @ budget | KV % | average [95% CI] | Δ vs snapkv [95% CI] | Δ vs full [95% CI] | n | clusters |"
        );
        // full: vt (1 + 0.5)/2 = 75, qa_1 0 → average 37.5. No interval: qa_1 has one example,
        // which every resample would draw (the bootstrap would say [25, 50], vt's spread alone,
        // as if qa_1's 0 were known exactly).
        assert_eq!(lines[2], "| full | 100.0 | 37.5 [–] | – | – | 3 | 3 |");
        // snapkv: vt 50, qa_1 0 → 25 at KV (0.25 + 0.125)/2; paired with full on vt #0 and
        // qa_1 #0: vt 0.5 − 1, qa_1 0 − 0 → mean of the task means −25, one pair each: no
        // interval. The KV fraction is the mean over the row's records. The cluster sign test:
        // one example differs (vt #0), either sign reaches |T| = 0.25: p = 1 (the table's only
        // p, so Holm's too); V₀ = (½·0.5)² = 0.0625, mdd 2.8016·0.25 = 70.0 points.
        assert_eq!(
            lines[3],
            "| snapkv @ 64 | 18.8 | 25.0 [–] | – | -25.0 [–] p 1.000 Holm 1.000 ≈ mdd 70.0 | 2 | 2 |"
        );
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], "| method @ budget | KV % | vt | qa_1 |");
        // vt of full: 0.5 and 1 are not pass rates: bootstrap [50, 100]; qa_1 0/1: Wilson [0, 79.3].
        // vt of snapkv: one prompt scoring 0.5, not a pass rate: no interval.
        assert_eq!(
            lines[7],
            "| full | 100.0 | 75.0 [50.0, 100.0] | 0.0 [0.0, 79.3] |"
        );
        assert_eq!(
            lines[8],
            "| snapkv @ 64 | 18.8 | 50.0 [–] | 0.0 [0.0, 79.3] |"
        );
        assert!(
            lines[10].contains("mean of the column means"),
            "{}",
            lines[10]
        );
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
        // Intervals and differences travel with the points.
        let avg = q
            .iter()
            .find(|p| p.task == "ruler" && p.method == "snapkv")
            .expect("average");
        let d = avg.vs_full.expect("paired with full");
        // One prompt a task: a mean, but no interval (each task's one prompt is drawn every
        // time: the bootstrap would say [-25, -25]).
        assert_eq!((d.n, d.mean, d.low, d.high), (2, -0.25, None, None));
        assert_eq!((d.p_value, d.p_holm), (Some(1.0), Some(1.0)));
        let qa = q
            .iter()
            .find(|p| p.task == "ruler/qa_1" && p.method == "full")
            .expect("qa_1");
        let i = qa.interval.expect("interval");
        assert_eq!(
            (qa.n, i.method),
            (Some(1), crate::results::IntervalMethod::Wilson)
        );
        assert!((i.high - 0.793_45).abs() < 1e-5, "{i:?}");
        // full: average, vt, qa_1; snapkv: average, vt, qa_1, cwe.
        assert_eq!(q.len(), 7);
    }

    fn at_ratio(task: Task, method: &str, target: f64, effective: f64, score: f64) -> Record {
        Record {
            ratio: Some(crate::ratio::RatioCell {
                target,
                effective,
                budget: 1000,
                probes: 3,
            }),
            ..rec(task, method, None, score, 1.0 - effective)
        }
    }

    #[test]
    fn ratio_rows_are_their_own_rows_and_say_how_close_they_came() {
        let mut r = records();
        r.push(at_ratio(Task::Vt, "snapkv", 0.5, 0.4998, 1.0));
        r.push(at_ratio(Task::Qa1, "snapkv", 0.5, 0.5, 0.0));
        r.push(at_ratio(Task::Vt, "snapkv", 0.75, 0.7496, 0.0));
        let t = markdown(&r, &[Task::Vt, Task::Qa1]);
        // Three snapkv rows: @ 64, @ 50%, @ 75%; full unchanged.
        assert!(t.contains("| snapkv @ 50% | 50.0 | 50.0 [–] |"), "{t}");
        assert!(t.contains("| full | 100.0 | 37.5 [–] |"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("| method @ target |"))
            .expect("ratio table");
        // 0.5: effective 0.4998 and 0.5 → mean 0.4999, off (0.0002 + 0)/2 = 0.0001.
        assert_eq!(
            lines[at + 2],
            "| snapkv @ 50% | 0.500 | 0.4999 [0.4998, 0.5000] | 0.0001 | 1000 | 2/2 | 2 |"
        );
        assert!(lines[at + 3].starts_with("| snapkv @ 75% | 0.750 | 0.7496"));
        // Quality points keep the ratio and pair with nothing but full at the same prompts.
        let q = quality(&r, &[Task::Vt, Task::Qa1]);
        let p = q
            .iter()
            .find(|p| p.task == "ruler" && p.ratio == Some(0.5))
            .expect("ratio point");
        assert_eq!((p.method.as_str(), p.budget), ("snapkv", None));
        assert!(p.vs_snapkv.is_none() && p.vs_full.is_some());
    }
}
