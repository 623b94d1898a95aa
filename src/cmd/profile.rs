//! `kvplan profile`: measure the model's heads and layers, write the profile, then the plan for
//! every method at the default budget, then their figures (docs/design.md, "Data flow"; the
//! pipeline is `kvplan_app::profile`; this file holds the arguments and the terminal side).
//!
//! Progress: one bar per stage with an ETA (plain lines when stderr is not a terminal); at the
//! end the profile's notes and the wall-clock time of every stage, on stderr.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use kvplan_app::profile::{self, Preset, ProfileRequest, ProfileView, Profiled};
use kvplan_profiler::needles::multi::DEFAULT_CANDIDATES;
use kvplan_profiler::needles::{NeedleSet, PromptStyle, DEFAULT_GENERATED_PER_KIND};
use kvplan_profiler::Progress;

use super::model_args::ModelArgs;

/// `--preset`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PresetName {
    Quick,
    Default,
    Paper,
}

/// Arguments of `kvplan profile`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  kvplan profile                       # default: 5 lengths up to 2K, 10 depths, 8 text samples
  kvplan profile --model gemma-3-270m  # writes gemma-3-270m.{profile,plan}.json in ./plans/
                                       # (or the per-user plans folder when there is no ./plans/)
  kvplan profile --preset quick --out /tmp/p.json
  kvplan profile --preset paper        # up to the model's context (8K for SmolLM2)
  kvplan profile --model ./Llama-3.1-8B-Instruct-Q4_K_M.gguf   # any supported GGUF by path")]
pub struct ProfileArgs {
    /// Profile file to write [default: <slug>.profile.json, the slug being the catalog name, in
    /// ./plans/ when that folder exists, else in the per-user plans folder ($KVPLAN_PLANS, else
    /// ~/.cache/kvplan/plans)].
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Plan file to write [default: <model>.plan.json beside the profile].
    #[arg(long, value_name = "FILE")]
    plan_out: Option<PathBuf>,
    /// How much to measure: quick (2 lengths, 2 depths, 2 text samples: a smoke test), default
    /// (5 lengths up to 2K, 10 depths, 8 samples), paper (lengths up to the model's context less
    /// the 50 decode steps of a retrieval-reasoning trial, 16 samples of 4K tokens).
    #[arg(long, value_name = "PRESET", conflicts_with_all = ["quick", "full"])]
    preset: Option<PresetName>,
    /// Short for --preset quick.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// Short for --preset paper.
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
    /// two-candidate ones (4 to 8; 0: the authors' needles only), and of the calibrated ones.
    #[arg(long, value_name = "K", default_value_t = DEFAULT_CANDIDATES)]
    r2_candidates: usize,
    /// Needle examples: a seeded set drawn from templates (retrieval facts; comparisons and
    /// two-hop facts, each asked both ways), kvplan's calibrated variant of it (retrieval-reasoning
    /// needles a small model answers above chance: docs/guides/profile.md) or the seven hand-written
    /// ones.
    #[arg(long, value_enum, default_value = "generated")]
    needles: NeedlesArg,
    /// Examples per kind of the generated needle set.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_GENERATED_PER_KIND)]
    needles_per_kind: usize,
    /// Text samples for the layer analyses (overrides the preset).
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// Tokens of each text sample (overrides the preset: 1,024, or 4,096 under --full, at most
    /// the model's context); a long one measures the layer analyses at that length.
    #[arg(long, value_name = "N")]
    sample_tokens: Option<usize>,
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
    /// Run shard i of n of the needle trials and text samples (every n-th from the i-th) into
    /// `<profile>.shard-i-of-n.partial.json`, resumable; `auto`: i/n from a SLURM job array,
    /// `auto/N`: from a Kubernetes Indexed Job of N completions (docs/commands.md). Once every
    /// shard has finished, the same command without --shard merges them and writes the profile
    /// and plan.
    #[arg(long, value_name = "I/N", default_value = "1/1")]
    shard: kvplan_eval::shard::Shard,
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
    /// kvplan's calibrated retrieval-reasoning variant (two-hop bridge facts, the answer's phrase
    /// checked): for models whose R2 trials on the authors' form are at chance.
    Calibrated,
    Classic,
}

impl From<StyleArg> for PromptStyle {
    fn from(s: StyleArg) -> Self {
        match s {
            StyleArg::Plain => PromptStyle::Plain,
            StyleArg::Chat => PromptStyle::Chat,
        }
    }
}

impl ProfileArgs {
    /// The application layer's request.
    fn request(&self) -> ProfileRequest {
        ProfileRequest {
            out: self.out.clone(),
            plan_out: self.plan_out.clone(),
            preset: match (self.preset, self.quick, self.full) {
                (Some(PresetName::Quick), ..) | (None, true, _) => Preset::Quick,
                (Some(PresetName::Paper), ..) | (None, false, true) => Preset::Full,
                (Some(PresetName::Default), ..) | (None, false, false) => Preset::Standard,
            },
            lengths: self.lengths.clone(),
            depths: self.depths.clone(),
            prompt_style: self.prompt_style.map(PromptStyle::from),
            r2_prompt_style: self.r2_prompt_style.map(PromptStyle::from),
            needles: match self.needles {
                NeedlesArg::Generated => NeedleSet::Generated {
                    per_kind: self.needles_per_kind,
                    wide: self.r2_candidates,
                },
                NeedlesArg::Calibrated => NeedleSet::Calibrated {
                    per_kind: self.needles_per_kind,
                    k: self.r2_candidates,
                },
                NeedlesArg::Classic => NeedleSet::Classic,
            },
            samples: self.samples,
            sample_tokens: self.sample_tokens,
            seed: self.seed,
            budget: self.budget,
            context_len: self.context_len,
            date: self.date.clone(),
            restart: self.restart,
            replace: self.replace,
            figures: self.figures.clone(),
            draw_figures: !self.no_figures,
            data_dir: self.data_dir.clone(),
            model: self.model.source(),
            shard: self.shard,
        }
    }
}

/// Runs `kvplan profile`.
pub fn run(args: ProfileArgs) -> anyhow::Result<()> {
    args.model
        .use_kernels(kvplan_runtime::model::quant::Kernels::F32);
    let mut bars = Bars {
        bar: None,
        stage: String::new(),
        done: 0,
        total: 0,
        started: Instant::now(),
        plain: !std::io::stderr().is_terminal(),
    };
    if let profile::ProfileRun::Shard(done) = profile::run(&args.request(), &mut bars)? {
        // A shard ends without a profile: say how to merge.
        eprintln!("kvplan: {done}");
    }
    Ok(())
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

impl ProfileView for Bars {
    fn profiled(&mut self, done: &Profiled) {
        report(done);
        eprintln!(
            "profile {} and plan {} in place (budget {} per head; dated {date}, which `--date {date}` repeats in a rerun)",
            done.files.profile.display(),
            done.files.plan.display(),
            done.budget,
            date = done.profile.settings.date,
        );
    }
}

/// The profile's notes and the wall-clock time of every stage, on stderr.
fn report(done: &Profiled) {
    if let Some(d) = &done.profile.details {
        for n in &d.notes {
            eprintln!("note: {n}");
        }
    }
    eprintln!("timings (wall clock):");
    eprintln!("  {:<20} {:>8.1} s", "load model and data", done.load_s);
    for t in &done.timings {
        eprintln!(
            "  {:<20} {:>8.1} s  ({} run, {} restored)",
            t.stage, t.seconds, t.run, t.restored
        );
    }
    eprintln!("  {:<20} {:>8.1} s", "plan", done.plan_s);
    eprintln!("  {:<20} {:>8.1} s", "total", done.total_s);
}
