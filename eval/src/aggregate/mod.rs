//! Records into results: what the prompt tasks' records ([`Record`]) add up to in the results
//! schema ([`crate::results`]) and in the tables ([`crate::table`]).
//!
//! [`rows`] groups records into a table's rows, one per (method, budget) or (method, target
//! ratio), by column; a row gives its mean score with its interval, its measured KV fraction and
//! its paired differences against SnapKV and FullKV ([`RecordRow::summary`]), and the quality
//! point of the results file ([`RecordRow::quality_point`]). [`aggregate_niah`] turns a task's
//! records into the results' NIAH cells — one per (method, budget, length, depth), the mean over
//! examples with its interval — and one quality point per (method, budget), Holm-adjusted as one
//! family (`crate::stats`).
//!
//! Nothing here reads or writes a file: records come from [`crate::records`], results are merged
//! into their file by [`crate::results`]. A task's own summary (RULER's average of tasks, the
//! perplexity curves) is the task's ([`crate::tasks`]).

mod rows;

pub(crate) use rows::mean;
pub(crate) use rows::{prompt_key, PromptKey};
pub use rows::{rows, Overall, RecordRow, Scope, Summary, FULL, SNAPKV};

use crate::records::Record;
use crate::results::{NiahCell, QualityPoint, ScoreInterval};
use crate::stats::estimate;

/// NIAH cells (mean score over examples per method, budget, length, depth, with its interval)
/// and one quality point per (method, budget) of `task` (mean over every prompt, interval,
/// paired differences against SnapKV and FullKV), in the order first met.
pub fn aggregate_niah(task: &str, records: &[Record]) -> (Vec<NiahCell>, Vec<QualityPoint>) {
    type CellId = (String, Option<usize>, usize, u64);
    let mut cells: Vec<(CellId, Vec<&Record>)> = Vec::new();
    for r in records.iter().filter(|r| r.task == task) {
        let id = (r.method.clone(), r.budget, r.context_len, r.depth.to_bits());
        match cells.iter_mut().find(|(k, _)| *k == id) {
            Some((_, s)) => s.push(r),
            None => cells.push((id, vec![r])),
        }
    }
    let niah = cells
        .into_iter()
        .map(|((method, budget, context_len, depth), mut s)| {
            s.sort_by_key(|r| r.example);
            let scores: Vec<f64> = s.iter().map(|r| r.score).collect();
            let e = estimate(&[clusters(&s, |r| r.score)]);
            NiahCell {
                method,
                budget,
                context_len,
                depth: f64::from_bits(depth),
                score: mean(&scores),
                n: e.map(|e| e.n),
                interval: e.as_ref().and_then(ScoreInterval::of),
            }
        })
        .collect();
    let rows = rows(records, 1, |r| (r.task == task).then_some(0));
    let mut quality: Vec<QualityPoint> = rows
        .iter()
        .map(|row| row.quality_point(task, &rows, Scope::Overall(Overall::Records)))
        .collect();
    crate::results::adjust_holm(&mut quality);
    (niah, quality)
}

/// `value` of each record, by cluster ([`Record::cluster`]), clusters in the order first met.
pub fn clusters<T>(records: &[&Record], value: impl Fn(&Record) -> T) -> Vec<Vec<T>> {
    let mut names: Vec<String> = Vec::new();
    let mut out: Vec<Vec<T>> = Vec::new();
    for r in records {
        let c = r.cluster();
        match names.iter().position(|n| *n == c) {
            Some(i) => out[i].push(value(r)),
            None => {
                names.push(c);
                out.push(vec![value(r)]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_niah_record as rec;
    use crate::results::{merge_results, EvalResults};

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("kvplan-eval-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn aggregation_averages_examples_per_cell_and_per_method() {
        let records = [
            rec("full", None, 512, 0, 1.0),
            rec("full", None, 512, 1, 0.0),
            rec("full", None, 1024, 0, 1.0),
            rec("snapkv", Some(64), 512, 0, 0.0),
        ];
        let (cells, points) = aggregate_niah("niah", &records);
        assert_eq!(cells.len(), 3);
        assert_eq!((cells[0].context_len, cells[0].score), (512, 0.5));
        assert_eq!((cells[1].context_len, cells[1].score), (1024, 1.0));
        assert_eq!(points.len(), 2);
        assert!((points[0].score - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(points[0].kv_fraction, 1.0);
        assert_eq!((points[1].budget, points[1].kv_fraction), (Some(64), 0.25));
    }

    #[test]
    fn merged_results_keep_other_tasks_and_validate() {
        let dir = temp_dir("merge");
        let path = dir.join("m.results.json");
        let (n, q) = aggregate_niah("niah", &[rec("full", None, 512, 0, 1.0)]);
        merge_results(&path, "m", "niah", n, q).expect("first");
        let other = vec![QualityPoint {
            task: "ruler".into(),
            method: "full".into(),
            budget: None,
            ratio: None,
            kv_fraction: 1.0,
            score: 0.5,
            n: None,
            clusters: None,
            interval: None,
            vs_snapkv: None,
            vs_full: None,
        }];
        merge_results(&path, "m", "ruler", Vec::new(), other).expect("second");
        let back = EvalResults::load(&path).expect("valid");
        assert_eq!(back.niah.len(), 1, "a non-niah task leaves the cells alone");
        assert_eq!(back.quality.len(), 2);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
