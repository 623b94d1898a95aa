//! Per-cell records, written atomically; a run resumes from its records.
//!
//! A records file (`results/<model>.<task>.records.json`) holds the run's settings and one
//! record per scored cell: a [`Record`] per (example, context length, depth, method, budget) for
//! the prompt tasks (NIAH and RULER share it), a [`crate::tasks::ppl::PplRecord`] per streamed
//! (text, length, method, budget). It is rewritten (temporary file, then rename) after every
//! cell, so an interrupted run loses at most the cell in flight and a re-run skips every cell
//! already scored. Records made under other
//! settings (model, plan, seed, prompt form) are refused rather than mixed, and one run at a time
//! writes a records file ([`lock`]).
//!
//! This module only stores records; what they add up to is [`crate::aggregate`]'s.

use std::collections::BTreeMap;
use std::path::Path;

use kvplan_common::lock::Lock;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::results::label;
use crate::{io_err, write_atomic, Error, Result};

/// One scored cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// Task (`niah`, or a RULER task: `vt`, `qa_1`, …).
    pub task: String,
    /// Model name.
    pub model: String,
    /// Prompt length in tokens.
    pub context_len: usize,
    /// Requested needle depth in [0, 1].
    pub depth: f64,
    /// Example index (its seed offset).
    pub example: usize,
    /// Method (registry name).
    pub method: String,
    /// `--budget` target; `None` for `full`.
    pub budget: Option<usize>,
    /// The needle sentence (NIAH); what is asked (RULER: the key, the value tracked, the
    /// question).
    pub needle: String,
    /// The expected answers (references).
    pub expected: Vec<String>,
    /// The model's response (new text, stop token removed).
    pub response: String,
    /// Score in [0, 1].
    pub score: f64,
    /// KV bytes held after the prompt over FullKV's, in (0, 1].
    pub kv_fraction: f64,
    /// The largest share of FullKV's bytes held at any point of the generation: after the
    /// prompt and after every decode step, each over FullKV's bytes at that point; absent in
    /// records made before it was measured ([`Record::kv_held`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_peak: Option<f64>,
    /// The mean of the same shares over the generation (after the prompt and each step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_mean: Option<f64>,
    /// What the prompt shares with others (its needle's key, its article): the unit the
    /// intervals resample ([`crate::stats::cluster`]); absent in records made before it was
    /// recorded ([`Record::cluster`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Seconds of prefill (shared prefills: its share is not counted) and decode (a decode step
    /// taken with other cells: its even share of it).
    pub seconds: f64,
    /// SpindleKV at equal bytes (and HeadKV / HeadKV-R under `--per-head-bytes equal`): the
    /// budget it ran at and the bytes matched ([`crate::equal_bytes`]); absent for every other
    /// cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retarget: Option<crate::equal_bytes::Retarget>,
    /// A cell asked for a compression ratio of the context (`--ratios`, [`crate::ratio`]): the
    /// target, the effective ratio measured, the budget found; `budget` is then `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<crate::ratio::RatioCell>,
    /// The question as the task writes it, without the chat frame (RULER: from kvpress's
    /// question pattern on), for kvpress's `predictions.csv` ([`crate::leaderboard`]); absent in
    /// records made before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The answer prefix the response follows, for the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_prefix: Option<String>,
}

impl Record {
    /// The bytes the cell is compared at: its peak share of FullKV's over the generation, or,
    /// for records made before the peak was measured, the share after the prompt.
    pub fn kv_held(&self) -> f64 {
        self.kv_peak.unwrap_or(self.kv_fraction)
    }

    /// The record's cluster: the recorded one; else, for NIAH, the needle sentence, which names
    /// the needle (protocol v1 asked 5 needles at every length and depth: 5 clusters of 10);
    /// else the prompt alone. RULER's v1 `qa_1` questions all came from one SQuAD article
    /// ("Normans", asked in file order), but one cluster per task leaves the stratified
    /// bootstrap nothing to resample (a zero-width interval), so there each question stands
    /// alone and those intervals stay too narrow: rerun under `ruler-chat/v2`, which records
    /// articles.
    pub fn cluster(&self) -> String {
        match (&self.cluster, self.task.as_str()) {
            (Some(c), _) => c.clone(),
            (None, "niah") => self.needle.clone(),
            (None, _) => format!(
                "{}/{}/{:.4}/{}",
                self.task, self.context_len, self.depth, self.example
            ),
        }
    }
}

/// What a records file holds per cell.
pub trait CellRecord: Serialize + DeserializeOwned + Clone {
    /// Records written on one line rather than pretty-printed: per-token arrays would otherwise
    /// take a line per number.
    const COMPACT: bool = false;

    /// The cell's identity: what a re-run must not score again.
    fn key(&self) -> CellKey;

    /// The progress line of this cell, scored on the prompt described by `what`.
    fn progress_line(&self, what: &str) -> String;
}

impl Record {
    /// The target compression ratio of a ratio cell.
    pub fn target_ratio(&self) -> Option<f64> {
        self.ratio.as_ref().map(|r| r.target)
    }

    /// `method @ budget`, `method @ 50%` or `method`.
    pub fn label(&self) -> String {
        match &self.ratio {
            Some(r) => crate::ratio::label(&self.method, r.target),
            None => label(&self.method, self.budget),
        }
    }
}

impl CellRecord for Record {
    fn key(&self) -> CellKey {
        let key = CellKey::new(
            &self.task,
            self.context_len,
            self.depth,
            self.example,
            &self.method,
            self.budget,
        );
        match &self.ratio {
            Some(r) => key.at_ratio(r.target),
            None => key,
        }
    }

    fn progress_line(&self, what: &str) -> String {
        format!("{} {what}: {:.0}", self.label(), 100.0 * self.score)
    }
}

/// Identity of a cell: the prompt (or streamed text) it is scored on, the method and the budget
/// or target compression ratio.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CellKey {
    prompt: String,
    method: String,
    budget: Option<usize>,
    /// Target ratio in ten-thousandths ([`crate::ratio::key`]).
    ratio: Option<u32>,
}

impl CellKey {
    /// The key of (task, length, depth, example, method, budget).
    pub fn new(
        task: &str,
        context_len: usize,
        depth: f64,
        example: usize,
        method: &str,
        budget: Option<usize>,
    ) -> Self {
        Self {
            prompt: format!("{task}/{context_len}/{depth:.4}/{example}"),
            method: method.to_string(),
            budget,
            ratio: None,
        }
    }

    /// This key at target compression ratio `r` (a ratio cell has no budget).
    pub fn at_ratio(self, r: f64) -> Self {
        Self {
            budget: None,
            ratio: Some(crate::ratio::key(r)),
            ..self
        }
    }

    /// The key of a stream of `text`'s first `tokens` tokens under (method, budget).
    pub fn stream(text: &str, tokens: usize, method: &str, budget: Option<usize>) -> Self {
        Self {
            prompt: format!("stream/{text}/{tokens}"),
            method: method.to_string(),
            budget,
            ratio: None,
        }
    }

    /// The prompt (or streamed text) of the cell, whatever the method and budget.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The cell's budget; `None` for `full` and ratio cells.
    pub fn budget(&self) -> Option<usize> {
        self.budget
    }

    /// The cell's target ratio in ten-thousandths, for a ratio cell.
    pub fn ratio(&self) -> Option<u32> {
        self.ratio
    }
}

/// A records file: settings and records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsFile<R = Record> {
    /// What the records were made under (model, plan hash, seed, prompt form …); a run with
    /// other settings does not reuse them.
    pub settings: BTreeMap<String, String>,
    /// Every scored cell.
    pub records: Vec<R>,
}

impl<R: CellRecord> RecordsFile<R> {
    /// Empty records under `settings`.
    pub fn new(settings: BTreeMap<String, String>) -> Self {
        Self {
            settings,
            records: Vec::new(),
        }
    }

    /// The records at `path` when it exists (their settings must equal `settings`), else empty.
    pub fn open(path: &Path, settings: BTreeMap<String, String>) -> Result<Self> {
        if !path.exists() {
            return Ok(Self::new(settings));
        }
        let text = std::fs::read_to_string(path).map_err(io_err(path))?;
        Self::from_json(&text, &path.display().to_string(), settings)
    }

    /// The records in `text` (the file `path`, for messages); their settings must equal
    /// `settings`.
    pub fn from_json(text: &str, path: &str, settings: BTreeMap<String, String>) -> Result<Self> {
        let file: RecordsFile<R> = serde_json::from_str(text).map_err(|e| Error::Invalid {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        if file.settings != settings {
            let diff: Vec<String> = settings
                .iter()
                .filter(|(k, v)| file.settings.get(*k) != Some(v))
                .map(|(k, v)| {
                    let old = file.settings.get(k).map_or("(none)", String::as_str);
                    format!("{k}: {old} → {v}")
                })
                .collect();
            return Err(Error::Invalid {
                path: path.to_string(),
                message: format!(
                    "records made under other settings ({}); move the file away or give --out",
                    diff.join("; ")
                ),
            });
        }
        Ok(file)
    }

    /// The record of `key`, when scored.
    pub fn get(&self, key: &CellKey) -> Option<&R> {
        self.records.iter().find(|r| &r.key() == key)
    }

    /// Adds `record`, replacing one with the same key.
    pub fn insert(&mut self, record: R) {
        let key = record.key();
        self.records.retain(|r| r.key() != key);
        self.records.push(record);
    }

    /// Writes the records atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = if R::COMPACT {
            serde_json::to_string(self)
        } else {
            serde_json::to_string_pretty(self)
        };
        let text = text.map_err(|e| Error::Invalid {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        write_atomic(path, &text)
    }
}

/// The lock on the records file at `path` for a whole run: a second run into the same file
/// would rewrite it from its own copy and drop the first one's cells. A holder is refused, not
/// waited for; `log` is told about a stale lock taken over.
pub fn lock(path: &Path, log: &mut dyn FnMut(&str)) -> Result<Lock> {
    Ok(Lock::acquire(path, log)?)
}

/// A record of `task` at depth 0.5, example 0, for tests.
#[cfg(test)]
pub(crate) fn test_record(
    task: &str,
    method: &str,
    budget: Option<usize>,
    context_len: usize,
    score: f64,
    kv_fraction: f64,
) -> Record {
    Record {
        task: task.into(),
        model: "m".into(),
        context_len,
        depth: 0.5,
        example: 0,
        method: method.into(),
        budget,
        needle: "n".into(),
        expected: vec!["1234567".into()],
        response: "r".into(),
        score,
        kv_fraction,
        kv_peak: None,
        kv_mean: None,
        cluster: None,
        seconds: 0.1,
        retarget: None,
        ratio: None,
        question: None,
        answer_prefix: None,
    }
}

/// A NIAH record of example `ex` (its needle `needle {ex}`), a quarter of FullKV's bytes at a
/// budget and all of them without, for tests.
#[cfg(test)]
pub(crate) fn test_niah_record(
    method: &str,
    budget: Option<usize>,
    len: usize,
    ex: usize,
    score: f64,
) -> Record {
    let kv = if budget.is_some() { 0.25 } else { 1.0 };
    Record {
        example: ex,
        needle: format!("needle {ex}"),
        ..test_record("niah", method, budget, len, score, kv)
    }
}

#[cfg(test)]
mod tests {
    use super::test_niah_record as rec;
    use super::*;

    fn settings(seed: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("seed".to_string(), seed.to_string())])
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("kvplan-eval-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn records_round_trip_and_resume_by_key() {
        let dir = temp_dir("resume");
        let path = dir.join("m.niah.records.json");
        let mut f = RecordsFile::<Record>::open(&path, settings("0")).expect("new");
        f.insert(rec("full", None, 512, 0, 1.0));
        f.insert(rec("snapkv", Some(64), 512, 0, 0.0));
        f.insert(rec("snapkv", Some(64), 512, 0, 1.0)); // replaces
        f.save(&path).expect("save");
        let back = RecordsFile::<Record>::open(&path, settings("0")).expect("reopen");
        assert_eq!(back.records.len(), 2);
        let key = CellKey::new("niah", 512, 0.5, 0, "snapkv", Some(64));
        assert_eq!(back.get(&key).map(|r| r.score), Some(1.0));
        assert!(back
            .get(&CellKey::new("niah", 512, 0.5, 1, "snapkv", Some(64)))
            .is_none());
        // Other settings: refused, naming what changed.
        let err = RecordsFile::<Record>::open(&path, settings("1")).expect_err("other seed");
        assert!(err.to_string().contains("seed: 0 → 1"), "{err}");
        let names: Vec<_> = std::fs::read_dir(&dir).expect("dir").flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn older_records_read_with_their_clusters_and_bytes_recovered() {
        // A record of protocol v1: no cluster, no peak.
        let old = r#"{"task": "niah", "model": "m", "context_len": 1024, "depth": 0.5,
            "example": 3, "method": "snapkv", "budget": 128,
            "needle": "One of the special magic numbers for calm-quarry is: 1234567.",
            "expected": ["1234567"], "response": "1234567", "score": 1.0,
            "kv_fraction": 0.125, "seconds": 1.5}"#;
        let r: Record = serde_json::from_str(old).expect("v1 record");
        assert_eq!((r.kv_peak, r.kv_held()), (None, 0.125));
        assert_eq!(r.cluster(), r.needle, "NIAH: its needle");
        let ruler = Record {
            task: "cwe".into(),
            needle: String::new(),
            ..r.clone()
        };
        assert_eq!(
            ruler.cluster(),
            "cwe/1024/0.5000/3",
            "RULER: the prompt alone"
        );
        let new = Record {
            cluster: Some("squad:Normans".into()),
            kv_peak: Some(0.14),
            ..ruler
        };
        assert_eq!(
            (new.cluster(), new.kv_held()),
            ("squad:Normans".into(), 0.14)
        );
        let text = serde_json::to_string(&new).expect("json");
        assert!(text.contains("\"kv_peak\":0.14") && text.contains("\"cluster\""));
        assert!(!serde_json::to_string(&r).expect("json").contains("kv_peak"));
    }
}
