//! The profile run: needle trials (retrieval, then retrieval-reasoning), then real-text samples,
//! each unit saved to the partial results as it finishes; then the figures are averaged into a
//! [`Profile`]. Generic over burn's `Backend`; deterministic for a given seed.

mod aggregate;
mod sample;
mod trial;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use burn::tensor::backend::Backend;
use kvplan_planner::{ModelIdentity, Profile};
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

use crate::config::ProfileConfig;
use crate::needles::Example;
use crate::partial::{Partial, TrialOutcome};
use crate::progress::Progress;
use crate::{Error, Result};
use kvplan_common::data::Corpus;

pub use trial::{frame_ids, KEEP_ABOVE};

/// What a profile is made from.
pub struct ProfileInputs<'a, B: Backend> {
    /// The model.
    pub model: &'a Model<B>,
    /// Its tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// Name, architecture, GGUF hash and geometry recorded in the profile.
    pub identity: ModelIdentity,
    /// Haystack of the needle trials.
    pub haystack: &'a Corpus,
    /// Corpora of the text samples, used in turn.
    pub texts: Vec<&'a Corpus>,
    /// Settings.
    pub config: ProfileConfig,
    /// Date recorded in the profile, `YYYY-MM-DD`.
    pub date: String,
    /// Where partial results are kept (`None`: not kept).
    pub partial_path: Option<PathBuf>,
    /// `(i, n)`: run only the trials and samples whose index is `i − 1` modulo `n` into
    /// `partial_path` ([`profile_shard`]); `(1, 1)`: every unit.
    pub shard: (usize, usize),
}

impl<'a, B: Backend> ProfileInputs<'a, B> {
    /// A whole profile's inputs (every unit, nothing kept between runs) on the profiler's two
    /// corpora: the needles in the essays, the text samples from the essays and the plays in turn.
    pub fn new(
        model: &'a Model<B>,
        tokenizer: &'a Tokenizer,
        identity: ModelIdentity,
        (essays, plays): (&'a Corpus, &'a Corpus),
        config: ProfileConfig,
        date: String,
    ) -> Self {
        ProfileInputs {
            model,
            tokenizer,
            identity,
            haystack: essays,
            texts: vec![essays, plays],
            config,
            date,
            partial_path: None,
            shard: (1, 1),
        }
    }
}

/// Wall-clock time of one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StageTiming {
    /// Stage name.
    pub stage: &'static str,
    /// Seconds spent running it now.
    pub seconds: f64,
    /// Units run now.
    pub run: usize,
    /// Units restored from partial results.
    pub restored: usize,
}

/// Which needle examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Retrieval,
    Reasoning,
}

impl Kind {
    fn stage(self) -> &'static str {
        match self {
            Kind::Retrieval => "retrieval needles",
            Kind::Reasoning => "reasoning needles",
        }
    }
}

/// One trial to run.
pub(crate) struct TrialSpec {
    index: usize,
    /// Which of the kind's examples it asks (the examples are taken in turn over the grid).
    pub(crate) needle: usize,
    pub(crate) example: Example,
    length: usize,
    depth: f64,
    haystack_seed: u64,
}

/// Mixes `index` into `seed` for one stream (SplitMix64's increment as the multiplier).
fn sub_seed(seed: u64, salt: u64, index: usize) -> u64 {
    seed ^ salt ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

const HAYSTACK_SALT: u64 = 0x6861_7973_7461_636B;
const SAMPLE_SALT: u64 = 0x7361_6D70_6C65_7321;

/// Every (length, depth) once, examples in turn; both kinds share each index's haystack.
pub(crate) fn trial_specs(c: &ProfileConfig, kind: Kind) -> Vec<TrialSpec> {
    let (retrieval, reasoning) = c.needles.examples(c.seed);
    let examples = match kind {
        Kind::Retrieval => retrieval,
        Kind::Reasoning => reasoning,
    };
    let mut specs = Vec::with_capacity(c.trials());
    for &length in &c.context_lengths {
        for &depth in &c.depths {
            let index = specs.len();
            let needle = index % examples.len();
            specs.push(TrialSpec {
                index,
                needle,
                example: examples[needle].clone(),
                length,
                depth,
                haystack_seed: sub_seed(c.seed, HAYSTACK_SALT, index),
            });
        }
    }
    specs
}

fn save(partial: &Partial, inp_path: &Option<PathBuf>) -> Result<()> {
    match inp_path {
        Some(p) => partial.save(p),
        None => Ok(()),
    }
}

/// Runs the profile; returns it with the time spent per stage.
pub fn profile<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    progress: &mut dyn Progress,
) -> Result<(Profile, Vec<StageTiming>)> {
    check(inp)?;
    let fingerprint = fingerprint(inp)?;
    let mut partial = load_partial(inp, &fingerprint, progress);
    if let Some(path) = &inp.partial_path {
        // Shards run beside this file (`--shard i/n`) are merged by unit index.
        for (file, note) in partial.absorb_shards(path) {
            progress.note(&format!("{}: {note}", file.display()));
        }
    }
    let mut timings = Vec::new();
    let all = |_: usize| true;
    for kind in [Kind::Retrieval, Kind::Reasoning] {
        timings.push(run_trials(inp, kind, &mut partial, progress, &all)?);
    }
    timings.push(run_samples(inp, &mut partial, progress, &all)?);
    let profile = aggregate::build(inp, &partial)?;
    Ok((profile, timings))
}

/// The settings checked against the model and the corpora, before anything runs.
fn check<B: Backend>(inp: &ProfileInputs<'_, B>) -> Result<()> {
    let c = &inp.config;
    c.validate(inp.model.config.context_len)?;
    for kind in [Kind::Retrieval, Kind::Reasoning] {
        trial::check_room(inp, &trial_specs(c, kind), kind)?;
    }
    if inp.texts.is_empty() {
        return Err(Error::Settings("no corpus for the text samples".into()));
    }
    Ok(())
}

/// The partial results at `inp.partial_path` that belong to `fingerprint`, else none.
fn load_partial<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    fingerprint: &str,
    progress: &mut dyn Progress,
) -> Partial {
    match &inp.partial_path {
        Some(path) => {
            let (p, why) = Partial::load_or_new(path, fingerprint);
            if let Some(why) = why {
                progress.note(&why);
            }
            p
        }
        None => Partial::new(fingerprint.to_string()),
    }
}

/// One shard of a profile (`inp.shard = (i, n)`): the needle trials and text samples whose index
/// is `i − 1` modulo `n`, each saved to `inp.partial_path` as it finishes (resumable as a whole
/// profile is). No profile is built: a run without a shard, with the same settings and output,
/// merges every shard's file beside its own and builds it.
pub fn profile_shard<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    progress: &mut dyn Progress,
) -> Result<Vec<StageTiming>> {
    let (i, n) = inp.shard;
    if i == 0 || i > n {
        return Err(Error::Settings(format!("shard {i} of {n}")));
    }
    check(inp)?;
    let fingerprint = fingerprint(inp)?;
    let mut partial = load_partial(inp, &fingerprint, progress);
    let mine = move |unit: usize| unit % n == i - 1;
    let mut timings = Vec::new();
    for kind in [Kind::Retrieval, Kind::Reasoning] {
        timings.push(run_trials(inp, kind, &mut partial, progress, &mine)?);
    }
    timings.push(run_samples(inp, &mut partial, progress, &mine)?);
    save(&partial, &inp.partial_path)?;
    Ok(timings)
}

/// What partial results must match to be reused: settings, model and corpora.
fn fingerprint<B: Backend>(inp: &ProfileInputs<'_, B>) -> Result<String> {
    let sources: Vec<&str> = inp.texts.iter().map(|t| t.source.as_str()).collect();
    serde_json::to_string(&(&inp.config, &inp.identity, &inp.haystack.source, &sources))
        .map_err(|e| Error::Settings(e.to_string()))
}

/// The retrieval-reasoning trials alone, with their test against chance: how often the model
/// answers in the configured prompt style (`profiler/examples/r2_answer_rates.rs` compares the
/// styles with it). Nothing is kept on disk.
pub fn reasoning_trials<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    progress: &mut dyn Progress,
) -> Result<(Vec<kvplan_planner::Trial>, kvplan_planner::ChanceTest)> {
    inp.config.validate(inp.model.config.context_len)?;
    trial::check_room(
        inp,
        &trial_specs(&inp.config, Kind::Reasoning),
        Kind::Reasoning,
    )?;
    let mut partial = Partial::new(String::new());
    let probe = ProfileInputs {
        partial_path: None,
        texts: inp.texts.clone(),
        identity: inp.identity.clone(),
        config: inp.config.clone(),
        date: inp.date.clone(),
        ..*inp
    };
    run_trials(&probe, Kind::Reasoning, &mut partial, progress, &|_| true)?;
    let chance = aggregate::reasoning_chance(&inp.config, &partial.reasoning);
    let trials = partial.reasoning.into_iter().map(|o| o.trial).collect();
    Ok((trials, chance))
}

fn outcomes_mut(partial: &mut Partial, kind: Kind) -> &mut Vec<TrialOutcome> {
    match kind {
        Kind::Retrieval => &mut partial.retrieval,
        Kind::Reasoning => &mut partial.reasoning,
    }
}

fn run_trials<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    kind: Kind,
    partial: &mut Partial,
    progress: &mut dyn Progress,
    mine: &dyn Fn(usize) -> bool,
) -> Result<StageTiming> {
    let specs: Vec<_> = trial_specs(&inp.config, kind)
        .into_iter()
        .filter(|s| mine(s.index))
        .collect();
    let done: HashSet<usize> = outcomes_mut(partial, kind)
        .iter()
        .map(|o| o.index)
        .collect();
    let restored = specs.iter().filter(|s| done.contains(&s.index)).count();
    progress.start(kind.stage(), specs.len() as u64, restored as u64);
    let start = Instant::now();
    let mut run = 0;
    for spec in specs.iter().filter(|s| !done.contains(&s.index)) {
        let outcome = trial::run_trial(inp, spec, kind)?;
        let t = &outcome.trial;
        let msg = format!(
            "{} tokens, depth {}%: {:?} ({:.2}{})",
            t.context_length,
            t.depth_percent,
            t.response,
            t.score,
            if t.kept { ", kept" } else { "" }
        );
        outcomes_mut(partial, kind).push(outcome);
        save(partial, &inp.partial_path)?;
        progress.advance(&msg);
        run += 1;
    }
    let list = outcomes_mut(partial, kind);
    list.sort_by_key(|o| o.index);
    let kept = list.iter().filter(|o| o.trial.kept).count();
    progress.finish(&format!("{kept} of {} answered right", list.len()));
    Ok(StageTiming {
        stage: kind.stage(),
        seconds: start.elapsed().as_secs_f64(),
        run,
        restored,
    })
}

fn run_samples<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    partial: &mut Partial,
    progress: &mut dyn Progress,
    mine: &dyn Fn(usize) -> bool,
) -> Result<StageTiming> {
    let c = &inp.config;
    let done: HashSet<usize> = partial.samples.iter().map(|s| s.index).collect();
    let units: Vec<usize> = (0..c.samples).filter(|&i| mine(i)).collect();
    let restored = units.iter().filter(|i| done.contains(i)).count();
    progress.start("text samples", units.len() as u64, restored as u64);
    let start = Instant::now();
    let mut run = 0;
    for index in units.into_iter().filter(|i| !done.contains(i)) {
        let seed = sub_seed(c.seed, SAMPLE_SALT, index);
        let outcome = sample::run_sample(inp, index, seed)?;
        partial.samples.push(outcome);
        save(partial, &inp.partial_path)?;
        let source = &inp.texts[index % inp.texts.len()].source;
        progress.advance(&format!("sample {index} ({source})"));
        run += 1;
    }
    partial.samples.sort_by_key(|s| s.index);
    progress.finish(&format!(
        "{} samples of {} tokens",
        c.samples, c.sample_tokens
    ));
    Ok(StageTiming {
        stage: "text samples",
        seconds: start.elapsed().as_secs_f64(),
        run,
        restored,
    })
}
