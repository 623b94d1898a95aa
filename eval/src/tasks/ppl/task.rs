//! Streaming perplexity as a task of the driver (TreeKV §5.2, its Figure 4): each text, cut to
//! the run's length, streams one token at a time under each method and budget
//! ([`stream`]); the curves go into the results file, the perplexity at fixed positions into the
//! table ([`super::report`]).
//!
//! One position policy for every evicting method (`--positions`, recorded in the settings):
//! `reassign` (the default) moves their entries to positions `0..len` after every eviction, as
//! TreeKV §4.1 and StreamingLLM §3.2 do; `keep` keeps original positions and re-assigns only when
//! the stream reaches the model's trained context. Either way no position exceeds what the model
//! was trained on; methods that cannot re-assign ([`streams_past_context`]) are refused at such
//! lengths.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::Backend;
use kvplan_planner::MethodName;
use kvplan_runtime::generate::last_row;
use kvplan_runtime::press::Session;

use super::{curves, nll, report, PplRecord};
use crate::driver::{Prepared, Task};
use crate::records::CellKey;
use crate::results::merge_perplexity;
use crate::runner::Evaluator;
use crate::task::{variants, Cell, Reporter, Sink, Unit};
use crate::{io_err, Error, Result};

/// Positions the table reads the curves at (those below the run's length).
const TABLE_POSITIONS: [usize; 5] = [256, 512, 1024, 2048, 4096];

/// Whether `method` can stream past the model's trained context: its press re-assigns positions
/// within its cache (a capability; FullKV, SpindleKV and PoD cannot).
fn streams_past_context(method: MethodName) -> bool {
    kvplan_runtime::press::capabilities(method).streams_past_context
}

/// What a perplexity run covers.
#[derive(Debug, Clone)]
pub struct PplRun {
    /// Methods, parsed.
    pub methods: Vec<MethodName>,
    /// `--budget` targets; `full` runs once, without one.
    pub budgets: Vec<usize>,
    /// Tokens streamed per text.
    pub length: usize,
    /// Curve points every this many tokens.
    pub every: usize,
    /// File names of the texts.
    pub texts: Vec<String>,
}

/// The perplexity task: its run and the folder of its texts.
pub struct PplTask {
    run: PplRun,
    dir: PathBuf,
}

impl PplTask {
    /// The task of `run` over the texts in `dir`.
    pub fn new(run: PplRun, dir: PathBuf) -> Self {
        Self { run, dir }
    }
}

/// A text's first tokens, ready to stream.
pub struct Stream {
    text: String,
    ids: Vec<u32>,
}

impl<B: Backend> Task<B> for PplTask {
    type Record = PplRecord;
    type Input = Stream;

    fn name(&self) -> &'static str {
        "ppl"
    }

    fn check(&self, ev: &Evaluator<'_, B>) -> Result<()> {
        let (length, context) = (self.run.length, ev.model.config.context_len);
        if length <= context {
            return Ok(());
        }
        let stuck: Vec<String> = self
            .run
            .methods
            .iter()
            .filter(|&&m| !streams_past_context(m))
            .map(MethodName::to_string)
            .collect();
        if stuck.is_empty() {
            return Ok(());
        }
        Err(Error::Request(format!(
            "--length {length} is past the model's trained context of {context} tokens, \
             where {} cannot re-assign positions; drop it from --methods or lower --length",
            stuck.join(", ")
        )))
    }

    fn settings(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn load(&mut self, _: &Evaluator<'_, B>, _: &mut dyn Reporter) -> Result<()> {
        Ok(())
    }

    fn describe(&self, _: &str, _: &str) -> Option<String> {
        None
    }

    fn units(&self) -> Vec<Unit> {
        let variants = variants(&self.run.methods, &self.run.budgets);
        let length = self.run.length;
        let unit = |text: &String| {
            Unit::new(text.clone(), &variants, |m, b| {
                CellKey::stream(text, length, m, b)
            })
        };
        self.run.texts.iter().map(unit).collect()
    }

    fn prepare(&mut self, ev: &Evaluator<'_, B>, unit: usize) -> Result<Prepared<Stream>> {
        let text = &self.run.texts[unit];
        let length = self.run.length;
        let file = self.dir.join(text);
        let body = std::fs::read_to_string(&file).map_err(io_err(&file))?;
        let mut ids = ev.tok.encode(&body)?;
        if ids.len() < length {
            return Err(Error::Request(format!(
                "{text} has {} tokens, fewer than --length {length}",
                ids.len()
            )));
        }
        ids.truncate(length);
        let text = text.clone();
        Ok(Prepared {
            what: text.clone(),
            input: Stream { text, ids },
        })
    }

    fn score(
        &mut self,
        ev: &Evaluator<'_, B>,
        input: &Stream,
        pending: &[Cell],
        sink: &mut Sink<'_, PplRecord>,
    ) -> Result<()> {
        for c in pending {
            if !c.method.is_full() && ev.plan.is_none() {
                return Err(Error::Request(format!(
                    "method `{}` needs a plan: give --plan FILE",
                    c.method
                )));
            }
            sink.record(stream(ev, &input.ids, c.method, c.budget, &input.text)?)?;
        }
        Ok(())
    }

    fn summarise(&self, records: &[&PplRecord], results: &Path, model: &str) -> Result<String> {
        let curves = curves(records, self.run.every);
        merge_perplexity(results, model, curves.clone())?;
        let at: Vec<usize> = TABLE_POSITIONS
            .into_iter()
            .filter(|&x| x < self.run.length)
            .collect();
        Ok(report::markdown(&curves, &at))
    }

    fn made(&self, records: usize) -> String {
        format!("{records} streams of {} tokens", self.run.length)
    }
}

/// Streams `ids` one token at a time under `method` at `budget` (TreeKV §5.2): the first token
/// is the prompt, each later token's NLL is read from the step before it, and the press evicts
/// while decoding. Budgets are planned for the whole text's length.
pub fn stream<B: Backend>(
    ev: &Evaluator<'_, B>,
    ids: &[u32],
    method: MethodName,
    budget: Option<usize>,
    text: &str,
) -> Result<PplRecord> {
    if ids.len() < 2 {
        return Err(Error::Request(format!("{text}: fewer than 2 tokens")));
    }
    let started = Instant::now();
    let mut press = ev.press(method, ids.len(), budget)?;
    let mut session = Session::new(ev.model, press.as_mut());
    let mut logits = last_row(session.prefill(&ids[..1])?);
    let mut nlls = Vec::with_capacity(ids.len() - 1);
    for (i, &next) in ids.iter().enumerate().skip(1) {
        nlls.push(nll(&logits, next));
        if i + 1 < ids.len() {
            logits = last_row(session.step(next)?);
        }
    }
    Ok(PplRecord {
        model: ev.model_name.clone(),
        text: text.to_string(),
        method: method.to_string(),
        budget,
        tokens: ids.len(),
        nll: nlls,
        kv_fraction: session.memory().ratio().clamp(f64::MIN_POSITIVE, 1.0),
        seconds: started.elapsed().as_secs_f64(),
    })
}
