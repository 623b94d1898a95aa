//! `kvplan train-pod`: PoD post-training (`docs/papers/pod.md` §2.2) of the
//! model under its plan's head-wise layer blocks, on the project's real text (Paul Graham essays
//! and Gutenberg Shakespeare, `kvplan data fetch`), with held-out perplexity of FullKV, PoD before
//! and PoD after training saved as JSON.
//!
//! Checkpoints go to `--out` (atomic, resumed from when the same command runs again); the
//! trained weights end in `<out>/pod-trained.bpk`, a burnpack file for `generate --weights`, with
//! the `n_s`, `n_r` they were trained with beside them (`pod-trained.bpk.json`), which `kvplan
//! eval --weights` reads to run PoD only at that window.

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};
use kvplan_app::train_pod::{train_pod, TrainPodRequest, TrainProgress};
use kvplan_runtime::train::{StepReport, TrainConfig, Trainable};

use super::model_args::ModelArgs;

/// Arguments of `kvplan train-pod`.
#[derive(clap::Args, Debug)]
pub struct TrainPodArgs {
    /// Plan whose PoD blocks to train for [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Checkpoint folder; a checkpoint there is resumed from.
    #[arg(long, value_name = "DIR", default_value = "runs/pod-train")]
    pub out: PathBuf,
    /// Report JSON [default: <out>/report.json].
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Data folder [env: KVPLAN_DATA; default: ~/.cache/kvplan/data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Tokens per training sequence (must be well above n_s + n_r).
    #[arg(long, default_value_t = 512)]
    pub seq_len: usize,
    /// Optimiser steps.
    #[arg(long, default_value_t = 64)]
    pub steps: usize,
    /// Sequences per step (gradient accumulation).
    #[arg(long, default_value_t = 4)]
    pub accum: usize,
    /// Peak learning rate.
    #[arg(long, default_value_t = 1e-4)]
    pub lr: f64,
    /// Warm-up steps.
    #[arg(long, default_value_t = 6)]
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak.
    #[arg(long, default_value_t = 0.1)]
    pub min_lr_ratio: f64,
    /// AdamW weight decay.
    #[arg(long, default_value_t = 0.0)]
    pub weight_decay: f32,
    /// Global gradient-norm clip (0: none).
    #[arg(long, default_value_t = 1.0)]
    pub clip_norm: f32,
    /// Which parameters train.
    #[arg(long, value_enum, default_value = "attention")]
    pub trainable: TrainableArg,
    /// Seed of the sequence draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Checkpoint every N steps (0: only at the end).
    #[arg(long, default_value_t = 8)]
    pub checkpoint_every: usize,
    /// n_s, initial proximal tokens [default: the plan's].
    #[arg(long)]
    pub sinks: Option<usize>,
    /// n_r, recent proximal tokens.
    #[arg(long, default_value_t = 112)]
    pub recent: usize,
    /// Held-out tokens (the tail of each corpus), never trained on.
    #[arg(long, default_value_t = 8192)]
    pub held_out_tokens: usize,
    /// Held-out windows of `seq_len` evaluated for each perplexity.
    #[arg(long, default_value_t = 12)]
    pub eval_windows: usize,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// `--trainable`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum TrainableArg {
    /// Attention projections only.
    Attention,
    /// Every block parameter and the final norm (the tied embedding stays frozen).
    All,
}

impl TrainPodArgs {
    /// The application layer's request.
    fn request(&self) -> TrainPodRequest {
        TrainPodRequest {
            plan: self.plan.clone(),
            out: self.out.clone(),
            report: self.report.clone(),
            data_dir: self.data_dir.clone(),
            train: self.config(),
            sinks: self.sinks,
            recent: self.recent,
            held_out_tokens: self.held_out_tokens,
            eval_windows: self.eval_windows,
            model: self.model.source(),
        }
    }

    fn config(&self) -> TrainConfig {
        TrainConfig {
            seq_len: self.seq_len,
            steps: self.steps,
            accum: self.accum,
            lr: self.lr,
            warmup: self.warmup,
            min_lr_ratio: self.min_lr_ratio,
            weight_decay: self.weight_decay,
            clip_norm: self.clip_norm,
            trainable: match self.trainable {
                TrainableArg::Attention => Trainable::Attention,
                TrainableArg::All => Trainable::All,
            },
            seed: self.seed,
            checkpoint_every: self.checkpoint_every,
        }
    }
}

/// Runs `kvplan train-pod`: a progress bar over the steps; notes and the report's path on
/// stderr.
pub fn run(args: TrainPodArgs) -> anyhow::Result<()> {
    let mut bar = Bar(progress(args.steps));
    train_pod(&args.request(), &mut bar)?;
    Ok(())
}

fn progress(steps: usize) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "train-pod [{bar:30}] {pos}/{len} {elapsed_precise} ETA {eta} {wide_msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    ProgressBar::new(steps as u64).with_style(style)
}

/// The training steps on a progress bar; without a terminal (a log file, CI) one plain line per
/// step with the ETA.
struct Bar(ProgressBar);

impl TrainProgress for Bar {
    fn step(&mut self, cfg: &TrainConfig, r: &StepReport) {
        let msg = format!(
            "loss {:.4} lr {:.2e} |g| {:.2} {:.0} tok/s",
            r.loss,
            r.lr,
            r.grad_norm,
            r.tokens as f64 / r.elapsed_s.max(1e-9)
        );
        if self.0.is_hidden() {
            let done = (r.tokens / (cfg.seq_len * cfg.accum)).max(1) as f64;
            let eta = r.elapsed_s / done * (r.steps - r.step) as f64;
            eprintln!("  step {}/{} {msg} ETA {eta:.0}s", r.step, cfg.steps);
        }
        self.0.set_position(r.step as u64);
        self.0.set_message(msg);
    }

    fn finish(&mut self) {
        self.0.finish();
    }
}
