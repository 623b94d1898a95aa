//! The PoD post-training loop (`docs/papers/pod.md` §2.2): next-token loss
//! under PoD attention ([`super::pod_attention`]), AdamW, cosine schedule with linear warm-up,
//! gradient accumulation, global-norm clipping, attention-only or all block parameters, seeded.
//!
//! The library does not print: each optimiser step is reported to a callback (the CLI draws the
//! progress bar). Sequences are drawn at random offsets of the training tokens from a generator
//! seeded by `(seed, step)`, so a run resumed from a checkpoint draws what the uninterrupted run
//! would have drawn.

use std::path::Path;
use std::time::Instant;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::optim::{AdamWConfig, GradientsAccumulator, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor};

use super::checkpoint::{self, TrainState};
use super::config::{learning_rate, Optim, TrainConfig, Trainable};
use super::pod_attention::{forward, next_token_loss, PodLayout};
use crate::error::{Error, Result};
use crate::generate::SplitMix64;
use crate::model::linear::Linear;
use crate::model::rope::Rope;
use crate::model::Transformer;

/// One optimiser step, for the progress display.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// Steps done (1-based).
    pub step: usize,
    /// Steps in all.
    pub steps: usize,
    /// Mean loss of the step's sequences (nats per token).
    pub loss: f32,
    /// Learning rate used.
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f32,
    /// Tokens trained on in this process (not counting steps before a resume).
    pub tokens: usize,
    /// Seconds since this process started training.
    pub elapsed_s: f64,
}

/// Marks the parameters of `which` trainable and every other one frozen.
pub fn select_trainable<B: AutodiffBackend>(
    tr: Transformer<B>,
    which: Trainable,
) -> Transformer<B> {
    let mut tr = tr.no_grad();
    let on = |l: &mut Linear<B>| l.weight = l.weight.take().map(|p| p.set_require_grad(true));
    let on1 = |p: Param<Tensor<B, 1>>| p.set_require_grad(true);
    for b in &mut tr.blocks {
        on(&mut b.attention.wqkv);
        on(&mut b.attention.wo);
        if which == Trainable::All {
            on(&mut b.ffn.w_gate);
            on(&mut b.ffn.w_up);
            on(&mut b.ffn.w_down);
            let norms = [
                &mut b.attn_norm,
                &mut b.ffn_norm,
                &mut b.post_attn_norm,
                &mut b.post_ffn_norm,
            ];
            for n in norms.into_iter().flatten() {
                n.gamma = on1(n.gamma.clone());
            }
        }
    }
    if which == Trainable::All {
        tr.norm.gamma = on1(tr.norm.gamma.clone());
    }
    tr
}

/// Sequence `k` of optimiser step `step`: `seq_len + 1` tokens at a seeded random offset.
pub fn draw<'a>(tokens: &'a [u32], cfg: &TrainConfig, step: usize, k: usize) -> &'a [u32] {
    let n = cfg.seq_len + 1;
    let mut rng = SplitMix64::new(
        cfg.seed ^ (step as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((k as u64) << 48),
    );
    let start = (rng.next_u64() % (tokens.len() - n + 1) as u64) as usize;
    &tokens[start..start + n]
}

/// Collects parameter ids and ranks in visiting order (stable for a given module layout).
struct Ids(Vec<(ParamId, usize)>);

impl<B: Backend> ModuleVisitor<B> for Ids {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push((param.id, D));
    }
}

/// The float parameter ids of `module` and their ranks, in visiting order.
pub fn param_ids<B: Backend, M: Module<B>>(module: &M) -> Vec<(ParamId, usize)> {
    let mut ids = Ids(Vec::new());
    module.visit(&mut ids);
    ids.0
}

/// Squared L2 norm of the gradient of `id` (rank `D`), if it has one.
fn grad_sq<B: Backend, const D: usize>(grads: &GradientsParams, id: ParamId) -> Option<f64> {
    let g = grads.get::<B, D>(id)?;
    Some(f64::from(
        g.powi_scalar(2).sum().into_scalar().elem::<f32>(),
    ))
}

/// Multiplies the gradient of `id` (rank `D`) by `scale`.
fn scale_grad<B: Backend, const D: usize>(grads: &mut GradientsParams, id: ParamId, scale: f64) {
    if let Some(g) = grads.remove::<B, D>(id) {
        grads.register(id, g.mul_scalar(scale));
    }
}

/// Scales every gradient so their global L2 norm is at most `max` (0: no clip); returns the
/// norm before clipping.
fn clip_global_norm<B: AutodiffBackend>(
    mut grads: GradientsParams,
    ids: &[(ParamId, usize)],
    max: f32,
) -> (GradientsParams, f32) {
    let sq: f64 = ids
        .iter()
        .filter_map(|&(id, rank)| match rank {
            1 => grad_sq::<B::InnerBackend, 1>(&grads, id),
            2 => grad_sq::<B::InnerBackend, 2>(&grads, id),
            _ => None,
        })
        .sum();
    let norm = sq.sqrt() as f32;
    if max > 0.0 && norm > max {
        let scale = f64::from(max / norm);
        for &(id, rank) in ids {
            match rank {
                1 => scale_grad::<B::InnerBackend, 1>(&mut grads, id, scale),
                2 => scale_grad::<B::InnerBackend, 2>(&mut grads, id, scale),
                _ => {}
            }
        }
    }
    (grads, norm)
}

/// What [`train`] hands back.
#[derive(Debug)]
pub struct TrainOutcome<B: AutodiffBackend> {
    /// The trained module.
    pub transformer: Transformer<B>,
    /// Mean loss of each optimiser step, from step 0 (resumed runs include the earlier steps).
    pub losses: Vec<f32>,
    /// Seconds this process spent training.
    pub wall_s: f64,
    /// The step training resumed from (0 for a fresh run).
    pub resumed_from: usize,
}

/// Trains `tr` on `tokens` under PoD `layout`. With `ckpt_dir`, checkpoints are written there
/// (atomically, every `cfg.checkpoint_every` steps, at the end, and when `on_step` returns
/// `false` to stop early) and a checkpoint found there is resumed from.
pub fn train<B: AutodiffBackend>(
    tr: Transformer<B>,
    rope: &Rope<B>,
    layout: &PodLayout,
    tokens: &[u32],
    cfg: &TrainConfig,
    ckpt_dir: Option<&Path>,
    on_step: &mut dyn FnMut(&StepReport) -> bool,
) -> Result<TrainOutcome<B>> {
    if tokens.len() <= cfg.seq_len + 1 || cfg.accum == 0 || cfg.steps == 0 {
        return Err(Error::Request(format!(
            "training needs more than seq_len + 1 = {} tokens (have {}), accum ≥ 1 and steps ≥ 1",
            cfg.seq_len + 1,
            tokens.len()
        )));
    }
    if !tr.is_dense() {
        return Err(Error::Request(
            "training needs f32 weights: load the model with WeightStorage::Dense".into(),
        ));
    }
    let (mut tr, mut optim, state) = resume(tr, cfg, ckpt_dir)?;
    let ranked = param_ids(&tr);
    let ids: Vec<ParamId> = ranked.iter().map(|p| p.0).collect();
    let mut state = state.unwrap_or_else(|| TrainState::fresh(cfg, &ids));
    state.param_ids = ids.iter().map(ParamId::val).collect();
    let resumed_from = state.step;
    let start = Instant::now();
    let mut tokens_done = 0;
    for step in state.step..cfg.steps {
        let lr = learning_rate(cfg, step);
        let mut acc = GradientsAccumulator::<Transformer<B>>::new();
        let mut loss_sum = 0f32;
        for k in 0..cfg.accum {
            let seq = draw(tokens, cfg, step, k);
            let logits = forward(&tr, rope, layout, &seq[..cfg.seq_len])?;
            let loss = next_token_loss(logits, &seq[1..]);
            loss_sum += loss.clone().into_scalar().elem::<f32>();
            let grads = loss.div_scalar(cfg.accum as f64).backward();
            acc.accumulate(&tr, GradientsParams::from_grads(grads, &tr));
            tokens_done += cfg.seq_len;
        }
        let (grads, grad_norm) = clip_global_norm::<B>(acc.grads(), &ranked, cfg.clip_norm);
        tr = optim.step(lr, tr, grads);
        let loss = loss_sum / cfg.accum as f32;
        state.losses.push(loss);
        state.step = step + 1;
        let go_on = on_step(&StepReport {
            step: step + 1,
            steps: cfg.steps,
            loss,
            lr,
            grad_norm,
            tokens: tokens_done,
            elapsed_s: start.elapsed().as_secs_f64(),
        });
        let due = cfg.checkpoint_every > 0 && state.step % cfg.checkpoint_every == 0;
        if let Some(dir) = ckpt_dir.filter(|_| due || !go_on || state.step == cfg.steps) {
            checkpoint::save(dir, &tr, optim.to_record(), &state)?;
        }
        if !go_on {
            break;
        }
    }
    Ok(TrainOutcome {
        transformer: tr,
        losses: state.losses,
        wall_s: start.elapsed().as_secs_f64(),
        resumed_from,
    })
}

/// The trainable model, its optimiser and the training state: from the latest checkpoint in
/// `ckpt_dir` when there is one (checked against `cfg`), else fresh (state `None`).
fn resume<B: AutodiffBackend>(
    tr: Transformer<B>,
    cfg: &TrainConfig,
    ckpt_dir: Option<&Path>,
) -> Result<(Transformer<B>, Optim<B>, Option<TrainState>)> {
    let device = tr.device();
    let tr = select_trainable(tr, cfg.trainable);
    let optim: Optim<B> = AdamWConfig::new()
        .with_weight_decay(cfg.weight_decay)
        .init();
    let found = match ckpt_dir {
        Some(dir) => checkpoint::latest::<B>(dir, &device)?,
        None => None,
    };
    let Some(ck) = found else {
        return Ok((tr, optim, None));
    };
    ck.state.check_resumable(cfg)?;
    let tr = select_trainable(checkpoint::load_weights(tr, &ck.weights)?, cfg.trainable);
    // Ids are read after loading: whether the store keeps or restores them, these are the ids
    // the optimiser will see.
    let ids: Vec<ParamId> = param_ids(&tr).into_iter().map(|p| p.0).collect();
    let record = checkpoint::remap_ids(ck.optimizer, &ck.state.param_ids, &ids)?;
    Ok((tr, optim.load_record(record), Some(ck.state)))
}
