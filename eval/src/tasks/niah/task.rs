//! NIAH as a task of the driver: RULER's single needle ([`super`]) in Paul Graham essays,
//! every (length, depth, example) one prompt in the model's chat template, each method and
//! budget scored on it with RULER's `string_match_all` of the value. Every prompt of the grid is
//! its own needle (key, value) in its own stretch of the essays ([`super`]'s protocol v2):
//! the records' settings name the grid the needles were dealt over, so a run over another grid
//! is refused rather than mixed into the same records.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::backend::Backend;
use kvplan_planner::MethodName;
use kvplan_runtime::tokenizer::Tokenizer;

use super::{distinct_needles, haystack_starts, place, read_from, Frame, Needle, ANSWER_TOKENS};
use crate::aggregate::aggregate_niah;
use crate::driver::{Prepared, Task};
use crate::prompt::{common_prefix, Asked, ExportedPrompt, PromptIds, Setup};
use crate::records::{CellKey, Record};
use crate::results::merge_results;
use crate::runner::{Evaluator, Scoring};
use crate::score::{postprocess, string_match_all};
use crate::task::{variants, Cell, Reporter, Sink, Unit};
use crate::tasks::{needs_plan, owned, user_frame};
use crate::{table, Error, Result};

/// The grid of a NIAH run.
#[derive(Debug, Clone)]
pub struct NiahGrid {
    /// Prompt lengths in tokens.
    pub lengths: Vec<usize>,
    /// Needle depths in [0, 1].
    pub depths: Vec<f64>,
    /// Examples (needles) per (length, depth).
    pub examples: usize,
    /// Seed of the needles.
    pub seed: u64,
    /// Methods, parsed.
    pub methods: Vec<MethodName>,
    /// `--budget` targets; `full` runs once, without one.
    pub budgets: Vec<usize>,
}

impl NiahGrid {
    /// Every (method, budget) cell of one example, `full` once.
    pub fn variants(&self) -> Vec<(MethodName, Option<usize>)> {
        variants(&self.methods, &self.budgets)
    }

    /// Cells in the whole grid.
    pub fn cells(&self) -> usize {
        self.lengths.len() * self.depths.len() * self.examples * self.variants().len()
    }

    /// Refuses depths outside [0, 1], a zero budget, no length or no example.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.depths.iter().find(|d| !(0.0..=1.0).contains(*d)) {
            return Err(Error::Request(format!("--depths: {d} is not in [0, 1]")));
        }
        if self.budgets.contains(&0) || self.lengths.is_empty() || self.examples == 0 {
            return Err(Error::Request(
                "budgets must be positive, with at least one length and one example".into(),
            ));
        }
        Ok(())
    }

    /// The grid the needles are dealt over, for the records' settings.
    fn layout(&self) -> String {
        let list = |v: Vec<String>| v.join(",");
        format!(
            "lengths {}; depths {}; examples {}",
            list(self.lengths.iter().map(usize::to_string).collect()),
            list(self.depths.iter().map(f64::to_string).collect()),
            self.examples
        )
    }

    /// Every (length, depth, example) of the grid, in run order: prompt `p` is the `p`-th.
    fn points(&self) -> Vec<(usize, f64, usize)> {
        let mut out = Vec::new();
        for &l in &self.lengths {
            for &d in &self.depths {
                out.extend((0..self.examples).map(|e| (l, d, e)));
            }
        }
        out
    }
}

/// The NIAH task: its grid, the essays and, once loaded, their tokens.
pub struct NiahTask {
    grid: NiahGrid,
    essays: PathBuf,
    haystack: Vec<u32>,
    sentence_end: HashMap<u32, bool>,
    /// Each prompt's needle, in [`NiahGrid::points`] order.
    needles: Vec<Needle>,
    /// Where each prompt starts reading the haystack.
    starts: Vec<usize>,
    /// Window placement and mode (default: question-end, question-aware).
    pub setup: Setup,
}

impl NiahTask {
    /// The task of `grid` over the essays (`.txt` files) in `essays`.
    pub fn new(grid: NiahGrid, essays: PathBuf) -> Self {
        Self {
            grid,
            essays,
            haystack: Vec::new(),
            sentence_end: HashMap::new(),
            needles: Vec::new(),
            starts: Vec::new(),
            setup: Setup::default(),
        }
    }

    /// Reads the haystack, at least `min_tokens` long when the essays allow, and which of its
    /// tokens end a sentence (their text ends in a period).
    fn load_haystack(&mut self, tok: &Tokenizer, min_tokens: usize) -> Result<()> {
        self.haystack = haystack(tok, &self.essays, min_tokens)?;
        for &id in &self.haystack {
            self.sentence_end.entry(id).or_insert_with(|| {
                tok.decode(&[id])
                    .map(|t| t.trim_end().ends_with('.'))
                    .unwrap_or(false)
            });
        }
        Ok(())
    }

    /// The chat-framed prompt of `needle` at `length` tokens and `depth` in the haystack read
    /// from `start`, in both forms ([`PromptIds`]): the context is the prompt up to the question
    /// (the user message's `\nWhat is …?`), the question the rest, so the two are the prompt cut
    /// in two.
    fn prompt(
        &self,
        tok: &Tokenizer,
        needle: &Needle,
        (length, depth): (usize, f64),
        start: usize,
    ) -> Result<PromptIds> {
        let encode = |text: &str| tok.encode(text).map_err(Error::from);
        let (head, question) = needle.user_frame();
        let (chat_pre, chat_post) = user_frame(tok)?;
        let (pre, post) = (
            format!("{chat_pre}{head}"),
            format!("{question}{chat_post}"),
        );
        let prefix = encode(&pre)?;
        let suffix = encode(&format!("{post}{}", needle.answer_prefix().trim_start()))?;
        let asked = common_prefix(&suffix, &encode(&question)?);
        let needle_ids = encode(&format!(" {}", needle.sentence()))?;
        let frame = Frame {
            prefix: &prefix,
            needle: &needle_ids,
            suffix: &suffix,
        };
        let ends = &self.sentence_end;
        let is_end = |t: u32| ends.get(&t).copied().unwrap_or(false);
        let hay = read_from(&self.haystack, start, length, is_end);
        let placed = place(&hay, frame, length, depth, is_end);
        let ids = placed.map(|p| p.ids).ok_or_else(|| {
            Error::Request(format!(
                "a {length}-token prompt needs more than the {} haystack tokens",
                self.haystack.len()
            ))
        })?;
        if !ids.ends_with(&suffix) {
            return Err(Error::Request(
                "niah: the placed prompt does not end with its question".into(),
            ));
        }
        let context = ids.len() - suffix.len();
        Ok(PromptIds {
            window_end: context + asked,
            context_ids: ids[..context].to_vec(),
            question_ids: suffix,
            ids,
        })
    }
}

/// A built NIAH prompt.
pub struct NiahPrompt {
    asked: Asked,
    value: String,
    prompt: PromptIds,
}

impl<B: Backend> Task<B> for NiahTask {
    type Record = Record;
    type Input = NiahPrompt;

    fn name(&self) -> &'static str {
        "niah"
    }

    fn check(&self, ev: &Evaluator<'_, B>) -> Result<()> {
        needs_plan(ev, &self.grid.methods)
    }

    fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("seed".to_string(), self.grid.seed.to_string()),
            ("prompt".to_string(), "ruler-niah-chat/v2".to_string()),
            ("needles".to_string(), self.grid.layout()),
            ("answer_tokens".to_string(), ANSWER_TOKENS.to_string()),
        ]
        .into_iter()
        .chain(self.setup.settings())
        .collect()
    }

    fn load(&mut self, ev: &Evaluator<'_, B>, _: &mut dyn Reporter) -> Result<()> {
        let max_len = self.grid.lengths.iter().copied().max().unwrap_or(0);
        let prompts = self.grid.points().len();
        // Enough for every prompt its own stretch, when the essays have it.
        self.load_haystack(ev.tok, max_len.saturating_mul(prompts))?;
        self.needles = distinct_needles(self.grid.seed, prompts).map_err(Error::Request)?;
        self.starts = haystack_starts(self.grid.seed, prompts, self.haystack.len());
        Ok(())
    }

    fn describe(&self, model: &str, backend: &str) -> Option<String> {
        let g = &self.grid;
        let prompts = g.points().len().max(1);
        let max_len = g.lengths.iter().copied().max().unwrap_or(0);
        let stretch = self.haystack.len() / prompts;
        let overlap = if stretch < max_len {
            " (overlapping: the essays are too short for disjoint ones)"
        } else {
            ""
        };
        Some(format!(
            "niah on {model} ({backend} backend): {} cells ({} lengths × {} depths × {} examples \
             × {} method-budgets); {prompts} needles, each prompt its own, in stretches of \
             {stretch} of the {} haystack tokens{overlap}",
            g.cells(),
            g.lengths.len(),
            g.depths.len(),
            g.examples,
            g.variants().len(),
            self.haystack.len()
        ))
    }

    fn units(&self) -> Vec<Unit> {
        let variants = self.grid.variants();
        let unit = |(l, d, e): (usize, f64, usize)| {
            let at = format!("{l} tokens, depth {d}, example {e}");
            Unit::new(at, &variants, |m, b| CellKey::new("niah", l, d, e, m, b))
        };
        self.grid.points().into_iter().map(unit).collect()
    }

    fn prepare(&mut self, ev: &Evaluator<'_, B>, unit: usize) -> Result<Prepared<NiahPrompt>> {
        let (length, depth, example) = self.grid.points()[unit];
        let (Some(needle), Some(&start)) = (self.needles.get(unit), self.starts.get(unit)) else {
            return Err(Error::Request(format!("niah: no needle for prompt {unit}")));
        };
        let needle = needle.clone();
        let prompt = self.prompt(ev.tok, &needle, (length, depth), start)?;
        let asked = Asked {
            task: "niah".into(),
            context_len: length,
            depth,
            example,
            needle: needle.sentence(),
            expected: vec![needle.value.clone()],
            cluster: Some(needle.key.clone()),
            question: None,
        };
        Ok(Prepared {
            input: NiahPrompt {
                asked,
                value: needle.value,
                prompt,
            },
            what: format!("{length} tokens, depth {depth}"),
        })
    }

    fn score(
        &mut self,
        ev: &Evaluator<'_, B>,
        input: &NiahPrompt,
        pending: &[Cell],
        sink: &mut Sink<'_, Record>,
    ) -> Result<()> {
        let metric = |response: &str| string_match_all(&postprocess(response), &[&input.value]);
        let scoring = Scoring {
            asked: &input.asked,
            answer_tokens: ANSWER_TOKENS,
            metric: &metric,
            setup: self.setup,
        };
        ev.score_cells(&input.prompt, pending, scoring, sink)
    }

    fn summarise(&self, records: &[&Record], results: &Path, model: &str) -> Result<String> {
        let records = owned(records);
        let (cells, points) = aggregate_niah("niah", &records);
        merge_results(results, model, "niah", cells, points)?;
        Ok(format!(
            "{}\n{}\n",
            table::markdown("niah", &records),
            self.setup.line()
        ))
    }

    fn made(&self, records: usize) -> String {
        format!("{records} cells")
    }

    fn export(&self, input: &NiahPrompt) -> Option<ExportedPrompt> {
        let (asked, ids) = (&input.asked, &input.prompt);
        Some(ExportedPrompt::new(
            asked,
            ids,
            ANSWER_TOKENS,
            "string_match_all",
        ))
    }
}

/// Token ids of the haystack: the essays in `dir` (sorted by name), joined, encoded, at least
/// `min_tokens` long when the essays allow.
pub fn haystack(tok: &Tokenizer, dir: &Path, min_tokens: usize) -> Result<Vec<u32>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(crate::io_err(dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut text = String::new();
    let mut ids = Vec::new();
    for f in files {
        text.push_str(&std::fs::read_to_string(&f).map_err(crate::io_err(&f))?);
        text.push('\n');
        // About 4 characters per token: encode only once there is likely enough.
        if text.len() > 5 * min_tokens {
            ids = tok.encode(&text)?;
            if ids.len() >= min_tokens {
                return Ok(ids);
            }
        }
    }
    if ids.len() < min_tokens {
        ids = tok.encode(&text)?;
    }
    Ok(ids)
}
