//! Runs NIAH examples under every method and budget (feature `model`), and the per-prompt
//! machinery the RULER runner (`crate::ruler::run`) shares.
//!
//! Per example (length, depth, needle) the prompt is built once and every pending (method,
//! budget) cell is scored on it (`Evaluator::score_prompt`). Every press that keeps the model's
//! own forward pass (all but `pod`) compresses after the full prefill in this runtime, so they
//! share **one** prefill: the prompt runs once with an observer recording the union of what the presses ask, and each press
//! adopts a copy of the cache ([`Session::adopt`]) — the same cache and observations it would
//! compute alone. `pod` changes attention from the first token, so it runs its own prefill.
//! Decoding is greedy, at most a given number of tokens ([`crate::niah::ANSWER_TOKENS`] for
//! NIAH).

use std::collections::HashMap;
use std::time::Instant;

use burn::tensor::backend::Backend;
use kvplan_planner::{Plan, Target};
use kvplan_runtime::generate::{argmax, last_row};
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::observe::{ObserveConfig, Observer};
use kvplan_runtime::press::{build_press, Press, Session};
use kvplan_runtime::tokenizer::{ChatMessage, Tokenizer};

use crate::niah::{self, Frame, Needle};
use crate::ppl::{nll, PplRecord};
use crate::records::{CellKey, Record, RecordsFile};
use crate::score::{postprocess, string_match_all};
use crate::{Error, Result};

pub(crate) fn model_err(e: impl std::fmt::Display) -> Error {
    Error::Model(e.to_string())
}

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
    /// Methods (registry names).
    pub methods: Vec<String>,
    /// `--budget` targets; `full` runs once, without one.
    pub budgets: Vec<usize>,
}

impl NiahGrid {
    /// Every (method, budget) cell of one example, `full` once.
    pub fn variants(&self) -> Vec<(String, Option<usize>)> {
        crate::records::variants(&self.methods, &self.budgets)
    }

    /// The key of every cell of the grid.
    pub fn keys(&self) -> std::collections::HashSet<CellKey> {
        let variants = self.variants();
        let mut out = std::collections::HashSet::new();
        for &l in &self.lengths {
            for &d in &self.depths {
                for e in 0..self.examples {
                    for (m, b) in &variants {
                        out.insert(CellKey::new("niah", l, d, e, m, *b));
                    }
                }
            }
        }
        out
    }

    /// Cells in the whole grid.
    pub fn cells(&self) -> usize {
        self.lengths.len() * self.depths.len() * self.examples * self.variants().len()
    }
}

/// Progress of a run, after each cell.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Cells done (reused included).
    pub done: usize,
    /// Cells reused from earlier records.
    pub reused: usize,
    /// Cells in the grid.
    pub total: usize,
    /// The last cell, `method @ budget, length, depth`.
    pub last: String,
}

impl Progress {
    /// A run of `total` cells.
    pub(crate) fn new(total: usize) -> Self {
        Self {
            done: 0,
            reused: 0,
            total,
            last: String::new(),
        }
    }

    /// Counts `reused` cells taken from earlier records.
    pub(crate) fn reuse(&mut self, reused: usize) {
        self.done += reused;
        self.reused += reused;
    }

    /// Counts the scored cell `r` and reports it: `method @ budget what: score`.
    pub(crate) fn cell(&mut self, r: &Record, what: &str, report: &mut dyn FnMut(&Progress)) {
        self.done += 1;
        self.last = format!(
            "{} {what}: {:.0}",
            label(&r.method, r.budget),
            100.0 * r.score
        );
        report(self);
    }
}

/// One cell's run, before scoring.
pub(crate) struct Outcome {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target.
    pub budget: Option<usize>,
    /// The new text, stop token removed.
    pub response: String,
    /// KV bytes held after the prompt over FullKV's.
    pub kv_fraction: f64,
    /// Seconds of this cell (a shared prefill not counted).
    pub seconds: f64,
}

/// A (method, budget) cell and its press, ready to run.
pub(crate) type ReadyPress<B> = ((String, Option<usize>), Box<dyn Press<B>>);

/// The presses of one prompt's cells.
pub(crate) struct Presses<B: Backend> {
    /// Cells whose press was built.
    pub ready: Vec<ReadyPress<B>>,
    /// Cells whose press could not be built.
    pub skipped: Vec<Skipped>,
}

/// A cell not run: its press could not be built for the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target.
    pub budget: Option<usize>,
    /// Why, as the press registry says.
    pub reason: String,
}

/// The cells of `variants` not yet in `records`, keyed by `key(method, budget)`.
pub(crate) fn pending(
    records: &RecordsFile,
    variants: &[(String, Option<usize>)],
    key: impl Fn(&str, Option<usize>) -> CellKey,
) -> Vec<(String, Option<usize>)> {
    variants
        .iter()
        .filter(|(m, b)| records.get(&key(m, *b)).is_none())
        .cloned()
        .collect()
}

/// The model, its tokenizer and the plan budgets come from.
pub struct Evaluator<'a, B: Backend> {
    /// The model.
    pub model: &'a Model<B>,
    /// Its tokenizer.
    pub tok: &'a Tokenizer,
    /// The plan (needed by every method but `full`).
    pub plan: Option<&'a Plan>,
    /// Model name recorded in each record.
    pub model_name: String,
    sentence_end: HashMap<u32, bool>,
}

/// The prompt of one example.
struct Example {
    needle: Needle,
    ids: Vec<u32>,
}

impl<'a, B: Backend> Evaluator<'a, B> {
    /// An evaluator of `model`.
    pub fn new(model: &'a Model<B>, tok: &'a Tokenizer, plan: Option<&'a Plan>) -> Self {
        Self {
            model,
            tok,
            plan,
            model_name: model.config.name.clone(),
            sentence_end: HashMap::new(),
        }
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.tok.encode(text).map_err(model_err)
    }

    fn is_sentence_end(&mut self, id: u32) -> bool {
        if let Some(&b) = self.sentence_end.get(&id) {
            return b;
        }
        let b = self
            .tok
            .decode(&[id])
            .map(|t| t.trim_end().ends_with('.'))
            .unwrap_or(false);
        self.sentence_end.insert(id, b);
        b
    }

    /// The chat-framed prompt of `needle` at `length` tokens and `depth` in `haystack`.
    fn example(
        &mut self,
        haystack: &[u32],
        needle: Needle,
        length: usize,
        depth: f64,
    ) -> Result<Example> {
        const HOLE: &str = "\u{1}HAYSTACK\u{1}";
        let (head, question) = needle.user_frame();
        let chat = self
            .tok
            .render_chat(&[ChatMessage {
                role: "user".into(),
                content: format!("{head}{HOLE}{question}"),
            }])
            .map_err(model_err)?;
        let (pre, post) = chat
            .split_once(HOLE)
            .ok_or_else(|| Error::Request("chat template lost the haystack".into()))?;
        let prefix = self.encode(pre)?;
        let suffix = self.encode(&format!("{post}{}", needle.answer_prefix().trim_start()))?;
        let needle_ids = self.encode(&format!(" {}", needle.sentence()))?;
        for &t in haystack {
            self.is_sentence_end(t);
        }
        let frame = Frame {
            prefix: &prefix,
            needle: &needle_ids,
            suffix: &suffix,
        };
        let ends = &self.sentence_end;
        let placed = niah::place(haystack, frame, length, depth, |t| {
            ends.get(&t).copied().unwrap_or(false)
        })
        .ok_or_else(|| {
            Error::Request(format!(
                "a {length}-token prompt needs more than the {} haystack tokens",
                haystack.len()
            ))
        })?;
        Ok(Example {
            needle,
            ids: placed.ids,
        })
    }

    /// Scores every cell of `grid` not yet in `records`, calling `save` after each example and
    /// `progress` after each cell. Returns the cells whose press the plan cannot build at the
    /// example's length (e.g. SpindleKV's schedule below its β), each with where it was skipped.
    pub fn run_niah(
        &mut self,
        haystack: &[u32],
        grid: &NiahGrid,
        records: &mut RecordsFile,
        save: &mut dyn FnMut(&RecordsFile) -> Result<()>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Vec<(String, Skipped)>> {
        let variants = grid.variants();
        let mut p = Progress::new(grid.cells());
        let mut skips = Vec::new();
        for &length in &grid.lengths {
            for &depth in &grid.depths {
                for e in 0..grid.examples {
                    let pending = pending(records, &variants, |m, b| {
                        CellKey::new("niah", length, depth, e, m, b)
                    });
                    p.reuse(variants.len() - pending.len());
                    if pending.is_empty() {
                        progress(&p);
                        continue;
                    }
                    let needle = Needle::generate(grid.seed, e);
                    let ex = self.example(haystack, needle, length, depth)?;
                    let presses = self.presses(&pending, ex.ids.len());
                    // Not run, not recorded (a re-run tries again): counted as done.
                    p.done += presses.skipped.len();
                    let at = format!("{length} tokens, depth {depth}, example {e}");
                    skips.extend(presses.skipped.into_iter().map(|c| (at.clone(), c)));
                    if presses.ready.is_empty() {
                        progress(&p);
                        continue;
                    }
                    let expected = vec![ex.needle.value.clone()];
                    let model = self.model_name.clone();
                    let mut make = |o: Outcome| Record {
                        task: "niah".into(),
                        model: model.clone(),
                        context_len: length,
                        depth,
                        example: e,
                        needle: ex.needle.sentence(),
                        score: string_match_all(&postprocess(&o.response), &[&ex.needle.value]),
                        expected: expected.clone(),
                        method: o.method,
                        budget: o.budget,
                        response: o.response,
                        kv_fraction: o.kv_fraction,
                        seconds: o.seconds,
                    };
                    let what = format!("{length} tokens, depth {depth}");
                    let mut on_cell = |r: &Record| p.cell(r, &what, progress);
                    let out = self.score_prompt(
                        &ex.ids,
                        presses.ready,
                        niah::ANSWER_TOKENS,
                        &mut make,
                        &mut on_cell,
                    )?;
                    for r in out {
                        records.insert(r);
                    }
                    save(records)?;
                }
            }
        }
        Ok(skips)
    }

    /// The press of every `(method, budget)` of `cells` for an `n`-token prompt; the cells
    /// whose press cannot be built (the plan has no budgets for them at this length, …) apart,
    /// with the reason.
    pub(crate) fn presses(&self, cells: &[(String, Option<usize>)], n: usize) -> Presses<B> {
        let mut out = Presses {
            ready: Vec::new(),
            skipped: Vec::new(),
        };
        for (m, b) in cells {
            match build_press::<B>(m, self.plan, n, b.map(Target::Tokens), &self.model.config) {
                Ok(spec) => out.ready.push(((m.clone(), *b), spec.press)),
                Err(e) => out.skipped.push(Skipped {
                    method: m.clone(),
                    budget: *b,
                    reason: e.to_string(),
                }),
            }
        }
        out
    }

    /// Runs the prompt `ids` under every ready press of `Self::presses` and greedy-decodes at
    /// most `answer_tokens` tokens for each; `record` scores each outcome, `on_cell` sees each
    /// record. Every press that can ([`Press::adopts_shared_prefill`]) adopts a copy of one shared
    /// prefill (module header).
    pub(crate) fn score_prompt(
        &self,
        ids: &[u32],
        presses: Vec<ReadyPress<B>>,
        answer_tokens: usize,
        record: &mut dyn FnMut(Outcome) -> Record,
        on_cell: &mut dyn FnMut(&Record),
    ) -> Result<Vec<Record>> {
        let n = ids.len();
        let (cells, mut presses): (Vec<_>, Vec<_>) = presses.into_iter().unzip();
        // One prefill for every press that keeps the model's forward pass.
        let shared: Vec<bool> = presses.iter().map(|p| p.adopts_shared_prefill()).collect();
        let mut prefill = None;
        if shared.iter().any(|&s| s) {
            let mut config = ObserveConfig::default();
            for (p, _) in presses.iter().zip(&shared).filter(|(_, s)| **s) {
                if let Some(c) = p.prefill_observe() {
                    config.attn_rows = config.attn_rows.max(c.attn_rows);
                    config.column_sums |= c.column_sums;
                    config.keys_values |= c.keys_values;
                }
            }
            let mut obs = Observer::new(config, self.model.config.n_layers);
            let mut cache = self.model.new_cache();
            let logits = self
                .model
                .forward(ids, &mut cache, Some(&mut obs), Logits::Last)
                .map_err(model_err)?;
            prefill = Some((cache, obs, last_row(logits)));
        }
        let mut out = Vec::with_capacity(cells.len());
        for (((method, budget), press), &share) in cells.iter().zip(presses.iter_mut()).zip(&shared)
        {
            let started = Instant::now();
            let mut session = Session::new(self.model, press.as_mut());
            let first = match (&prefill, share) {
                (Some((cache, obs, first)), true) => {
                    session
                        .adopt(cache.clone(), n, Some(obs))
                        .map_err(model_err)?;
                    first.clone()
                }
                _ => last_row(session.prefill(ids).map_err(model_err)?),
            };
            let kv_fraction = session.memory().ratio();
            let new = self.decode(&mut session, &first, answer_tokens)?;
            let response = self.tok.decode(&new).map_err(model_err)?;
            let r = record(Outcome {
                method: method.clone(),
                budget: *budget,
                response,
                kv_fraction: kv_fraction.clamp(f64::MIN_POSITIVE, 1.0),
                seconds: started.elapsed().as_secs_f64(),
            });
            on_cell(&r);
            out.push(r);
        }
        Ok(out)
    }

    /// Greedy decoding after `first` (the prompt's last logits), at most `max` tokens; the stop
    /// id is not returned.
    fn decode(&self, session: &mut Session<'_, B>, first: &[f32], max: usize) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        let mut next = argmax(first);
        loop {
            if self.tok.stop_ids.contains(&next) {
                break;
            }
            ids.push(next);
            if ids.len() >= max {
                break;
            }
            next = argmax(&last_row(session.step(next).map_err(model_err)?));
        }
        Ok(ids)
    }
}

impl<B: Backend> Evaluator<'_, B> {
    /// Streams `ids` one token at a time under `method` at `budget` (TreeKV §5.2): the first
    /// token is the prompt, each later token's NLL is read from the step before it, and the press
    /// evicts while decoding. Budgets are planned for the whole text's length.
    pub fn stream_ppl(
        &self,
        ids: &[u32],
        method: &str,
        budget: Option<usize>,
        text: &str,
    ) -> Result<PplRecord> {
        if ids.len() < 2 {
            return Err(Error::Request(format!("{text}: fewer than 2 tokens")));
        }
        let started = Instant::now();
        let mut spec = build_press::<B>(
            method,
            self.plan,
            ids.len(),
            budget.map(Target::Tokens),
            &self.model.config,
        )
        .map_err(model_err)?;
        let mut session = Session::new(self.model, spec.press.as_mut());
        let mut logits = last_row(session.prefill(&ids[..1]).map_err(model_err)?);
        let mut nlls = Vec::with_capacity(ids.len() - 1);
        for (i, &next) in ids.iter().enumerate().skip(1) {
            nlls.push(nll(&logits, next));
            if i + 1 < ids.len() {
                logits = last_row(session.step(next).map_err(model_err)?);
            }
        }
        Ok(PplRecord {
            model: self.model_name.clone(),
            text: text.to_string(),
            method: method.to_string(),
            budget,
            tokens: ids.len(),
            nll: nlls,
            kv_fraction: session.memory().ratio().clamp(f64::MIN_POSITIVE, 1.0),
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

fn label(method: &str, budget: Option<usize>) -> String {
    match budget {
        Some(b) => format!("{method} @ {b}"),
        None => method.to_string(),
    }
}

/// Token ids of the haystack: the essays in `dir` (sorted by name), joined, encoded, at least
/// `min_tokens` long when the essays allow.
pub fn haystack(tok: &Tokenizer, dir: &std::path::Path, min_tokens: usize) -> Result<Vec<u32>> {
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
            ids = tok.encode(&text).map_err(model_err)?;
            if ids.len() >= min_tokens {
                return Ok(ids);
            }
        }
    }
    if ids.len() < min_tokens {
        ids = tok.encode(&text).map_err(model_err)?;
    }
    Ok(ids)
}
