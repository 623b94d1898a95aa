//! How a prompt meets the presses: where the observation window ends (`--window`), whether the
//! question is seen while the context is compressed (`--mode`), a prompt's token ids in both
//! forms, what its records say about it ([`Asked`]), and the prompts file `--export-prompts`
//! writes for other tools.
//!
//! **Window** (PyramidKV §4.2 "instruction tokens", HeadKV §3.3 "the last α instruction
//! tokens"): `question-end` (default) observes the α rows that end with the user's question's
//! last token, before the chat template's tail (`<|im_end|>\n<|im_start|>assistant\n`) and the
//! answer prefix, which are kept and count in the budget; `prompt-end` observes the prompt's
//! last α rows (the tail and the prefix).
//!
//! **Mode** (kvpress's pipeline): `question-aware` (default) prefills and compresses the whole
//! prompt; `question-agnostic` prefills and compresses only the **context** — the chat template
//! rendered for a user message whose content is the context, cut where that content ends
//! (`<|im_start|>system…<|im_end|>\n<|im_start|>user\n{context}`), its window the context's last
//! α tokens — then runs the **question** (`{question}<|im_end|>\n<|im_start|>assistant\n{answer
//! prefix}`) through the model, appended uncompressed and counted in the bytes.
//!
//! The two forms are encoded separately, so `context_ids ++ question_ids` can differ from `ids`
//! where a token would straddle the cut (it never does at a chat template's special tokens; in
//! NIAH the two are `ids` cut in two, exactly).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{Error, Result};

/// Where the observation window ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// At the last token of the user's question (our adaptation of the papers' window to chat
    /// prompts; the papers observe the input's last α tokens).
    #[default]
    QuestionEnd,
    /// At the prompt's last token (after the template's tail and the answer prefix).
    PromptEnd,
}

/// Whether the question is part of what is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// The whole prompt is prefilled and compressed.
    #[default]
    QuestionAware,
    /// Only the context is compressed; the question is appended uncompressed (kvpress).
    QuestionAgnostic,
}

impl Window {
    /// The name on the command line and in the records' settings.
    pub fn name(self) -> &'static str {
        match self {
            Window::QuestionEnd => "question-end",
            Window::PromptEnd => "prompt-end",
        }
    }

    /// The placement called `name`; anything else is an error naming both.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "question-end" => Ok(Window::QuestionEnd),
            "prompt-end" => Ok(Window::PromptEnd),
            other => Err(Error::Request(format!(
                "--window: expected question-end or prompt-end, found `{other}`"
            ))),
        }
    }
}

impl Mode {
    /// The name on the command line and in the records' settings.
    pub fn name(self) -> &'static str {
        match self {
            Mode::QuestionAware => "question-aware",
            Mode::QuestionAgnostic => "question-agnostic",
        }
    }

    /// The mode called `name`; anything else is an error naming both.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "question-aware" => Ok(Mode::QuestionAware),
            "question-agnostic" => Ok(Mode::QuestionAgnostic),
            other => Err(Error::Request(format!(
                "--mode: expected question-aware or question-agnostic, found `{other}`"
            ))),
        }
    }
}

/// The window placement and mode of a run: recorded in every records file's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Setup {
    /// Where the observation window ends (question-aware mode).
    pub window: Window,
    /// Whether the question is compressed with the context.
    pub mode: Mode,
}

impl Setup {
    /// The settings entries (`window`, `mode`).
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("window".to_string(), self.window.name().to_string()),
            ("mode".to_string(), self.mode.name().to_string()),
        ]
    }

    /// One line naming the setting, for tables.
    pub fn line(&self) -> String {
        setup_line(self.window.name(), self.mode.name())
    }
}

/// The line a table closes with for a run's `window` and `mode` (their settings' names): in
/// question-agnostic mode the window is the context's last α tokens whatever `window` says, so
/// the line says that instead.
pub fn setup_line(window: &str, mode: &str) -> String {
    if mode == Mode::QuestionAgnostic.name() {
        format!(
            "Window: the context's last α tokens (the question is appended after compression, \
             uncompressed); mode: {mode}."
        )
    } else {
        format!("Window: {window}; mode: {mode}.")
    }
}

/// A prompt's token ids in both forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptIds {
    /// The whole prompt (question-aware).
    pub ids: Vec<u32>,
    /// Exclusive index into `ids` where the user's question ends.
    pub window_end: usize,
    /// The context, cut where the user message's context ends (question-agnostic).
    pub context_ids: Vec<u32>,
    /// The question, the template's tail and the answer prefix (question-agnostic).
    pub question_ids: Vec<u32>,
}

/// A chat prompt's text in pieces: `pre + context + question + post + answer` is the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptText {
    /// The chat template before the user message's content.
    pub pre: String,
    /// The user message up to where the question starts.
    pub context: String,
    /// The question, to the end of the user message.
    pub question: String,
    /// The chat template after the user message (the generation prompt).
    pub post: String,
    /// The answer prefix.
    pub answer: String,
}

impl PromptText {
    /// The whole prompt.
    pub fn whole(&self) -> String {
        format!(
            "{}{}{}{}{}",
            self.pre, self.context, self.question, self.post, self.answer
        )
    }

    /// Both forms, encoded with `encode`. The question ends where the encoding of the prompt
    /// up to the question's end stops agreeing with the whole prompt's (a token merged across
    /// that boundary counts as after it).
    pub fn encode(&self, encode: impl Fn(&str) -> Result<Vec<u32>>) -> Result<PromptIds> {
        let ids = encode(&self.whole())?;
        let head = encode(&format!("{}{}{}", self.pre, self.context, self.question))?;
        Ok(PromptIds {
            window_end: common_prefix(&ids, &head),
            context_ids: encode(&format!("{}{}", self.pre, self.context))?,
            question_ids: encode(&format!("{}{}{}", self.question, self.post, self.answer))?,
            ids,
        })
    }
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// What every record of one prompt says about it.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Task (`niah`, or a RULER task: `vt`, `qa_1`, …).
    pub task: String,
    /// Length of the run in tokens.
    pub context_len: usize,
    /// Requested needle depth in [0, 1] (0 where there is none).
    pub depth: f64,
    /// Example index.
    pub example: usize,
    /// What is asked (the needle sentence, the key, the question).
    pub needle: String,
    /// The expected answers.
    pub expected: Vec<String>,
    /// What the prompt shares with others (its needle's key, its article), when known.
    pub cluster: Option<String>,
    /// The question and the answer prefix as the task writes them (RULER), when kept.
    pub question: Option<(String, String)>,
}

/// One prompt of a prompts file.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedPrompt {
    /// Task (`niah`, or a RULER task), as in the records' keys.
    pub task: String,
    /// Length of the run, as in the records' keys.
    pub context_len: usize,
    /// Needle depth, as in the records' keys.
    pub depth: f64,
    /// Example index, as in the records' keys.
    pub example: usize,
    /// The whole prompt (question-aware).
    pub ids: Vec<u32>,
    /// The question-agnostic context.
    pub context_ids: Vec<u32>,
    /// The question-agnostic question.
    pub question_ids: Vec<u32>,
    /// Exclusive index into `ids` where the user's question ends.
    pub window_end: usize,
    /// Tokens decoded at most.
    pub answer_tokens: usize,
    /// The references.
    pub expected: Vec<String>,
    /// `string_match_all` or `string_match_part`.
    pub metric: String,
    /// What the prompt shares with others (needle key, article), as in the records; the
    /// records kvpress makes of it copy it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// What is asked, as the records' `needle` says it (the records kvpress makes copy it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needle: Option<String>,
    /// The question as the task writes it (RULER), for the leaderboard's `predictions.csv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The answer prefix as the task writes it (RULER), for the leaderboard's
    /// `predictions.csv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_prefix: Option<String>,
}

impl ExportedPrompt {
    /// The prompt `ids` asked as `asked` says, decoded at most `answer_tokens`, scored by
    /// `metric`.
    pub fn new(asked: &Asked, ids: &PromptIds, answer_tokens: usize, metric: &str) -> Self {
        Self {
            task: asked.task.clone(),
            context_len: asked.context_len,
            depth: asked.depth,
            example: asked.example,
            ids: ids.ids.clone(),
            context_ids: ids.context_ids.clone(),
            question_ids: ids.question_ids.clone(),
            window_end: ids.window_end,
            answer_tokens,
            expected: asked.expected.clone(),
            metric: metric.to_string(),
            cluster: asked.cluster.clone(),
            needle: Some(asked.needle.clone()),
            question: asked.question.as_ref().map(|q| q.0.clone()),
            answer_prefix: asked.question.as_ref().map(|q| q.1.clone()),
        }
    }
}

/// The file `--export-prompts` writes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptsFile {
    /// `kvplan-prompts/v1`.
    pub format: String,
    /// Model name.
    pub model: String,
    /// SHA-256 of the model file.
    pub model_sha256: String,
    /// `niah` or `ruler`.
    pub task: String,
    /// The settings a records file of the same run holds.
    pub settings: BTreeMap<String, String>,
    /// Every prompt of the run, in run order.
    pub prompts: Vec<ExportedPrompt>,
}

/// The format name of [`PromptsFile`].
pub const PROMPTS_FORMAT: &str = "kvplan-prompts/v1";

/// The metrics a prompt may be scored by (RULER's).
const METRICS: [&str; 2] = ["string_match_all", "string_match_part"];

impl PromptsFile {
    /// Parses a prompts file with the checks its reader (`tools/kvpress_side_by_side.py`,
    /// `load_prompts`) makes, and the layout [`ExportedPrompt`] guarantees: the format name, a
    /// known metric, the question-agnostic parts no longer than the prompt, the question's end
    /// inside it. `path` names the file in errors.
    pub fn from_json(text: &str, path: &str) -> Result<Self> {
        let invalid = |message: String| Error::Invalid {
            path: path.to_string(),
            message,
        };
        let file: PromptsFile = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if file.format != PROMPTS_FORMAT {
            return Err(invalid(format!(
                "format: expected {PROMPTS_FORMAT:?}, found {:?}",
                file.format
            )));
        }
        for (i, p) in file.prompts.iter().enumerate() {
            let at =
                |what: &str, expected: String| invalid(format!("prompts[{i}].{what}: {expected}"));
            if !METRICS.contains(&p.metric.as_str()) {
                let found = &p.metric;
                return Err(at(
                    "metric",
                    format!("expected one of {METRICS:?}, found {found:?}"),
                ));
            }
            if p.window_end > p.ids.len() {
                let n = p.ids.len();
                return Err(at(
                    "window_end",
                    format!("expected at most {n}, found {}", p.window_end),
                ));
            }
            if p.ids.is_empty() || p.context_ids.len() > p.ids.len() {
                let (n, c) = (p.ids.len(), p.context_ids.len());
                return Err(at(
                    "ids",
                    format!("a prompt of at least the {c} context ids, found {n}"),
                ));
            }
            if !(0.0..=1.0).contains(&p.depth) {
                return Err(at(
                    "depth",
                    format!("a number in [0, 1], found {}", p.depth),
                ));
            }
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_agnostic_table_names_the_context_window_not_the_question_end() {
        assert_eq!(
            setup_line("question-end", "question-aware"),
            "Window: question-end; mode: question-aware."
        );
        let agnostic = setup_line("question-end", "question-agnostic");
        assert!(
            agnostic.starts_with("Window: the context's last α tokens"),
            "{agnostic}"
        );
        assert!(!agnostic.contains("question-end"), "{agnostic}");
    }

    /// One id per character, a "special" `|` merging with the character after it.
    fn chars(text: &str) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        let mut it = text.chars().peekable();
        while let Some(c) = it.next() {
            match (c, it.peek()) {
                ('|', Some(&n)) => {
                    it.next();
                    out.push(1000 + n as u32);
                }
                _ => out.push(c as u32),
            }
        }
        Ok(out)
    }

    fn text() -> PromptText {
        PromptText {
            pre: "<u>".into(),
            context: "ctx ".into(),
            question: "q?".into(),
            post: "</u><a>".into(),
            answer: "A".into(),
        }
    }

    #[test]
    fn the_question_ends_before_the_template_tail_and_the_forms_split_at_the_context() {
        // "<u>ctx q?</u><a>A": 17 characters, the question ends after "<u>ctx q?" = 9.
        let p = text().encode(chars).expect("encode");
        assert_eq!(p.ids.len(), 17);
        assert_eq!(p.window_end, 9);
        assert_eq!(p.context_ids.len(), 7);
        assert_eq!(p.question_ids.len(), 10);
        assert_eq!([p.context_ids, p.question_ids].concat(), p.ids);
    }

    #[test]
    fn a_token_across_the_question_end_counts_after_it() {
        // "q|" + "</u>": `|<` is one token, so the question ends before it (index 8).
        let mut t = text();
        t.question = "q|".into();
        let p = t.encode(chars).expect("encode");
        assert_eq!(p.window_end, 8);
        assert_eq!(p.ids.len(), 16);
    }

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for w in [Window::QuestionEnd, Window::PromptEnd] {
            assert_eq!(Window::parse(w.name()).expect("window"), w);
        }
        for m in [Mode::QuestionAware, Mode::QuestionAgnostic] {
            assert_eq!(Mode::parse(m.name()).expect("mode"), m);
        }
        let e = Window::parse("end").expect_err("unknown");
        assert!(e.to_string().contains("question-end") && e.to_string().contains("`end`"));
        assert!(Mode::parse("aware").is_err());
    }

    fn prompts_file(metric: &str, window_end: usize) -> String {
        format!(
            r#"{{"format":"kvplan-prompts/v1","model":"m","model_sha256":"00","task":"niah",
            "settings":{{"seed":"0"}},"prompts":[{{"task":"niah","context_len":4,"depth":0.5,
            "example":0,"ids":[1,2,3,4],"context_ids":[1,2],"question_ids":[3,4],
            "window_end":{window_end},"answer_tokens":8,"expected":["42"],"metric":"{metric}"}}]}}"#
        )
    }

    #[test]
    fn a_prompts_file_reads_back_and_bad_ones_are_named() {
        let ok = PromptsFile::from_json(&prompts_file("string_match_all", 4), "p.json");
        assert_eq!(ok.map(|f| f.prompts[0].ids.len()).ok(), Some(4));
        let err = PromptsFile::from_json(&prompts_file("exact", 4), "p.json").unwrap_err();
        assert!(err
            .to_string()
            .starts_with("p.json: prompts[0].metric: expected one of"));
        let err =
            PromptsFile::from_json(&prompts_file("string_match_all", 5), "p.json").unwrap_err();
        assert!(
            err.to_string()
                .contains("window_end: expected at most 4, found 5"),
            "{err}"
        );
        let other = prompts_file("string_match_all", 4).replace("prompts/v1", "prompts/v2");
        let err = PromptsFile::from_json(&other, "p.json").unwrap_err();
        assert!(err.to_string().contains("format: expected"), "{err}");
    }
}
