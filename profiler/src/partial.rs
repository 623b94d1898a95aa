//! Resumable partial results: every finished trial and sample is written (atomically) to a JSON
//! file next to the profile; a rerun with the same settings, model and seed reuses them and runs
//! only what is missing. Results are stored exactly (floats round-trip), so a resumed profile
//! is byte-identical to an uninterrupted one.

use std::path::Path;

use kvplan_planner::{io, Trial};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Version of this file's layout; a different one is ignored.
const PARTIAL_VERSION: u32 = 1;

/// One needle trial's outcome.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TrialOutcome {
    /// Index in the run order.
    pub index: usize,
    /// What the profile records about it.
    pub trial: Trial,
    /// This trial's head scores `[layer][q_head]`.
    pub scores: Vec<Vec<f64>>,
}

/// One text sample's figures (each already averaged within the sample).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SampleOutcome {
    /// Index in the run order.
    pub index: usize,
    /// `[q_head][layer][layer]`: 1 − JS averaged over the sample's observed rows.
    pub similarity: Vec<Vec<Vec<f64>>>,
    /// `[layer][level]`: mean Rec(D_l) magnitude over heads and the middle positions.
    pub wavelet: Vec<Vec<f64>>,
    /// `[level][position]`: mean over layers and heads, middle positions only.
    pub wavelet_by_position: Vec<Vec<f64>>,
    /// Generation step of the wavelet signal.
    pub wavelet_step: usize,
    /// Oldest positions dropped to reach a multiple of 2^levels.
    pub wavelet_dropped: usize,
    /// Positions left out at each end.
    pub wavelet_edge: usize,
    /// `[layer]`: (entropy bits, top-k mass).
    pub funnel: Vec<(f64, f64)>,
    /// `[layer]`: (key cosine fraction, value cosine fraction, attention sparsity).
    pub redundancy: Vec<(f64, f64, f64)>,
}

/// Everything finished so far.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Partial {
    version: u32,
    /// Settings, model hash and seed the results belong to.
    pub fingerprint: String,
    /// Retrieval trials done.
    pub retrieval: Vec<TrialOutcome>,
    /// Retrieval-reasoning trials done.
    pub reasoning: Vec<TrialOutcome>,
    /// Text samples done.
    pub samples: Vec<SampleOutcome>,
}

impl Partial {
    /// An empty record for `fingerprint`.
    pub fn new(fingerprint: String) -> Self {
        Partial {
            version: PARTIAL_VERSION,
            fingerprint,
            ..Partial::default()
        }
    }

    /// The record at `path` if it exists and belongs to `fingerprint`, else an empty one; the
    /// second value says why an existing file was not reused.
    pub fn load_or_new(path: &Path, fingerprint: &str) -> (Self, Option<String>) {
        let fresh = || Partial::new(fingerprint.to_string());
        let Ok(text) = std::fs::read_to_string(path) else {
            return (fresh(), None);
        };
        match serde_json::from_str::<Partial>(&text) {
            Ok(p) if p.version == PARTIAL_VERSION && p.fingerprint == fingerprint => (p, None),
            Ok(_) => (
                fresh(),
                Some(format!(
                    "{} belongs to other settings, model or seed: starting afresh",
                    path.display()
                )),
            ),
            Err(e) => (
                fresh(),
                Some(format!(
                    "{} is unreadable ({e}): starting afresh",
                    path.display()
                )),
            ),
        }
    }

    /// The file shard `i` of `n` keeps beside `path` (`p.partial.json` →
    /// `p.shard-i-of-n.partial.json`).
    pub fn shard_path(path: &Path, i: usize, n: usize) -> std::path::PathBuf {
        let stem = partial_stem(path);
        path.with_file_name(format!("{stem}.shard-{i}-of-{n}.partial.json"))
    }

    /// The shard files beside `path` ([`Self::shard_path`]'s names), in name order.
    pub fn shard_files(path: &Path) -> Vec<std::path::PathBuf> {
        let prefix = format!("{}.shard-", partial_stem(path));
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        let mut out: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| {
                        let n = p.file_name().map(|s| s.to_string_lossy().into_owned());
                        n.is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".partial.json"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Adds the units of every shard file beside `path` that belongs to this record's
    /// fingerprint and that this record lacks (by index: a unit's outcome does not depend on
    /// the process that ran it); returns each file with what became of it.
    pub fn absorb_shards(&mut self, path: &Path) -> Vec<(std::path::PathBuf, String)> {
        let mut notes = Vec::new();
        for file in Self::shard_files(path) {
            let (other, why) = Partial::load_or_new(&file, &self.fingerprint);
            if let Some(why) = why {
                notes.push((file, format!("not merged: {why}")));
                continue;
            }
            let before = self.units();
            for (mine, theirs) in [
                (&mut self.retrieval, other.retrieval),
                (&mut self.reasoning, other.reasoning),
            ] {
                for o in theirs {
                    if !mine.iter().any(|m| m.index == o.index) {
                        mine.push(o);
                    }
                }
            }
            for o in other.samples {
                if !self.samples.iter().any(|m| m.index == o.index) {
                    self.samples.push(o);
                }
            }
            notes.push((file, format!("merged {} units", self.units() - before)));
        }
        notes
    }

    /// Trials and samples held.
    fn units(&self) -> usize {
        self.retrieval.len() + self.reasoning.len() + self.samples.len()
    }

    /// Writes the record atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(self)
            .map_err(|e| Error::Settings(format!("serialising partial results: {e}")))?;
        io::write_atomic(path, &text)?;
        Ok(())
    }
}

/// `path`'s file name without `.partial.json` (`p.profile.partial.json` → `p.profile`).
fn partial_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".partial.json")
        .unwrap_or(&name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloads_only_with_the_same_fingerprint() {
        let dir = std::env::temp_dir().join(format!("kvplan-partial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let path = dir.join("p.json");
        let mut p = Partial::new("a".into());
        p.retrieval.push(TrialOutcome {
            index: 3,
            trial: Trial {
                example: "x".into(),
                context_length: 10,
                depth_percent: 50.0,
                needle_start: 4,
                response: "r".into(),
                score: 0.1 + 0.2,
                kept: false,
            },
            scores: vec![vec![1.0 / 3.0]],
        });
        p.save(&path).unwrap();
        let (same, why) = Partial::load_or_new(&path, "a");
        assert_eq!(same, p);
        assert!(why.is_none());
        let (other, why) = Partial::load_or_new(&path, "b");
        assert!(other.retrieval.is_empty());
        assert!(why.is_some());
        std::fs::remove_dir_all(&dir).ok();
    }
}
