//! PoD post-training (`docs/papers/pod.md` §2.2): after layers are grouped
//! into head-wise blocks, the model is lightly trained so it works well when distant tokens use
//! the block's shared attention scores.
//!
//! [`pod_attention`] is eq. 3–4 in a parallel, differentiable form; [`config`] the run's settings
//! and schedule; [`trainer`] the loop (AdamW, cosine with warm-up, accumulation, clipping,
//! seeded); [`checkpoint`] atomic, resumable checkpoints whose weights `generate --weights` loads; [`eval`] held-out perplexities and the
//! run's report; [`window`] the `n_s`, `n_r` sidecar beside the trained weights.

pub mod checkpoint;
pub mod config;
pub mod eval;
pub mod pod_attention;
pub mod trainer;
pub mod window;

pub use checkpoint::{load_weights, save_weights};
pub use config::{learning_rate, TrainConfig, Trainable};
pub use eval::{perplexity, Perplexities, Perplexity, TrainReport};
pub use pod_attention::{forward, next_token_loss, PodLayout};
pub use trainer::{train, StepReport, TrainOutcome};
pub use window::{load_window, save_window, TrainedWindow};

/// The training backend: autodiff over the selected backend.
pub type TrainBackend = burn::backend::Autodiff<crate::backend::Selected>;

/// The inference copy of a module being trained (no autodiff graph).
pub fn inference<B: burn::tensor::backend::AutodiffBackend>(
    tr: &crate::model::Transformer<B>,
) -> crate::model::Transformer<B::InnerBackend> {
    use burn::module::AutodiffModule;
    tr.valid()
}

/// Splits `tokens` into training tokens and the last `held_out` tokens.
pub fn split_held_out(tokens: &[u32], held_out: usize) -> (&[u32], &[u32]) {
    tokens.split_at(tokens.len().saturating_sub(held_out))
}

#[cfg(test)]
mod tests;
