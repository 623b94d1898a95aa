//! What a PoD post-training run is told (`docs/papers/pod.md` §2.2): which parameters train,
//! the run's settings ([`TrainConfig`], also stored in every checkpoint so a resume can check
//! them), the learning-rate schedule they describe and the optimiser's type.

use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::AdamW;
use serde::{Deserialize, Serialize};

use crate::model::Transformer;

/// Which parameters train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trainable {
    /// Attention projections (`wqkv`, `wo`) of every layer.
    Attention,
    /// Every block parameter (attention, feed-forward, norms) and the final norm. The token
    /// embedding stays frozen: with tied embeddings the model holds it twice (`embed` and its
    /// transpose `output`), and training both would untie them.
    All,
}

/// Settings of one training run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Tokens per sequence (the loss covers `seq_len` next-token predictions).
    pub seq_len: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Sequences per optimiser step (gradient accumulation).
    pub accum: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warm-up steps.
    pub warmup: usize,
    /// The cosine decays to `lr · min_lr_ratio`.
    pub min_lr_ratio: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f32,
    /// Global gradient-norm clip (0: none).
    pub clip_norm: f32,
    /// Which parameters train.
    pub trainable: Trainable,
    /// Seed of the sequence draws.
    pub seed: u64,
    /// Write a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: usize,
}

/// Learning rate at optimiser step `step` (0-based): linear warm-up to `lr`, then a cosine to
/// `lr · min_lr_ratio` at the last step.
pub fn learning_rate(cfg: &TrainConfig, step: usize) -> f64 {
    if step < cfg.warmup {
        return cfg.lr * (step + 1) as f64 / cfg.warmup as f64;
    }
    let span = cfg.steps.saturating_sub(cfg.warmup).max(1) as f64;
    let progress = ((step - cfg.warmup) as f64 / span).min(1.0);
    let min = cfg.lr * cfg.min_lr_ratio;
    min + (cfg.lr - min) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
}

/// The optimiser: AdamW through burn's adaptor.
pub type Optim<B> = OptimizerAdaptor<AdamW, Transformer<B>, B>;
