//! Records another tool made on the same prompts, shown beside kvplan's: kvpress's presses run by
//! `tools/kvpress_side_by_side.py` on the token ids `kvplan eval … --export-prompts` wrote, saved
//! in kvplan's records schema as `<model>.<task>.kvpress.records.json` next to the run's own
//! records.
//!
//! A companion file is used only when it was made on the run's prompts: every setting of the run
//! that shapes the prompts (model and its hash, seed, prompt form, answer length, …) must be in
//! its settings with the same value; the settings that only say how kvplan ran its own presses
//! ([`KVPLAN_ONLY`]) are not compared. A file made on other prompts is left out with a note, so a
//! stale file never blocks a run; a file that does not parse is an error, before any cell runs.
//! Of a usable file, the records of the run's prompts at the run's budgets join the table and the
//! results.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::records::{CellRecord, RecordsFile};
use crate::task::Unit;
use crate::{io_err, Error, Result};

/// The tool whose records sit beside kvplan's.
pub const COMPANION: &str = "kvpress";

/// Settings that say how kvplan ran its own presses, not which prompts it ran them on: the
/// backend, plan and weights, and the press options of [`crate::runner::Evaluator::settings`].
pub const KVPLAN_ONLY: [&str; 11] = [
    "backend",
    "plan_sha256",
    "weights_sha256",
    "gqa",
    "spindle_gqa",
    "spindle_denominator",
    "spindle_bytes",
    "per_head_bytes",
    "positions",
    "pod_trained_sinks",
    "pod_trained_recent",
];

/// `<out>/<model>.<task>.kvpress.records.json`.
pub fn path(out: &Path, model: &str, task: &str) -> PathBuf {
    out.join(format!("{model}.{task}.{COMPANION}.records.json"))
}

/// What became of a companion file.
#[derive(Debug)]
pub enum Companion<R> {
    /// No file.
    Absent,
    /// Made on other prompts: left out, and why.
    LeftOut(String),
    /// Made on the run's prompts.
    Usable(RecordsFile<R>),
}

/// Reads the companion file at `path` and checks it against the run's `settings`.
pub fn load<R: CellRecord>(
    path: &Path,
    settings: &BTreeMap<String, String>,
) -> Result<Companion<R>> {
    if !path.exists() {
        return Ok(Companion::Absent);
    }
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    let file: RecordsFile<R> = serde_json::from_str(&text).map_err(|e| Error::Invalid {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let differ: Vec<String> = settings
        .iter()
        .filter(|(k, _)| !KVPLAN_ONLY.contains(&k.as_str()))
        .filter(|(k, v)| file.settings.get(*k) != Some(v))
        .map(|(k, v)| {
            let theirs = file.settings.get(k).map_or("(none)", String::as_str);
            format!("{k}: {theirs} here, {v} in this run")
        })
        .collect();
    if differ.is_empty() {
        Ok(Companion::Usable(file))
    } else {
        Ok(Companion::LeftOut(format!(
            "{}: not shown, made on other prompts ({})",
            path.display(),
            differ.join("; ")
        )))
    }
}

/// The records of `file` on the prompts of `units`, at the budgets the run has and without a
/// budget (FullKV, the reference of every Δ), any method, in file order. A run's table shows these
/// from its own records file too, so a run of a few methods is shown beside the methods an earlier
/// run recorded on the same prompts under the same settings.
pub fn of_units<'r, R: CellRecord>(file: &'r RecordsFile<R>, units: &[Unit]) -> Vec<&'r R> {
    let budgets: HashSet<Option<usize>> = units
        .iter()
        .flat_map(|u| u.cells.iter().map(|c| c.budget))
        .chain([None])
        .collect();
    on_prompts(file, units)
        .into_iter()
        .filter(|r| budgets.contains(&r.key().budget()))
        .collect()
}

/// The records of `file` on the prompts of `units` at any budget, in file order. A run's own
/// table shows these: every cell its records file holds on the run's prompts, so a later run at
/// fewer budgets (a β sweep at 128 into a folder holding 128 and 512) does not rewrite the table
/// without the others, and the table's Holm family stays the file's.
pub fn on_prompts<'r, R: CellRecord>(file: &'r RecordsFile<R>, units: &[Unit]) -> Vec<&'r R> {
    let prompts: HashSet<&str> = units
        .iter()
        .flat_map(|u| u.cells.iter().map(|c| c.key.prompt()))
        .collect();
    file.records
        .iter()
        .filter(|r| prompts.contains(r.key().prompt()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{CellKey, Record};
    use crate::task::variants;
    use kvplan_planner::{Method, MethodName};

    /// Two kvpress records on example 0 (one at a budget the run does not have) and one on
    /// example 1, which the run does not have: hand-written, as the script writes them.
    const FILE: &str = r#"{
      "settings": {"model": "m", "model_sha256": "aa", "seed": "0", "prompt": "p/v1",
                   "backend": "ndarray", "plan_sha256": "other", "runner": "kvpress 0.5.5"},
      "records": [
        {"task": "niah", "model": "M", "context_len": 1024, "depth": 0.5, "example": 0,
         "method": "kvpress-snapkv", "budget": 64, "needle": "q", "expected": ["1234567"],
         "response": " 1234567.", "score": 1.0, "kv_fraction": 0.0625, "seconds": 1.5},
        {"task": "niah", "model": "M", "context_len": 1024, "depth": 0.5, "example": 0,
         "method": "kvpress-snapkv", "budget": 32, "needle": "q", "expected": ["1234567"],
         "response": " 1.", "score": 0.0, "kv_fraction": 0.03125, "seconds": 1.5},
        {"task": "niah", "model": "M", "context_len": 1024, "depth": 0.5, "example": 1,
         "method": "kvpress-snapkv", "budget": 64, "needle": "q", "expected": ["7654321"],
         "response": " 7654321.", "score": 1.0, "kv_fraction": 0.0625, "seconds": 1.5}
      ]
    }"#;

    fn run_settings(seed: &str) -> BTreeMap<String, String> {
        [
            ("model", "m"),
            ("model_sha256", "aa"),
            ("seed", seed),
            ("prompt", "p/v1"),
            ("backend", "flex"),
            ("plan_sha256", "bb"),
            ("gqa", "pool-then-mean"),
            ("spindle_bytes", "equal"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn written(name: &str, text: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kvplan-companion-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let p = path(&dir, "m", "niah");
        std::fs::write(&p, text).expect("write");
        p
    }

    /// The run: example 0 at 1024 tokens, depth 0.5, `full` and `snapkv @ 64`.
    fn units() -> Vec<Unit> {
        let v = variants(&[MethodName::FULL, Method::SnapKv.into()], &[64]);
        vec![Unit::new("here".into(), &v, |m, b| {
            CellKey::new("niah", 1024, 0.5, 0, m, b)
        })]
    }

    #[test]
    fn records_on_the_run_prompts_join_its_table() {
        let p = written("usable", FILE);
        assert!(p.ends_with("m.niah.kvpress.records.json"));
        let Ok(Companion::Usable(file)) = load::<Record>(&p, &run_settings("0")) else {
            panic!("backend, plan and press options differ, the prompts do not: usable");
        };
        let shown = of_units(&file, &units());
        assert_eq!(shown.len(), 1, "example 1 and budget 32 are not in the run");
        assert_eq!((shown[0].example, shown[0].budget), (0, Some(64)));
        // A run's own file: every budget on the run's prompts, still not example 1.
        let all: Vec<(usize, Option<usize>)> = on_prompts(&file, &units())
            .iter()
            .map(|r| (r.example, r.budget))
            .collect();
        assert_eq!(all, [(0, Some(64)), (0, Some(32))]);
        let own = crate::records::test_record("niah", "snapkv", Some(64), 1024, 0.0, 0.0625);
        let mut rows: Vec<Record> = vec![own];
        rows.extend(shown.into_iter().cloned());
        let md = crate::table::markdown("niah", &rows);
        assert!(md.contains("| snapkv @ 64 |"), "{md}");
        assert!(md.contains("| kvpress-snapkv @ 64 |"), "{md}");
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }

    #[test]
    fn records_on_other_prompts_are_left_out_with_the_setting_named() {
        let p = written("other", FILE);
        match load::<Record>(&p, &run_settings("1")) {
            Ok(Companion::LeftOut(why)) => {
                assert!(why.contains("seed: 0 here, 1 in this run"), "{why}");
                assert!(!why.contains("backend"), "{why}");
            }
            other => panic!("expected left out, found {other:?}"),
        }
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }

    #[test]
    fn absent_file_is_absent_and_a_bad_one_an_error_naming_it() {
        let dir = std::env::temp_dir().join("kvplan-companion-none");
        let none = load::<Record>(&path(&dir, "x", "niah"), &run_settings("0"));
        assert!(matches!(none, Ok(Companion::Absent)));
        let p = written(
            "bad",
            &FILE.replace("\"seconds\": 1.5}", "\"seconds\": 1.5, \"note\": 1}"),
        );
        let err = load::<Record>(&p, &run_settings("0")).expect_err("unknown field");
        let msg = err.to_string();
        assert!(
            msg.contains("kvpress.records.json") && msg.contains("note"),
            "{msg}"
        );
        let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
    }
}
