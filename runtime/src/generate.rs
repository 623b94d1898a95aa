//! Generation: one prefill, then one decode step per token; greedy or seeded nucleus sampling;
//! stops at the tokenizer's stop ids (for SmolLM2 `<|im_end|>` = 2 and `<|endoftext|>` = 0).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

use crate::cache::KvCache;
use crate::error::{Error, Result};
/// The next-token logits on the host; defined beside [`Logits`], re-exported for callers.
pub use crate::model::last_row;
use crate::model::{Logits, Model};
use crate::observe::Observer;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Arg-max of the logits (ties: lowest id).
    Greedy,
    /// Softmax at `temperature`, restricted to the smallest set of tokens whose probability
    /// reaches `top_p`, drawn with a generator seeded by `seed`.
    TopP {
        /// Softmax temperature (> 0).
        temperature: f32,
        /// Nucleus mass in (0, 1].
        top_p: f32,
        /// Seed of the draw.
        seed: u64,
    },
}

impl Sampling {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Sampling::Greedy => Ok(()),
            Sampling::TopP {
                temperature, top_p, ..
            } => {
                if !(temperature > 0.0 && temperature.is_finite()) {
                    return Err(Error::Request(format!(
                        "temperature must be a positive number, found {temperature}"
                    )));
                }
                if !(top_p > 0.0 && top_p <= 1.0) {
                    return Err(Error::Request(format!(
                        "top-p must be in (0, 1], found {top_p}"
                    )));
                }
                Ok(())
            }
        }
    }
}

/// Settings of one generation.
#[derive(Debug, Clone)]
pub struct GenerateConfig {
    /// Most tokens to produce (the stop token included).
    pub max_new_tokens: usize,
    /// Token choice.
    pub sampling: Sampling,
    /// Ids that end generation (kept as the last token produced).
    pub stop_ids: Vec<u32>,
}

/// The seeded generator of top-p sampling: kvplan's one SplitMix64 ([`kvplan_common::Rng`]),
/// under the name this crate's callers use.
pub use kvplan_common::Rng as SplitMix64;

/// Index of the largest value (ties: lowest index).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Draws from softmax(`logits`/T) restricted to the top-p nucleus.
pub fn sample_top_p(logits: &[f32], temperature: f32, top_p: f32, rng: &mut SplitMix64) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut probs: Vec<(u32, f64)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, (((l - max) / temperature) as f64).exp()))
        .collect();
    let total: f64 = probs.iter().map(|p| p.1).sum();
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut kept = 0;
    let mut mass = 0.0;
    for p in &probs {
        mass += p.1 / total;
        kept += 1;
        if mass >= top_p as f64 {
            break;
        }
    }
    let nucleus = &probs[..kept];
    let nucleus_mass: f64 = nucleus.iter().map(|p| p.1).sum();
    let mut u = rng.next_f64() * nucleus_mass;
    for &(id, p) in nucleus {
        if u < p {
            return id;
        }
        u -= p;
    }
    nucleus[kept - 1].0
}

/// Chooses tokens under a [`Sampling`]: greedy, or top-p with its own seeded generator.
#[derive(Debug, Clone)]
pub struct Sampler {
    sampling: Sampling,
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler for `sampling` (checked).
    pub fn new(sampling: Sampling) -> Result<Self> {
        sampling.validate()?;
        let seed = match sampling {
            Sampling::TopP { seed, .. } => seed,
            Sampling::Greedy => 0,
        };
        Ok(Self {
            sampling,
            rng: SplitMix64::new(seed),
        })
    }

    /// The next token from `logits` (one vocabulary row).
    pub fn pick(&mut self, logits: &[f32]) -> u32 {
        match self.sampling {
            Sampling::Greedy => argmax(logits),
            Sampling::TopP {
                temperature, top_p, ..
            } => sample_top_p(logits, temperature, top_p, &mut self.rng),
        }
    }
}

/// The decode loop of plain and pressed generation: the first token is picked from `first`
/// (the prompt's logits), each next one from `step(previous)`, until a stop id or
/// `config.max_new_tokens`; `on_token` sees each id as soon as it is chosen.
///
/// # Shapes
/// - first and each `step` result: `[rows, vocab]` (the last row is read)
pub(crate) fn decode_loop<B: Backend>(
    config: &GenerateConfig,
    mut sampler: Sampler,
    first: Tensor<B, 2>,
    mut step: impl FnMut(u32) -> Result<Tensor<B, 2>>,
    mut on_token: impl FnMut(u32),
) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    if config.max_new_tokens == 0 {
        return Ok(out);
    }
    let mut next = sampler.pick(&last_row(first));
    loop {
        out.push(next);
        on_token(next);
        if config.stop_ids.contains(&next) || out.len() >= config.max_new_tokens {
            return Ok(out);
        }
        next = sampler.pick(&last_row(step(next)?));
    }
}

/// Generates after `prompt`, calling `on_token` with each new id as soon as it is chosen.
/// Returns the new ids (ending with the stop id when one was produced).
pub fn generate<B: Backend>(
    model: &Model<B>,
    prompt: &[u32],
    config: &GenerateConfig,
    cache: &mut KvCache<B>,
    mut observer: Option<&mut Observer>,
    on_token: impl FnMut(u32),
) -> Result<Vec<u32>> {
    let sampler = Sampler::new(config.sampling)?;
    if config.max_new_tokens == 0 {
        return Ok(Vec::new());
    }
    let logits = model.forward(prompt, cache, observer.as_deref_mut(), Logits::Last)?;
    decode_loop(
        config,
        sampler,
        logits,
        |id| model.forward(&[id], cache, observer.as_deref_mut(), Logits::Last),
        on_token,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_lowest_index_on_ties() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, -1.0]), 1);
    }

    #[test]
    fn top_p_small_keeps_only_the_best_token() {
        // p(best) = e^2 / (e^2 + 2) ≈ 0.787 ≥ 0.5, so the nucleus is the best token alone.
        let mut rng = SplitMix64::new(7);
        for _ in 0..50 {
            assert_eq!(sample_top_p(&[0.0, 2.0, 0.0], 1.0, 0.5, &mut rng), 1);
        }
    }

    #[test]
    fn sampling_follows_the_distribution_and_the_seed() {
        // Logits ln(1), ln(3): probabilities 1/4 and 3/4.
        let logits = [0.0, 3f32.ln()];
        let mut rng = SplitMix64::new(42);
        let ones = (0..4000)
            .filter(|_| sample_top_p(&logits, 1.0, 1.0, &mut rng) == 1)
            .count();
        assert!((ones as f64 / 4000.0 - 0.75).abs() < 0.03, "{ones}");
        let draw = |seed| {
            let mut r = SplitMix64::new(seed);
            (0..20)
                .map(|_| sample_top_p(&logits, 1.0, 1.0, &mut r))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
    }

    #[test]
    fn rejects_bad_sampling_settings() {
        let bad = Sampling::TopP {
            temperature: 0.0,
            top_p: 0.9,
            seed: 1,
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("temperature"));
        let bad = Sampling::TopP {
            temperature: 1.0,
            top_p: 1.5,
            seed: 1,
        };
        assert!(bad.validate().unwrap_err().to_string().contains("top-p"));
    }
}
