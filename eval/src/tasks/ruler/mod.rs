//! RULER's 13 tasks at a fixed length, ported from the generators of
//! `nvidia-long-context-eval==26.3` (RULER): `data/synthetic/niah.py`,
//! `data/synthetic/variable_tracking.py`, `data/synthetic/common_words_extraction.py`,
//! `data/synthetic/freq_words_extraction.py`, `data/synthetic/qa.py`, the task templates of
//! `data/synthetic/constants.py`, the task arguments of `synthetic.yaml` and the metrics of
//! `eval/synthetic/constants.py`.
//!
//! RULER's names: `niah_single_1`–`3`, `niah_multikey_1`–`3`, `niah_multivalue`,
//! `niah_multiquery` ([`niah`], haystacks and key kinds in [`haystack`]), `vt` ([`vt`]), `cwe`
//! ([`cwe`]), `fwe` ([`fwe`]), `qa_1` (SQuAD) and `qa_2` (HotpotQA) ([`qa`]). Each uses
//! RULER's template and answer prefix verbatim, its `tokens_to_generate`, and its metric
//! (`string_match_all`, `string_match_part` for QA).
//!
//! **Length.** RULER grows a task's size (haystack words or lines, noise sentences, list words,
//! documents) until `prompt tokens + tokens_to_generate` would pass the length. Here the size
//! is found by bisection, per example, with the model's own tokenizer counting the whole prompt
//! in its chat frame ([`Framer`]), so every prompt has at most `length − tokens_to_generate`
//! tokens and lands within one unit of size (a word, a line, a noise sentence, a document) of
//! it.
//!
//! **Prompt.** As for NIAH (`crate::tasks::niah`): the task text is the user message of the model's
//! chat template and the answer prefix, its leading space dropped, follows the generation
//! prompt — RULER's `template + answer_prefix` with a chat model template.
//!
//! Examples are seeded ([`Rng`]): the same seed, task and index give the same prompt for every
//! method and budget. Where RULER draws with Python's `random`, the draws here are the same
//! operations on our generator (not the same numbers). Differences from RULER are listed in each
//! task's module.
//!
//! A run's quality points and tables are [`report`]'s; the run over the model is `task`'s
//! (feature `model`).

pub mod cwe;
pub mod data;
pub mod fwe;
pub mod haystack;
pub mod niah;
pub mod qa;
pub mod report;
#[cfg(feature = "model")]
pub mod task;
pub mod vt;

pub use data::Sources;

use std::collections::{HashMap, HashSet};

use kvplan_planner::MethodName;

use crate::records::CellKey;
use crate::rng::Rng;
use crate::score::{postprocess, string_match_all, string_match_part};
use crate::task::variants;
use crate::{Error, Result};

/// A RULER task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// One needle in a repeated line (word key, number value).
    NiahSingle1,
    /// One needle (essay haystack, word key, number value).
    NiahSingle2,
    /// One needle (essay haystack, word key, UUID value).
    NiahSingle3,
    /// Four needles of different keys, one asked.
    NiahMultikey1,
    /// One needle among lines that are needles of other keys (word keys, number values).
    NiahMultikey2,
    /// One needle among needles of other keys (UUID keys and values).
    NiahMultikey3,
    /// Four values under one key, all asked.
    NiahMultivalue,
    /// Four needles, all four keys asked.
    NiahMultiquery,
    /// Variable tracking: one chain of four hops.
    Vt,
    /// Common words extraction: the ten most frequent words of a list.
    Cwe,
    /// Frequent words extraction: the three most frequent coded words of a Zipf text.
    Fwe,
    /// SQuAD questions among distractor paragraphs.
    Qa1,
    /// HotpotQA questions among distractor paragraphs.
    Qa2,
}

/// How a response is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// RULER's `string_match_all`: the share of the references found.
    All,
    /// RULER's `string_match_part`: 1 when any reference is found.
    Part,
}

impl Task {
    /// Every task, in report order (`synthetic.yaml`'s).
    pub const ALL: [Task; 13] = [
        Task::NiahSingle1,
        Task::NiahSingle2,
        Task::NiahSingle3,
        Task::NiahMultikey1,
        Task::NiahMultikey2,
        Task::NiahMultikey3,
        Task::NiahMultivalue,
        Task::NiahMultiquery,
        Task::Vt,
        Task::Cwe,
        Task::Fwe,
        Task::Qa1,
        Task::Qa2,
    ];

    /// RULER's name of the task (`synthetic.yaml`).
    pub fn name(self) -> &'static str {
        match self {
            Task::NiahSingle1 => "niah_single_1",
            Task::NiahSingle2 => "niah_single_2",
            Task::NiahSingle3 => "niah_single_3",
            Task::NiahMultikey1 => "niah_multikey_1",
            Task::NiahMultikey2 => "niah_multikey_2",
            Task::NiahMultikey3 => "niah_multikey_3",
            Task::NiahMultivalue => "niah_multivalue",
            Task::NiahMultiquery => "niah_multiquery",
            Task::Vt => "vt",
            Task::Cwe => "cwe",
            Task::Fwe => "fwe",
            Task::Qa1 => "qa_1",
            Task::Qa2 => "qa_2",
        }
    }

    /// The task called `name`; an unknown name is an error listing the known ones.
    pub fn from_name(name: &str) -> Result<Task> {
        Task::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = Task::ALL.iter().map(|t| t.name()).collect();
                Error::Request(format!(
                    "unknown RULER task `{name}`; RULER has: {}",
                    known.join(", ")
                ))
            })
    }

    /// RULER's `tokens_to_generate` (`data/synthetic/constants.py`): room kept for the answer.
    pub fn tokens_to_generate(self) -> usize {
        match self {
            Task::Vt => vt::TOKENS_TO_GENERATE,
            Task::Cwe => cwe::TOKENS_TO_GENERATE,
            Task::Fwe => fwe::TOKENS_TO_GENERATE,
            Task::Qa1 | Task::Qa2 => qa::TOKENS_TO_GENERATE,
            _ => niah::TOKENS_TO_GENERATE,
        }
    }

    /// A needle task (`niah_*`).
    pub fn is_niah(self) -> bool {
        self.name().starts_with("niah_")
    }

    /// RULER's metric of the task (`eval/synthetic/constants.py`).
    pub fn metric(self) -> Metric {
        match self {
            Task::Qa1 | Task::Qa2 => Metric::Part,
            _ => Metric::All,
        }
    }

    /// The task's random stream: the seven tasks of protocol `ruler-chat/v2` keep theirs (1–7,
    /// their order then), so their prompts do not change; the others follow.
    fn stream(self) -> u64 {
        match self {
            Task::NiahSingle2 => 1,
            Task::NiahMultikey1 => 2,
            Task::NiahMultivalue => 3,
            Task::Vt => 4,
            Task::Cwe => 5,
            Task::Qa1 => 6,
            Task::Qa2 => 7,
            Task::NiahSingle1 => 8,
            Task::NiahSingle3 => 9,
            Task::NiahMultikey2 => 10,
            Task::NiahMultikey3 => 11,
            Task::NiahMultiquery => 12,
            Task::Fwe => 13,
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A task's text before framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The task template filled in: the user message.
    pub user: String,
    /// The answer prefix filled in (RULER's, leading space kept).
    pub answer_prefix: String,
    /// The references the response is scored against.
    pub answers: Vec<String>,
    /// What is asked (the needle key, the value tracked, the question).
    pub query: String,
}

/// Puts a task's text into the model's prompt and counts tokens: the chat template and tokenizer
/// in a run, a stand-in in tests.
pub trait Framer {
    /// The whole prompt: `user` as the user message, then `answer_prefix` after the generation
    /// prompt.
    fn frame(&self, user: &str, answer_prefix: &str) -> String;
    /// Tokens in `text`.
    fn count(&self, text: &str) -> Result<usize>;
}

/// One generated example.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Its task.
    pub task: Task,
    /// Its index (seed offset; for QA the question is the one [`qa::question_of`] picks).
    pub index: usize,
    /// The framed prompt.
    pub prompt: String,
    /// Tokens of `prompt`.
    pub tokens: usize,
    /// The task's text.
    pub built: Built,
    /// The size chosen (haystack words, noise sentences, list words or documents).
    pub size: usize,
    /// What the example shares with others, when known (QA: its article).
    pub cluster: Option<String>,
}

/// Which example of a task: its length and where its random draws come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExampleAt {
    /// Tokens of the prompt and `tokens_to_generate` together.
    pub length: usize,
    /// The run's seed.
    pub seed: u64,
    /// Example index (with the seed and the task, its random stream).
    pub index: usize,
}

/// Example `at` of `task`, its text from `sources`, framed by `framer`.
pub fn generate(
    task: Task,
    sources: &Sources,
    framer: &dyn Framer,
    at: ExampleAt,
) -> Result<Example> {
    let fit = Fit::new(task, framer, at)?;
    let length = at.length;
    let mut cluster = None;
    let (built, prompt, tokens, size) = match task {
        Task::NiahSingle1
        | Task::NiahSingle2
        | Task::NiahSingle3
        | Task::NiahMultikey1
        | Task::NiahMultikey2
        | Task::NiahMultikey3
        | Task::NiahMultivalue
        | Task::NiahMultiquery => fit.niah(sources)?,
        Task::Fwe => {
            let vocab = fwe::vocab_size(length);
            let hi = length.max(fwe::MIN_WORDS);
            fit.run(fwe::MIN_WORDS, hi, |n| fwe::build(vocab, n, &mut fit.rng()))?
        }
        Task::Vt => {
            let icl = vt::icl(at.seed, framer)?;
            let lo = vt::MIN_NOISES;
            fit.run(lo, length.max(lo), |n| vt::build(&icl, n, &mut fit.rng()))?
        }
        Task::Cwe => fit.cwe(sources)?,
        Task::Qa1 | Task::Qa2 => {
            let (fitted, article) = fit.qa(sources)?;
            cluster = Some(article);
            fitted
        }
    };
    Ok(Example {
        task,
        index: at.index,
        prompt,
        tokens,
        built,
        size,
        cluster,
    })
}

/// Every example of a run, generated before the model runs.
#[derive(Debug, Clone, Default)]
pub struct Generated {
    /// The run's tasks that every example fits, in run order.
    pub tasks: Vec<Task>,
    /// The examples, by task and index.
    pub examples: HashMap<(Task, usize), Example>,
    /// One line per task left out, saying which example did not fit and by how much.
    pub left_out: Vec<String>,
}

/// Generates every example of `run` from `sources`, framed by `framer`. A task one of whose
/// examples cannot fit the length ([`Error::DoesNotFit`]) is left out, with a line in
/// [`Generated::left_out`], when `run.leave_out_unfit` (the default task list); otherwise that
/// example's error ends the run before the model runs. Other errors always end it. An error, too,
/// when no task is left.
pub fn generate_all(run: &RulerRun, sources: &Sources, framer: &dyn Framer) -> Result<Generated> {
    let mut out = Generated::default();
    'tasks: for &task in &run.tasks {
        let mut examples = Vec::with_capacity(run.examples);
        for index in 0..run.examples {
            let at = ExampleAt {
                length: run.length,
                seed: run.seed,
                index,
            };
            match generate(task, sources, framer, at) {
                Ok(example) => examples.push(example),
                Err(Error::DoesNotFit { why, .. }) if run.leave_out_unfit => {
                    out.left_out.push(format!(
                        "{task} left out (example {index} of {}: {why}); name it in --tasks to \
                         be refused instead",
                        run.examples,
                    ));
                    continue 'tasks;
                }
                Err(Error::DoesNotFit { task, why }) => {
                    return Err(Error::DoesNotFit {
                        task,
                        why: format!("{why} (example {index})"),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        out.tasks.push(task);
        out.examples
            .extend(examples.into_iter().map(|e| ((task, e.index), e)));
    }
    if out.tasks.is_empty() {
        return Err(Error::DoesNotFit {
            task: "every task".into(),
            why: format!(
                "none fits a {}-token length: {}",
                run.length,
                out.left_out.join("; ")
            ),
        });
    }
    Ok(out)
}

/// Finds the largest size whose framed prompt fits the budget.
struct Fit<'a> {
    task: Task,
    framer: &'a dyn Framer,
    length: usize,
    budget: usize,
    seed: u64,
    index: usize,
}

/// A prompt fitted to the budget: its text, the framed prompt, its tokens and the size chosen.
type Fitted = (Built, String, usize, usize);

impl<'a> Fit<'a> {
    /// The fit of example `at` of `task`: its prompt budget is the length less the tokens to
    /// generate (an error when nothing is left).
    fn new(task: Task, framer: &'a dyn Framer, at: ExampleAt) -> Result<Self> {
        let ExampleAt {
            length,
            seed,
            index,
        } = at;
        let budget = length
            .checked_sub(task.tokens_to_generate())
            .filter(|&b| b > 0)
            .ok_or_else(|| Error::DoesNotFit {
                task: task.to_string(),
                why: format!(
                    "a {length}-token length leaves no room beside the {} tokens to generate",
                    task.tokens_to_generate()
                ),
            })?;
        Ok(Self {
            task,
            framer,
            length,
            budget,
            seed,
            index,
        })
    }

    /// The example's random stream (the same for every size tried).
    fn rng(&self) -> Rng {
        Rng::derive(self.seed, &[self.task.stream(), self.index as u64])
    }

    /// A needle-in-a-haystack task: its asked keys, then the most haystack (essay words, or
    /// noise lines) that fits.
    fn niah(&self, sources: &Sources) -> Result<Fitted> {
        let (task, length) = (self.task, self.length);
        let config = niah::Config::of(task);
        let asked = niah::asked_keys(&config, self.seed, task.stream(), self.index)?;
        let asked = asked.as_deref();
        let (essay, lo, hi) = match config.haystack {
            haystack::Haystack::Essay => {
                let essay = sources.essay(task)?;
                (essay, 1, essay.len().min(length).max(1))
            }
            // A line is more than 4 tokens: `length / 4` lines always pass the length.
            _ => (
                &niah::NO_ESSAY,
                config.needles(),
                (length / 4).max(config.needles()),
            ),
        };
        self.run(lo, hi, |n| {
            niah::build(&config, essay, n, asked, &mut self.rng())
        })
    }

    /// Common words: the longest word list that fits (an error when the list is too short).
    fn cwe(&self, sources: &Sources) -> Result<Fitted> {
        let task = self.task;
        let words = sources.vocabulary(task)?;
        let (lo, hi) = (cwe::NUM_CW, words.len().min(self.length.max(cwe::NUM_CW)));
        if words.len() < cwe::NUM_CW + cwe::EXAMPLE_WORDS {
            return Err(Error::Request(format!(
                "{task}: the word list has {} words; it needs at least {}",
                words.len(),
                cwe::NUM_CW + cwe::EXAMPLE_WORDS
            )));
        }
        self.run(lo, hi, |n| {
            cwe::build(words, n, self.length, &mut self.rng())
        })
    }

    /// Question answering: the example's question, then the most distractor documents that fit;
    /// with the article the question comes from (what examples share).
    fn qa(&self, sources: &Sources) -> Result<(Fitted, String)> {
        let (task, index) = (self.task, self.index);
        let set = sources.qa(task)?;
        let q = qa::question_of(set, self.seed, index).ok_or_else(|| {
            Error::Request(format!(
                "{task}: no question for example {index}: its article has no more questions"
            ))
        })?;
        let qa = &set.qas[q];
        let lo = qa.context.len().max(1);
        let hi = set.docs.len().min(self.length).max(lo);
        let fitted = self.run(lo, hi, |n| qa::build(set, q, n, &mut self.rng()))?;
        Ok((fitted, qa.article.clone()))
    }

    /// The framed prompt of `built` and its tokens.
    fn frame(&self, built: &Built) -> Result<(String, usize)> {
        let prompt = self.framer.frame(&built.user, &built.answer_prefix);
        let tokens = self.framer.count(&prompt)?;
        Ok((prompt, tokens))
    }

    /// (text, prompt, tokens, size) of the largest size in `lo..=hi` whose prompt fits; an
    /// error when even `lo` does not.
    fn run(&self, lo: usize, hi: usize, build: impl Fn(usize) -> Built) -> Result<Fitted> {
        let size = largest(lo, hi, |s| Ok(self.frame(&build(s))?.1 <= self.budget))?;
        let Some(size) = size else {
            let (_, tokens) = self.frame(&build(lo))?;
            return Err(Error::DoesNotFit {
                task: self.task.to_string(),
                why: format!(
                    "the shortest prompt has {tokens} tokens, more than the {} a {}-token length \
                     leaves beside the {} to generate",
                    self.budget,
                    self.length,
                    self.task.tokens_to_generate()
                ),
            });
        };
        let built = build(size);
        let (prompt, tokens) = self.frame(&built)?;
        Ok((built, prompt, tokens, size))
    }
}

/// The largest size in `lo..=hi` that `fits` (by bisection: sizes that fit are taken to come
/// before those that do not); `None` when `lo` does not fit.
pub(crate) fn largest(
    lo: usize,
    hi: usize,
    mut fits: impl FnMut(usize) -> Result<bool>,
) -> Result<Option<usize>> {
    if !fits(lo)? {
        return Ok(None);
    }
    if hi <= lo || fits(hi)? {
        return Ok(Some(hi.max(lo)));
    }
    let (mut good, mut bad) = (lo, hi);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if fits(mid)? {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Ok(Some(good))
}

/// Where the question starts in a task's user message: the last match of the task's question
/// pattern, as kvpress's `benchmarks/ruler/create_huggingface_dataset.py` splits RULER prompts
/// into context and question (niah: "What is|are all the special magic"; vt: "Question: Find
/// all variables that are assigned the value"; cwe: "Question: What are the 10 most common
/// words in the above list?"; fwe: "Question: Do not provide any explanation."; qa: "Answer the
/// question based on the given documents."). `None`
/// when the pattern is absent.
pub fn question_start(task: Task, user: &str) -> Option<usize> {
    let patterns: &[&str] = match task {
        Task::Vt => &["Question: Find all variables that are assigned the value"],
        Task::Cwe => &["Question: What are the 10 most common words in the above list?"],
        Task::Fwe => &["Question: Do not provide any explanation."],
        Task::Qa1 | Task::Qa2 => &["Answer the question based on the given documents."],
        _ => &[
            "What is the special magic",
            "What are all the special magic",
        ],
    };
    patterns.iter().filter_map(|p| user.rfind(p)).max()
}

/// The score of `response` on `task` against `answers`, in [0, 1]: RULER's post-processing,
/// then its metric.
pub fn score(task: Task, response: &str, answers: &[String]) -> f64 {
    let refs: Vec<&str> = answers.iter().map(String::as_str).collect();
    let pred = postprocess(response);
    match task.metric() {
        Metric::All => string_match_all(&pred, &refs),
        Metric::Part => string_match_part(&pred, &refs),
    }
}

/// Fills `{name}` fields of `template` in one pass (Python's `str.format` with named fields):
/// text put in is never searched again, so a context holding `{query}` stays as it is.
pub(crate) fn fill(template: &str, fields: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let value = after.find('}').and_then(|close| {
            let name = &after[..close];
            fields
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v, close))
        });
        match value {
            Some((v, close)) => {
                out.push_str(v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a RULER run covers.
#[derive(Debug, Clone)]
pub struct RulerRun {
    /// Tasks, in report order.
    pub tasks: Vec<Task>,
    /// Length in tokens (prompt and tokens to generate).
    pub length: usize,
    /// Examples per task.
    pub examples: usize,
    /// Seed of the examples.
    pub seed: u64,
    /// Methods, parsed.
    pub methods: Vec<MethodName>,
    /// `--budget` targets; `full` runs once, without one.
    pub budgets: Vec<usize>,
    /// Target compression ratios of the context (`--ratios`, [`crate::ratio`]): every method
    /// but `full` at each.
    pub ratios: Vec<f64>,
    /// Decoding stops after this many tokens when fewer than the task's `tokens_to_generate`.
    pub answer_cap: Option<usize>,
    /// Leave out, with a note, a task one of whose examples cannot fit `length` (the default
    /// task list) instead of refusing the run (tasks named with `--tasks`).
    pub leave_out_unfit: bool,
}

impl RulerRun {
    /// Every (method, budget) cell of one example, `full` once.
    pub fn variants(&self) -> Vec<(MethodName, Option<usize>)> {
        variants(&self.methods, &self.budgets)
    }

    /// Every (method, target ratio) cell of one example: each method but `full` at each ratio.
    pub fn ratio_variants(&self) -> Vec<(MethodName, f64)> {
        let methods = self.methods.iter().filter(|m| !m.is_full());
        methods
            .flat_map(|&m| self.ratios.iter().map(move |&r| (m, r)))
            .collect()
    }

    /// Tokens decoded at most for `task`.
    pub fn answer_tokens(&self, task: Task) -> usize {
        let t = task.tokens_to_generate();
        self.answer_cap.map_or(t, |c| c.min(t))
    }

    /// The key of a cell.
    pub fn key(&self, task: Task, example: usize, method: &str, budget: Option<usize>) -> CellKey {
        CellKey::new(task.name(), self.length, 0.0, example, method, budget)
    }

    /// The key of every cell of the run.
    pub fn keys(&self) -> HashSet<CellKey> {
        let variants = self.variants();
        let ratios = self.ratio_variants();
        let mut out = HashSet::new();
        for &t in &self.tasks {
            for e in 0..self.examples {
                for (m, b) in &variants {
                    out.insert(self.key(t, e, &m.to_string(), *b));
                }
                for (m, r) in &ratios {
                    out.insert(self.key(t, e, &m.to_string(), None).at_ratio(*r));
                }
            }
        }
        out
    }

    /// Cells per example: (method, budget) and (method, ratio) cells.
    pub fn per_example(&self) -> usize {
        self.variants().len() + self.ratio_variants().len()
    }

    /// Cells in the run.
    pub fn cells(&self) -> usize {
        self.tasks.len() * self.examples * self.per_example()
    }
}

#[cfg(test)]
mod niah_tests;
#[cfg(test)]
pub(crate) mod tests;
