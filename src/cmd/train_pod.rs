//! `kvplan train-pod`: PoD post-training (`docs/papers/pod.md` §2.2) of the
//! model under its plan's head-wise layer blocks, on the project's real text (Paul Graham essays
//! and Gutenberg Shakespeare, `kvplan data fetch`), with held-out perplexity of FullKV, PoD before
//! and PoD after training saved as JSON.
//!
//! Checkpoints go to `--out` (atomic, resumed from when the same command runs again); the
//! trained weights end in `<out>/pod-trained.bpk`, a burnpack file for `generate --weights`, with
//! the `n_s`, `n_r` they were trained with beside them (`pod-trained.bpk.json`), which `kvplan
//! eval --weights` reads to run PoD only at that window.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use kvplan_planner::{Method, Plan, PodSection};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::rope::Rope;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;
use kvplan_runtime::train::{
    self, perplexity, Perplexities, PodLayout, StepReport, TrainBackend, TrainConfig, TrainReport,
    Trainable,
};

use super::model_args::{self, ModelArgs};

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

/// Training and held-out tokens: each corpus tokenised (documents joined by `<|endoftext|>`),
/// its last `held_out / 2` tokens held out.
fn tokens(args: &TrainPodArgs, tok: &Tokenizer) -> anyhow::Result<(Vec<u32>, Vec<u32>)> {
    let dir = kvplan_common::paths::data_dir(args.data_dir.as_deref());
    let pip = kvplan_common::fetch::Pip::default();
    let (pg, sh) = kvplan_common::data::corpora(&dir, &pip, &mut |l| eprintln!("kvplan: {l}"))?;
    let (mut train_ids, mut held) = (Vec::new(), Vec::new());
    for corpus in [pg, sh] {
        let mut ids = Vec::new();
        for (name, text) in &corpus.documents {
            ids.extend(
                tok.encode(text)
                    .with_context(|| format!("tokenizing {name}"))?,
            );
            ids.push(0); // <|endoftext|>
        }
        let (a, b) = train::split_held_out(&ids, args.held_out_tokens / 2);
        train_ids.extend_from_slice(a);
        held.extend_from_slice(b);
    }
    Ok((train_ids, held))
}

fn plan_for(args: &TrainPodArgs, path: &Path, model: &Model<TrainBackend>) -> anyhow::Result<Plan> {
    let identity = model_identity(path, &model.config)?;
    Ok(model_args::load_plan(args.plan.as_deref(), &identity, path)?.0)
}

fn progress(steps: usize) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "train-pod [{bar:30}] {pos}/{len} {elapsed_precise} ETA {eta} {wide_msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    ProgressBar::new(steps as u64).with_style(style)
}

/// One training step on the progress bar; without a terminal (a log file, CI) one plain line per
/// step with the ETA. Never stops the run.
fn show_step(bar: &ProgressBar, cfg: &TrainConfig, r: &StepReport) -> bool {
    let msg = format!(
        "loss {:.4} lr {:.2e} |g| {:.2} {:.0} tok/s",
        r.loss,
        r.lr,
        r.grad_norm,
        r.tokens as f64 / r.elapsed_s.max(1e-9)
    );
    if bar.is_hidden() {
        let done = (r.tokens / (cfg.seq_len * cfg.accum)).max(1) as f64;
        let eta = r.elapsed_s / done * (r.steps - r.step) as f64;
        eprintln!("  step {}/{} {msg} ETA {eta:.0}s", r.step, cfg.steps);
    }
    bar.set_position(r.step as u64);
    bar.set_message(msg);
    true
}

/// Writes the training report (JSON) atomically to `out`.
fn write_report(report: &TrainReport, out: PathBuf) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)? + "\n";
    kvplan_common::fs::write_atomic(&out, text.as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "kvplan: report {}, weights {}",
        out.display(),
        report.weights
    );
    Ok(())
}

/// The tokenizer and the trainable model of the GGUF at `path` (PoD runs on `llama` only).
fn load_trainable(path: &Path) -> anyhow::Result<(Tokenizer, Model<TrainBackend>)> {
    let device = &backend::device();
    let gguf = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let model = Model::<TrainBackend>::from_gguf(&gguf, device)
        .with_context(|| format!("loading {}", path.display()))?;
    kvplan_runtime::press::registry::refuse_pod_on(&model.config.architecture)?;
    Ok((tok, model))
}

/// PoD's layout under the plan's blocks, FullKV's layout (the control) and n_s.
fn layouts(
    args: &TrainPodArgs,
    pod: &PodSection,
    c: &kvplan_runtime::model::ModelConfig,
) -> anyhow::Result<(PodLayout, PodLayout, usize)> {
    let sinks = args.sinks.unwrap_or(pod.sinks);
    if args.seq_len <= 2 * (sinks + args.recent) {
        bail!(
            "--seq-len {} leaves too little distant text for n_s + n_r = {}",
            args.seq_len,
            sinks + args.recent
        );
    }
    let layout = PodLayout::new(&pod.blocks, c.geometry.layers, sinks, args.recent)?;
    let full = PodLayout::full_kv(c.geometry.layers, c.geometry.q_heads);
    Ok((layout, full, sinks))
}

/// Runs `kvplan train-pod`.
pub fn run(args: TrainPodArgs) -> anyhow::Result<()> {
    let path = args.model.resolve()?;
    let (tok, model) = load_trainable(&path)?;
    let device = backend::device();
    let plan = plan_for(&args, &path, &model)?;
    let Some(pod) = plan.sections.get::<PodSection>(Method::Pod) else {
        bail!("the plan has no PoD section");
    };
    let c = &model.config;
    let (layout, full, sinks) = layouts(&args, pod, c)?;
    let (train_ids, held) = tokens(&args, &tok)?;
    let (n_train, n_held, n_r) = (train_ids.len(), held.len(), args.recent);
    eprintln!("kvplan: {n_train} training tokens, {n_held} held out; n_s = {sinks}, n_r = {n_r}");
    let cfg = args.config();
    let rope_eval = Rope::<Selected>::new(c.geometry.head_dim, c.rope_theta, args.seq_len, &device);
    let rope_train =
        Rope::<TrainBackend>::new(c.geometry.head_dim, c.rope_theta, args.seq_len, &device);
    let (seq, windows) = (args.seq_len, args.eval_windows);
    let eval = |tr: &kvplan_runtime::model::Transformer<Selected>, layout: &PodLayout| {
        perplexity(tr, &rope_eval, layout, &held, seq, windows)
    };
    let before = train::inference(&model.transformer);
    let full_kv = eval(&before, &full)?;
    let pod_before = eval(&before, &layout)?;
    drop(before);
    eprintln!(
        "kvplan: held-out perplexity FullKV {:.3}, PoD before training {:.3}",
        full_kv.ppl, pod_before.ppl
    );
    let bar = progress(cfg.steps);
    let outcome = train::train(
        model.transformer,
        &rope_train,
        &layout,
        &train_ids,
        &cfg,
        Some(&args.out),
        &mut |r| show_step(&bar, &cfg, r),
    )?;
    bar.finish();
    let after = train::inference(&outcome.transformer);
    let pod_after = eval(&after, &layout)?;
    let full_kv_after = eval(&after, &full)?;
    let weights = args.out.join("pod-trained.bpk");
    train::save_weights(&after, &weights)?;
    train::save_window(
        &weights,
        &train::TrainedWindow {
            sinks,
            recent: args.recent,
        },
    )?;
    eprintln!(
        "kvplan: held-out perplexity FullKV {:.3}, PoD before {:.3}, PoD after {:.3}; FullKV \
         after training {:.3}",
        full_kv.ppl, pod_before.ppl, pod_after.ppl, full_kv_after.ppl
    );
    let trained_tokens = (cfg.steps - outcome.resumed_from) * cfg.seq_len * cfg.accum;
    let report = TrainReport {
        model: format!("{} ({})", plan.model.name, plan.model.gguf_sha256),
        backend: backend::name().to_string(),
        config: cfg,
        sinks,
        recent: args.recent,
        blocks: pod.blocks.clone(),
        train_tokens: train_ids.len(),
        held_out_tokens: held.len(),
        steps_done: outcome.losses.len(),
        resumed_from: outcome.resumed_from,
        train_wall_s: outcome.wall_s,
        train_tokens_per_s: trained_tokens as f64 / outcome.wall_s.max(1e-9),
        losses: outcome.losses,
        perplexity: Perplexities {
            full_kv,
            pod_before,
            pod_after,
            full_kv_after: Some(full_kv_after),
        },
        weights: weights.display().to_string(),
    };
    write_report(
        &report,
        args.report.unwrap_or_else(|| args.out.join("report.json")),
    )?;
    Ok(())
}
