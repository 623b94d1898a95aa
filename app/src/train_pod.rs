//! PoD post-training (`docs/papers/pod.md` §2.2) of the model under its plan's
//! head-wise layer blocks, on the project's real text (Paul Graham essays and Gutenberg
//! Shakespeare), with held-out perplexity of FullKV, PoD before and PoD after training.
//!
//! Checkpoints go to the request's `out` folder (atomic, resumed from when the same request runs
//! again); the trained weights end in `<out>/pod-trained.bpk`, a burnpack file for `generate
//! --weights`, with the `n_s`, `n_r` they were trained with beside them
//! (`pod-trained.bpk.json`), which `kvplan eval --weights` reads to run PoD only at that window.
//! The report (JSON) goes to `report`, else `<out>/report.json`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kvplan_planner::{Method, Plan, PodSection};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::rope::Rope;
use kvplan_runtime::model::{Model, ModelConfig, Transformer};
use kvplan_runtime::tokenizer::Tokenizer;
use kvplan_runtime::train::{
    self, perplexity, Perplexities, PodLayout, StepReport, TrainBackend, TrainConfig, TrainOutcome,
    TrainReport,
};

use crate::model::{load_plan, ModelSource};

/// A PoD training run.
#[derive(Debug, Clone)]
pub struct TrainPodRequest {
    /// The plan whose PoD blocks to train for; `None`: the model's plan.
    pub plan: Option<PathBuf>,
    /// Checkpoint folder; a checkpoint there is resumed from.
    pub out: PathBuf,
    /// Report JSON; `None`: `<out>/report.json`.
    pub report: Option<PathBuf>,
    /// Data folder; `None`: `$KVPLAN_DATA`, else the per-user data folder.
    pub data_dir: Option<PathBuf>,
    /// The optimiser's settings.
    pub train: TrainConfig,
    /// n_s, initial proximal tokens; `None`: the plan's.
    pub sinks: Option<usize>,
    /// n_r, recent proximal tokens.
    pub recent: usize,
    /// Held-out tokens (the tail of each corpus), never trained on.
    pub held_out_tokens: usize,
    /// Held-out windows of `seq_len` evaluated for each perplexity.
    pub eval_windows: usize,
    /// The model.
    pub model: ModelSource,
}

/// What the caller shows of the training loop.
pub trait TrainProgress {
    /// One optimiser step done.
    fn step(&mut self, cfg: &TrainConfig, r: &StepReport);
    /// The loop is over.
    fn finish(&mut self);
}

/// Trains as `req` asks; returns the report, also written as JSON.
pub fn train_pod(
    req: &TrainPodRequest,
    progress: &mut dyn TrainProgress,
) -> anyhow::Result<TrainReport> {
    let path = req.model.resolve()?;
    let (tok, model) = load_trainable(&path)?;
    let plan = plan_for(req, &path, &model)?;
    let Some(pod) = plan.sections.get::<PodSection>(Method::Pod) else {
        bail!("the plan has no PoD section");
    };
    let (layout, full, sinks) = layouts(req, pod, &model.config)?;
    let (train_ids, held) = tokens(req, &tok)?;
    let (n_train, n_held, n_r) = (train_ids.len(), held.len(), req.recent);
    eprintln!("kvplan: {n_train} training tokens, {n_held} held out; n_s = {sinks}, n_r = {n_r}");
    let eval = Heldout::new(req, &model.config, &held);
    let before = train::inference(&model.transformer);
    let full_kv = eval.perplexity(&before, &full)?;
    let pod_before = eval.perplexity(&before, &layout)?;
    drop(before);
    eprintln!(
        "kvplan: held-out perplexity FullKV {:.3}, PoD before training {:.3}",
        full_kv.ppl, pod_before.ppl
    );
    let outcome = train_loop(req, model, &layout, &train_ids, progress)?;
    let after = train::inference(&outcome.transformer);
    let pod_after = eval.perplexity(&after, &layout)?;
    let full_kv_after = eval.perplexity(&after, &full)?;
    let weights = save(req, &after, sinks)?;
    eprintln!(
        "kvplan: held-out perplexity FullKV {:.3}, PoD before {:.3}, PoD after {:.3}; FullKV \
         after training {:.3}",
        full_kv.ppl, pod_before.ppl, pod_after.ppl, full_kv_after.ppl
    );
    let perplexity = Perplexities {
        full_kv,
        pod_before,
        pod_after,
        full_kv_after: Some(full_kv_after),
    };
    let trained = Trained {
        outcome,
        perplexity,
        weights,
    };
    let report = report_of(req, &plan, pod, sinks, (n_train, n_held), trained);
    let out = req.report.clone();
    write_report(&report, out.unwrap_or_else(|| req.out.join("report.json")))?;
    Ok(report)
}

/// What training left: the loop's outcome, the four perplexities, the weights' file.
struct Trained {
    outcome: TrainOutcome<TrainBackend>,
    perplexity: Perplexities,
    weights: PathBuf,
}

/// The run's report; `tokens`: (training, held-out) tokens.
fn report_of(
    req: &TrainPodRequest,
    plan: &Plan,
    pod: &PodSection,
    sinks: usize,
    tokens: (usize, usize),
    t: Trained,
) -> TrainReport {
    let cfg = &req.train;
    let trained_tokens = (cfg.steps - t.outcome.resumed_from) * cfg.seq_len * cfg.accum;
    TrainReport {
        model: format!("{} ({})", plan.model.name, plan.model.gguf_sha256),
        backend: backend::name().to_string(),
        config: cfg.clone(),
        sinks,
        recent: req.recent,
        blocks: pod.blocks.clone(),
        train_tokens: tokens.0,
        held_out_tokens: tokens.1,
        steps_done: t.outcome.losses.len(),
        resumed_from: t.outcome.resumed_from,
        train_wall_s: t.outcome.wall_s,
        train_tokens_per_s: trained_tokens as f64 / t.outcome.wall_s.max(1e-9),
        losses: t.outcome.losses,
        perplexity: t.perplexity,
        weights: t.weights.display().to_string(),
    }
}

/// The training loop under `layout`, checkpointing into the request's folder; each step shown
/// on `progress`.
fn train_loop(
    req: &TrainPodRequest,
    model: Model<TrainBackend>,
    layout: &PodLayout,
    train_ids: &[u32],
    progress: &mut dyn TrainProgress,
) -> anyhow::Result<TrainOutcome<TrainBackend>> {
    let cfg = &req.train;
    let (c, device) = (&model.config, backend::device());
    // The model's own frequencies (scaling, per-layer bases, NoPE layers) at the trained length.
    let rope = Rope::<TrainBackend>::from_set(&c.rope_for(cfg.seq_len), cfg.seq_len, &device);
    let outcome = train::train(
        model.transformer,
        &rope,
        layout,
        train_ids,
        cfg,
        Some(&req.out),
        &mut |r| {
            progress.step(cfg, r);
            true
        },
    )?;
    progress.finish();
    Ok(outcome)
}

/// Held-out perplexity under a layout, on the inference backend.
struct Heldout<'a> {
    rope: Rope<Selected>,
    held: &'a [u32],
    seq_len: usize,
    windows: usize,
}

impl<'a> Heldout<'a> {
    fn new(req: &TrainPodRequest, c: &ModelConfig, held: &'a [u32]) -> Self {
        let seq_len = req.train.seq_len;
        let rope = Rope::from_set(&c.rope_for(seq_len), seq_len, &backend::device());
        Heldout {
            rope,
            held,
            seq_len,
            windows: req.eval_windows,
        }
    }

    fn perplexity(
        &self,
        tr: &Transformer<Selected>,
        layout: &PodLayout,
    ) -> anyhow::Result<train::Perplexity> {
        Ok(perplexity(
            tr,
            &self.rope,
            layout,
            self.held,
            self.seq_len,
            self.windows,
        )?)
    }
}

/// Training and held-out tokens: each corpus tokenised (documents joined by `<|endoftext|>`),
/// its last `held_out / 2` tokens held out.
fn tokens(req: &TrainPodRequest, tok: &Tokenizer) -> anyhow::Result<(Vec<u32>, Vec<u32>)> {
    let dir = kvplan_common::paths::data_dir(req.data_dir.as_deref());
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
        let (a, b) = train::split_held_out(&ids, req.held_out_tokens / 2);
        train_ids.extend_from_slice(a);
        held.extend_from_slice(b);
    }
    Ok((train_ids, held))
}

fn plan_for(
    req: &TrainPodRequest,
    path: &Path,
    model: &Model<TrainBackend>,
) -> anyhow::Result<Plan> {
    let identity = model_identity(path, &model.config)?;
    Ok(load_plan(req.plan.as_deref(), &identity, path)?.0)
}

/// The tokenizer and the trainable model of the GGUF at `path` (PoD runs on `llama` only).
fn load_trainable(path: &Path) -> anyhow::Result<(Tokenizer, Model<TrainBackend>)> {
    let device = &backend::device();
    let gguf = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let model = Model::<TrainBackend>::from_gguf(&gguf, device)
        .with_context(|| format!("loading {}", path.display()))?;
    kvplan_runtime::press::from_plan::refuse_pod_on_windows(&model.config)?;
    Ok((tok, model))
}

/// PoD's layout under the plan's blocks, FullKV's layout (the control) and n_s.
fn layouts(
    req: &TrainPodRequest,
    pod: &PodSection,
    c: &ModelConfig,
) -> anyhow::Result<(PodLayout, PodLayout, usize)> {
    let sinks = req.sinks.unwrap_or(pod.sinks);
    if req.train.seq_len <= 2 * (sinks + req.recent) {
        bail!(
            "--seq-len {} leaves too little distant text for n_s + n_r = {}",
            req.train.seq_len,
            sinks + req.recent
        );
    }
    let layout = PodLayout::new(&pod.blocks, c.geometry.layers, sinks, req.recent)?;
    let full = PodLayout::full_kv(c.geometry.layers, c.geometry.q_heads);
    Ok((layout, full, sinks))
}

/// Saves the trained weights and their window into `<out>/pod-trained.bpk`; returns the path.
fn save(
    req: &TrainPodRequest,
    after: &Transformer<Selected>,
    sinks: usize,
) -> anyhow::Result<PathBuf> {
    let weights = req.out.join("pod-trained.bpk");
    train::save_weights(after, &weights)?;
    let window = train::TrainedWindow {
        sinks,
        recent: req.recent,
    };
    train::save_window(&weights, &window)?;
    Ok(weights)
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
