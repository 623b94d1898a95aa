//! Runs a RULER subset under every method and budget (feature `model`): per task and example the
//! prompt is generated once ([`generate`], sized with the model's tokenizer in its chat template)
//! and every pending cell is scored on it by the NIAH runner's per-prompt machinery
//! (`Evaluator::score_prompt`: one shared prefill for every press but `pod`, greedy decoding).

use burn::tensor::backend::Backend;
use kvplan_runtime::tokenizer::Tokenizer;

use super::{generate, score, Framer, RulerRun, Sources, Task};
use crate::records::{Record, RecordsFile};
use crate::runner::{model_err, pending, Evaluator, Outcome, Progress, Skipped};
use crate::Result;

/// The model's chat template and tokenizer: the task text is the user message, the answer
/// prefix (its leading space dropped) follows the generation prompt, as in the NIAH runner.
pub struct ChatFramer<'a> {
    /// The model's tokenizer.
    pub tok: &'a Tokenizer,
    /// The rendered chat before and after the user message.
    frame: (String, String),
}

impl<'a> ChatFramer<'a> {
    /// Renders the model's chat template around a user message once.
    pub fn new(tok: &'a Tokenizer) -> Result<Self> {
        let frame = tok.user_frame().map_err(model_err)?;
        Ok(Self { tok, frame })
    }
}

impl Framer for ChatFramer<'_> {
    fn frame(&self, user: &str, answer_prefix: &str) -> String {
        let (pre, post) = &self.frame;
        format!("{pre}{user}{post}{}", answer_prefix.trim_start())
    }

    fn count(&self, text: &str) -> Result<usize> {
        Ok(self.tok.encode(text).map_err(model_err)?.len())
    }
}

impl<B: Backend> Evaluator<'_, B> {
    /// Scores every cell of `run` not yet in `records`, calling `save` after each example and
    /// `progress` after each cell. Cells the plan has no press for at an example's length (a
    /// budget below what a method's rule allows) are not run; they are returned, with the reason.
    pub fn run_ruler(
        &self,
        sources: &Sources,
        run: &RulerRun,
        records: &mut RecordsFile,
        save: &mut dyn FnMut(&RecordsFile) -> Result<()>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Vec<RulerSkip>> {
        let variants = run.variants();
        let framer = ChatFramer::new(self.tok)?;
        let mut p = Progress::new(run.cells());
        let mut skips = Vec::new();
        // Every prompt first, so a task that cannot fit the length fails before any model run.
        let mut work = Vec::new();
        for &task in &run.tasks {
            for e in 0..run.examples {
                let pending = pending(records, &variants, |m, b| run.key(task, e, m, b));
                p.reuse(variants.len() - pending.len());
                if !pending.is_empty() {
                    let ex = generate(task, sources, &framer, run.length, run.seed, e)?;
                    work.push((task, e, pending, ex));
                }
            }
        }
        if p.done > 0 {
            progress(&p);
        }
        for (task, e, pending, ex) in work {
            let ids = self.tok.encode(&ex.prompt).map_err(model_err)?;
            let presses = self.presses(&pending, ids.len());
            // Not run, not recorded: counted as done so the bar ends.
            p.done += presses.skipped.len();
            skips.extend(presses.skipped.into_iter().map(|cell| RulerSkip {
                task,
                example: e,
                cell,
            }));
            if presses.ready.is_empty() {
                progress(&p);
                continue;
            }
            let answers = &ex.built.answers;
            let mut make = |o: Outcome| Record {
                task: task.name().to_string(),
                model: self.model_name.clone(),
                context_len: run.length,
                depth: 0.0,
                example: e,
                needle: ex.built.query.clone(),
                score: score(task, &o.response, answers),
                expected: answers.clone(),
                method: o.method,
                budget: o.budget,
                response: o.response,
                kv_fraction: o.kv_fraction,
                seconds: o.seconds,
            };
            let what = format!("{task} #{e} ({} tokens)", ids.len());
            let mut on_cell = |r: &Record| p.cell(r, &what, progress);
            let out = self.score_prompt(
                &ids,
                presses.ready,
                run.answer_tokens(task),
                &mut make,
                &mut on_cell,
            )?;
            for r in out {
                records.insert(r);
            }
            save(records)?;
        }
        Ok(skips)
    }
}

/// A cell of a RULER run that was not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulerSkip {
    /// Its task.
    pub task: Task,
    /// Its example.
    pub example: usize,
    /// Method, budget and why.
    pub cell: Skipped,
}
