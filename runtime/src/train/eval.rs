//! Built-in evaluation of PoD post-training: held-out perplexity under FullKV, under
//! PoD attention before training and after it, and the run's JSON report.

use burn::tensor::backend::Backend;
use burn::tensor::ElementConversion;
use serde::{Deserialize, Serialize};

use super::config::TrainConfig;
use super::pod_attention::{forward, next_token_loss, PodLayout};
use crate::error::{Error, Result};
use crate::model::rope::Rope;
use crate::model::Transformer;

/// Perplexity over held-out windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Perplexity {
    /// Windows of `seq_len + 1` tokens evaluated.
    pub windows: usize,
    /// Next-token predictions scored.
    pub tokens: usize,
    /// Mean negative log-likelihood (nats per token).
    pub nll: f64,
    /// `exp(nll)`.
    pub ppl: f64,
}

/// Held-out perplexity of `tr` under `layout`: the first `max_windows` consecutive windows of
/// `seq_len + 1` tokens of `tokens`, each scored on its `seq_len` next-token predictions.
pub fn perplexity<B: Backend>(
    tr: &Transformer<B>,
    rope: &Rope<B>,
    layout: &PodLayout,
    tokens: &[u32],
    seq_len: usize,
    max_windows: usize,
) -> Result<Perplexity> {
    let windows = (tokens.len().saturating_sub(1) / seq_len).min(max_windows);
    if windows == 0 {
        return Err(Error::Request(format!(
            "held-out text has {} tokens, fewer than one window of {}",
            tokens.len(),
            seq_len + 1
        )));
    }
    let mut sum = 0f64;
    for w in 0..windows {
        let seq = &tokens[w * seq_len..w * seq_len + seq_len + 1];
        let logits = forward(tr, rope, layout, &seq[..seq_len])?;
        let loss: f32 = next_token_loss(logits, &seq[1..]).into_scalar().elem();
        sum += f64::from(loss);
    }
    let nll = sum / windows as f64;
    Ok(Perplexity {
        windows,
        tokens: windows * seq_len,
        nll,
        ppl: nll.exp(),
    })
}

/// The three held-out perplexities: FullKV, PoD before and PoD after training.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Perplexities {
    /// (a) FullKV attention, the model as loaded.
    pub full_kv: Perplexity,
    /// (b) PoD attention before training.
    pub pod_before: Perplexity,
    /// (c) PoD attention after training.
    pub pod_after: Perplexity,
    /// (d) FullKV attention after training: the control that tells how much of (c)'s gain is
    /// adaptation to the training text rather than to PoD's shared attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_kv_after: Option<Perplexity>,
}

/// The report of a run, saved as JSON (`results/pod-train.json` for the real run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainReport {
    /// Model file name and SHA-256.
    pub model: String,
    /// Backend name.
    pub backend: String,
    /// Training settings.
    pub config: TrainConfig,
    /// PoD proximal window `n_s`, `n_r` and blocks per query head.
    pub sinks: usize,
    /// Recent proximal tokens `n_r`.
    pub recent: usize,
    /// Blocks per query head (from the plan).
    pub blocks: Vec<Vec<[usize; 2]>>,
    /// Training and held-out token counts.
    pub train_tokens: usize,
    /// Held-out tokens.
    pub held_out_tokens: usize,
    /// Steps done in all, and the step this process resumed from.
    pub steps_done: usize,
    /// Step the process resumed from (0: fresh).
    pub resumed_from: usize,
    /// Training wall-clock of this process, seconds.
    pub train_wall_s: f64,
    /// Tokens per second of training in this process.
    pub train_tokens_per_s: f64,
    /// Mean loss of every step.
    pub losses: Vec<f32>,
    /// (a), (b), (c).
    pub perplexity: Perplexities,
    /// Weights file written.
    pub weights: String,
}
