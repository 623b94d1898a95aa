//! Tables and results from records alone (`kvplan eval table`): no model runs.
//!
//! A run's table and results file are a function of its records (`driver::run` writes them after
//! the last cell); when that function changes — how intervals are made, how rows are ordered —
//! the committed tables are re-rendered from the committed records, never re-run. For a records
//! file `<dir>/<model>.<task>.records.json` (`niah` or `ruler`): its records and those of
//! kvpress beside it (`<model>.<task>.kvpress.records.json`, [`crate::companion`]: only when made
//! on the same prompts, checked as a run checks it; else left out, and [`Rendered`] says why) give the
//! Markdown table `<dir>/<model>.<task>.md` (with the window and mode line when the settings name
//! them, as the driver writes it) and the task's entries of `<dir>/<model>.results.json`.
//! Perplexity records are not rendered here (their tables do not change).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::aggregate::aggregate_niah;
use crate::records::{Record, RecordsFile};
use crate::results::merge_results;
use crate::tasks::ruler::{report, Task};
use crate::{companion, io_err, marks, write_atomic, Error, Result};
use kvplan_planner::Plan;

/// What was rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The table written.
    pub table: PathBuf,
    /// The results file updated.
    pub results: PathBuf,
    /// Records behind the table (kvpress's included).
    pub records: usize,
    /// Why kvpress's records beside them were left out: made on other prompts
    /// ([`companion::load`]'s check, as a run does it).
    pub left_out: Option<String>,
}

/// The model and task a records file's name says: `<model>.<task>.records.json`.
pub(crate) fn name_parts(path: &Path) -> Result<(String, String)> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name.strip_suffix(".records.json");
    let parts = stem.and_then(|s| s.rsplit_once('.'));
    match parts {
        Some((model, task)) if !model.is_empty() && task != companion::COMPANION => {
            Ok((model.to_string(), task.to_string()))
        }
        _ => Err(Error::Invalid {
            path: path.display().to_string(),
            message: "expected a kvplan records file named <model>.<task>.records.json \
                      (kvpress's records are read beside kvplan's)"
                .into(),
        }),
    }
}

/// Reads a records file of [`Record`]s.
pub fn read(path: &Path) -> Result<RecordsFile<Record>> {
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    serde_json::from_str(&text).map_err(|e| Error::Invalid {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The plan's SHA-256 the records at `path` were made under (`plan_sha256` of their settings),
/// when they name one.
pub fn plan_sha256(path: &Path) -> Result<Option<String>> {
    Ok(settings_plan_sha256(&read(path)?.settings))
}

/// The plan's SHA-256 a records file's `settings` name (`plan_sha256`), when they name one.
pub fn settings_plan_sha256(settings: &BTreeMap<String, String>) -> Option<String> {
    settings
        .get("plan_sha256")
        .filter(|s| s.as_str() != "none")
        .cloned()
}

/// The window-and-mode line the driver closes a table with, when the settings name them.
fn setup_line(file: &RecordsFile<Record>) -> Option<String> {
    let window = file.settings.get("window")?;
    let mode = file.settings.get("mode")?;
    Some(crate::prompt::setup_line(window, mode))
}

/// Renders the table and results of the records file at `path` (module header); `plan`, the
/// plan the records were made under, marks the rows built on R2 scores not above chance
/// ([`crate::marks`]); the records' settings say whether PoD ran post-trained.
pub fn render(path: &Path, plan: Option<&Plan>) -> Result<Rendered> {
    let (model, task) = name_parts(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let file = read(path)?;
    if file.records.is_empty() {
        // An empty table would replace the last one, and the results file's entries for this
        // task would be dropped: refuse before anything is written.
        return Err(Error::Invalid {
            path: path.display().to_string(),
            message: "holds no records, nothing to render (the table and the results file are \
                      left as they are)"
                .into(),
        });
    }
    let mut records = file.records.clone();
    // kvpress's records join only when made on these records' prompts, as in a run.
    let beside = companion::path(dir, &model, &task);
    let mut left_out = None;
    match companion::load::<Record>(&beside, &file.settings)? {
        companion::Companion::Absent => {}
        companion::Companion::Usable(theirs) => records.extend(theirs.records),
        companion::Companion::LeftOut(why) => left_out = Some(why),
    }
    let results = dir.join(format!("{model}.results.json"));
    let table = match task.as_str() {
        "niah" => {
            let (cells, points) = aggregate_niah("niah", &records);
            merge_results(&results, &model, "niah", cells, points)?;
            crate::table::markdown("niah", &records)
        }
        "ruler" => {
            let tasks: Vec<Task> = Task::ALL
                .into_iter()
                .filter(|t| records.iter().any(|r| r.task == t.name()))
                .collect();
            let points = report::quality(&records, &tasks);
            merge_results(&results, &model, report::RESULTS_TASK, Vec::new(), points)?;
            report::markdown(&records, &tasks)
        }
        other => {
            return Err(Error::Request(format!(
                "{}: `{other}` records are not rendered here; niah and ruler are",
                path.display()
            )))
        }
    };
    let md = match setup_line(&file) {
        Some(line) => format!("{table}\n{line}\n"),
        None => table,
    };
    let md = marks::Marks::of(plan, &file.settings).apply(&md);
    let out = dir.join(format!("{model}.{task}.md"));
    write_atomic(&out, &md)?;
    Ok(Rendered {
        table: out,
        results,
        records: records.len(),
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_the_model_and_the_task() {
        let p = Path::new("results/v2/SmolLM2-135M-Instruct.niah.records.json");
        assert_eq!(
            name_parts(p).expect("kvplan's"),
            ("SmolLM2-135M-Instruct".into(), "niah".into())
        );
        for bad in [
            "x/m.niah.kvpress.records.json",
            "x/m.results.json",
            "x/niah.records.json",
        ] {
            let err = name_parts(Path::new(bad)).expect_err(bad).to_string();
            assert!(err.contains("<model>.<task>.records.json"), "{err}");
        }
    }

    #[test]
    fn a_table_and_results_come_from_the_records_alone() {
        let dir = std::env::temp_dir().join(format!("kvplan-render-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("m.niah.records.json");
        let mut file = RecordsFile::<Record>::new(
            [("window", "question-end"), ("mode", "question-aware")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        for (e, score) in [1.0, 0.0, 1.0].into_iter().enumerate() {
            file.insert(Record {
                example: e,
                needle: format!("needle {e}"),
                ..crate::records::test_record("niah", "full", None, 512, score, 1.0)
            });
        }
        file.save(&path).expect("records");
        let r = render(&path, None).expect("rendered");
        assert_eq!(r.records, 3);
        let md = std::fs::read_to_string(&r.table).expect("table");
        assert!(md.starts_with("| method @ budget | KV % |"), "{md}");
        assert!(md.contains("| full | 100.0 | 66.7 ["), "{md}");
        assert!(
            md.ends_with("\nWindow: question-end; mode: question-aware.\n"),
            "{md}"
        );
        let results = crate::results::EvalResults::load(&r.results).expect("results");
        assert_eq!(results.quality.len(), 1);
        assert_eq!(r.left_out, None);
        // kvpress's records beside them join when made on the same prompts (the same
        // settings), and are left out, with the setting that differs, when not.
        let beside = companion::path(&dir, "m", "niah");
        let mut theirs = RecordsFile::<Record>::new(file.settings.clone());
        theirs.insert(Record {
            needle: "needle 0".into(),
            ..crate::records::test_record("niah", "kvpress-snapkv", None, 512, 1.0, 1.0)
        });
        theirs.save(&beside).expect("kvpress records");
        let r = render(&path, None).expect("rendered");
        assert_eq!((r.records, r.left_out.as_deref()), (4, None));
        theirs
            .settings
            .insert("mode".into(), "question-agnostic".into());
        theirs.save(&beside).expect("kvpress records");
        let r = render(&path, None).expect("rendered");
        assert_eq!(r.records, 3);
        let why = r.left_out.expect("left out");
        assert!(
            why.contains("mode: question-agnostic here, question-aware in this run"),
            "{why}"
        );
        // A records file holding none is refused: the table and the results file stay.
        let (table, results) = (
            std::fs::read(&r.table).expect("table"),
            std::fs::read(&r.results).expect("results"),
        );
        let empty = dir.join("m.niah.records.json");
        RecordsFile::<Record>::new(file.settings.clone())
            .save(&empty)
            .expect("empty records");
        let err = render(&empty, None).expect_err("no records").to_string();
        assert!(
            err.contains("m.niah.records.json") && err.contains("holds no records"),
            "{err}"
        );
        assert_eq!(std::fs::read(&r.table).expect("table"), table);
        assert_eq!(std::fs::read(&r.results).expect("results"), results);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
