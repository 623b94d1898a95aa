//! Profiler settings: the defaults of the papers, a `quick` preset for CI and a `full` one that
//! goes to the model's context.

use serde::{Deserialize, Serialize};

use crate::needles::multi::{DEFAULT_CANDIDATES, MAX_CANDIDATES, MIN_CANDIDATES};
use crate::needles::{NeedleSet, PromptStyle, DEFAULT_GENERATED_PER_KIND};
use crate::{Error, Result};

/// PoD §2.1: the last q = 16 query rows.
pub const DEFAULT_OBSERVATION_ROWS: usize = 16;
/// SpindleKV Table 3: θ_K.
pub const DEFAULT_THETA_K: f64 = 0.98;
/// SpindleKV Table 3: θ_V.
pub const DEFAULT_THETA_V: f64 = 0.95;
/// TreeKV §3.3: the 512th generation step.
pub const DEFAULT_WAVELET_STEP: usize = 512;
/// TreeKV §3.3: 5 levels.
pub const DEFAULT_WAVELET_LEVELS: usize = 5;
/// TreeKV §3.3: the first and last 32 tokens are left out.
pub const DEFAULT_WAVELET_EDGE: usize = 32;
/// Greedy decode steps of a retrieval-reasoning trial: FYYFU/HeadKV
/// `retrieval_head_detection_r2.py`'s `self.decode(q_outputs, input_ids[:, -1], 50)`.
pub const R2_DECODE_TOKENS: usize = 50;
/// HeadKV App. E / Wu et al.: 5 lengths, 10 depths.
const LENGTHS: usize = 5;
const DEPTHS: usize = 10;

/// The retrieval-reasoning prompt style of the model named `name` (the catalog name, or the
/// GGUF's): plain text — the authors' raw completion — unless measured answer rates showed that
/// the model cannot follow it: the chat template answers right significantly more often on the
/// same 50 trials (`profiler/examples/r2_answer_rates.rs`: exact one-sided McNemar, p < 0.05).
///
/// Measured (default grid, seed 0, 26 two- and 24 four-candidate trials):
/// - SmolLM2-135M-Instruct: plain 2 of 50 right (30 empty answers: it ends its turn right
///   after "Answer:"), chat 2 of 50 (none empty); right only in chat 1, only in plain text 1,
///   p = 0.75 → plain. Neither style is above chance.
pub fn reasoning_style_for(name: &str) -> PromptStyle {
    /// Models whose R2 answers need the chat template (measured; see above).
    const CHAT: [&str; 0] = [];
    let slug = name.to_lowercase();
    if CHAT.iter().any(|m| slug.contains(m)) {
        PromptStyle::Chat
    } else {
        PromptStyle::Plain
    }
}

/// Everything that decides a profile (with the model and the data). Serialised into the partial
/// results so that a rerun only reuses work done with the same settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProfileConfig {
    /// Seed of haystack offsets and text samples.
    pub seed: u64,
    /// Needle prompt lengths in tokens.
    pub context_lengths: Vec<usize>,
    /// Needle depths, percent of the haystack (0 = start, 100 = end).
    pub depths: Vec<f64>,
    /// How retrieval needle prompts are presented. Default: the chat template, as Wu et al.'s
    /// code does for chat models — with the plain prompt SmolLM2-135M-*Instruct* ends its turn at
    /// once (`<|im_end|>` right after "Answer:") in about half the retrieval trials.
    pub prompt_style: PromptStyle,
    /// How retrieval-reasoning prompts are presented. Default: plain text, a raw completion, as
    /// the authors' `retrieval_head_detection_r2.py` does for every model; the chat template
    /// only for a model measured not to follow plain text ([`crate::reasoning_style_for`]).
    pub reasoning_prompt_style: PromptStyle,
    /// Greedy decode steps of a retrieval-reasoning trial ([`R2_DECODE_TOKENS`]).
    pub reasoning_decode_tokens: usize,
    /// Which needle examples run: the seven hand-written ones, or a larger seeded set from
    /// templates (`needles::generated`).
    pub needles: NeedleSet,
    /// Real-text samples for layer similarity, wavelets, funnel and redundancy.
    pub samples: usize,
    /// Tokens per text sample.
    pub sample_tokens: usize,
    /// Last query rows observed (PoD's q).
    pub observation_rows: usize,
    /// k of the funnel's top-k mass.
    pub funnel_top_k: usize,
    /// Cosine threshold of the key redundancy fraction.
    pub theta_k: f64,
    /// Cosine threshold of the value redundancy fraction.
    pub theta_v: f64,
    /// Tokens (from the start of each sample) whose K/V pairs are compared.
    pub redundancy_tokens: usize,
    /// Share of accumulated attention whose carriers count as non-negligible (sparsity).
    pub sparsity_mass: f64,
    /// Generation step of the wavelet signal.
    pub wavelet_step: usize,
    /// Haar levels.
    pub wavelet_levels: usize,
    /// Positions left out at each end of the wavelet signal.
    pub wavelet_edge: usize,
}

/// The longest needle prompt a trial can have in a model of `context` positions when it decodes
/// up to `budget` steps: the prompt's last token is the first step's input, so the last step runs
/// at position `length − 2 + budget`, which must be below `context`.
pub(crate) fn longest_prompt(context: usize, budget: usize) -> usize {
    (context + 1).saturating_sub(budget.max(1))
}

/// `n` values evenly spaced from `lo` to `hi`, both included, rounded (numpy's linspace).
pub fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    match n {
        0 => Vec::new(),
        1 => vec![lo],
        _ => (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect(),
    }
}

impl ProfileConfig {
    /// The default profile: 5 lengths from max/8 to `max_len` (2K by default), 10 depths, the
    /// generated needle set (24 examples per kind), 8 text samples of 1,024 tokens.
    pub fn standard(seed: u64, max_len: usize) -> Self {
        let lengths = linspace((max_len / 8) as f64, max_len as f64, LENGTHS)
            .into_iter()
            .map(|x| x.round() as usize)
            .collect();
        ProfileConfig {
            seed,
            context_lengths: lengths,
            depths: linspace(0.0, 100.0, DEPTHS)
                .into_iter()
                .map(f64::round)
                .collect(),
            prompt_style: PromptStyle::Chat,
            reasoning_prompt_style: PromptStyle::Plain,
            reasoning_decode_tokens: R2_DECODE_TOKENS,
            needles: NeedleSet::Generated {
                per_kind: DEFAULT_GENERATED_PER_KIND,
                wide: DEFAULT_CANDIDATES,
            },
            samples: 8,
            sample_tokens: 1024,
            observation_rows: DEFAULT_OBSERVATION_ROWS,
            funnel_top_k: 32,
            theta_k: DEFAULT_THETA_K,
            theta_v: DEFAULT_THETA_V,
            redundancy_tokens: 512,
            sparsity_mass: 0.9,
            wavelet_step: DEFAULT_WAVELET_STEP,
            wavelet_levels: DEFAULT_WAVELET_LEVELS,
            wavelet_edge: DEFAULT_WAVELET_EDGE,
        }
    }

    /// A small profile for tests and CI: 2 lengths, 2 depths, 2 samples of 576 tokens.
    pub fn quick(seed: u64) -> Self {
        ProfileConfig {
            context_lengths: vec![256, 512],
            depths: vec![25.0, 75.0],
            samples: 2,
            sample_tokens: DEFAULT_WAVELET_STEP + 4 * DEFAULT_OBSERVATION_ROWS,
            redundancy_tokens: 256,
            ..Self::standard(seed, 512)
        }
    }

    /// The paper-sized profile up to the model's context `context_len` (8K for SmolLM2): the
    /// longest needle prompt leaves room for a retrieval-reasoning trial's
    /// [`R2_DECODE_TOKENS`] decode steps inside the context.
    pub fn full(seed: u64, context_len: usize) -> Self {
        let longest = longest_prompt(context_len, R2_DECODE_TOKENS);
        ProfileConfig {
            samples: 16,
            sample_tokens: 4096.min(context_len),
            redundancy_tokens: 1024,
            ..Self::standard(seed, longest)
        }
    }

    /// Needle trials per example kind.
    pub fn trials(&self) -> usize {
        self.context_lengths.len() * self.depths.len()
    }

    /// Checks the settings against a model of context `context_len`.
    pub fn validate(&self, context_len: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Settings(m));
        if let Some(&l) = self.context_lengths.iter().find(|&&l| l > context_len) {
            return bad(format!(
                "context length {l} exceeds the model's {context_len}"
            ));
        }
        if let Some(&l) = self.context_lengths.iter().find(|&&l| l < 128) {
            return bad(format!("context length {l} is below 128 tokens"));
        }
        if self.depths.iter().any(|d| !(0.0..=100.0).contains(d)) {
            return bad(format!(
                "depths must lie in [0, 100], found {:?}",
                self.depths
            ));
        }
        if self.sample_tokens > context_len || self.sample_tokens < 2 * self.observation_rows {
            return bad(format!(
                "sample_tokens {} must lie in [2·q = {}, {context_len}]",
                self.sample_tokens,
                2 * self.observation_rows
            ));
        }
        if self.observation_rows == 0 || self.funnel_top_k == 0 || self.wavelet_levels == 0 {
            return bad("observation_rows, funnel_top_k and wavelet_levels must be ≥ 1".into());
        }
        if let NeedleSet::Generated { per_kind, .. } | NeedleSet::Calibrated { per_kind, .. } =
            self.needles
        {
            if per_kind == 0 {
                return bad("the generated needle set needs at least 1 example per kind".into());
            }
        }
        match self.needles {
            NeedleSet::Generated { wide: 0, .. } => {}
            NeedleSet::Generated { wide: k, .. } | NeedleSet::Calibrated { k, .. }
                if !(MIN_CANDIDATES..=MAX_CANDIDATES).contains(&k) =>
            {
                return bad(format!(
                    "wide and calibrated retrieval-reasoning needles hold {MIN_CANDIDATES} to \
                     {MAX_CANDIDATES} candidate statements (0: the authors' two-candidate \
                     needles only, generated set), found {k}"
                ));
            }
            _ => {}
        }
        if self.reasoning_decode_tokens == 0 {
            return bad("reasoning_decode_tokens must be ≥ 1".into());
        }
        if self.redundancy_tokens < 2 {
            return bad("redundancy_tokens must be ≥ 2".into());
        }
        for (name, v) in [
            ("theta_k", self.theta_k),
            ("theta_v", self.theta_v),
            ("sparsity_mass", self.sparsity_mass),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(format!("{name} must lie in [0, 1], found {v}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_preset_leaves_room_to_decode_its_longest_trial() {
        // The longest prompt plus R2's 50 steps, the first on the prompt's last token, ends at
        // position 8142 − 1 + 50 = 8191, the last of SmolLM2's 8,192.
        let c = ProfileConfig::full(0, 8192);
        assert_eq!(c.context_lengths.last(), Some(&8143));
        assert_eq!(c.context_lengths.first(), Some(&1017), "the longest over 8");
        assert!(c.validate(8192).is_ok());
    }

    #[test]
    fn standard_lengths_and_depths_follow_linspace() {
        let c = ProfileConfig::standard(0, 2048);
        assert_eq!(c.context_lengths, vec![256, 704, 1152, 1600, 2048]);
        assert_eq!(
            c.depths,
            vec![0.0, 11.0, 22.0, 33.0, 44.0, 56.0, 67.0, 78.0, 89.0, 100.0]
        );
        assert_eq!(c.trials(), 50);
        assert!(c.validate(8192).is_ok());
    }

    #[test]
    fn defaults_to_the_generated_needle_set_and_rejects_an_empty_one() {
        let c = ProfileConfig::standard(0, 2048);
        assert_eq!(
            c.needles,
            NeedleSet::Generated {
                per_kind: 24,
                wide: 4
            }
        );
        let check = |needles| {
            let c = ProfileConfig {
                needles,
                ..c.clone()
            };
            c.validate(8192).err().map(|e| e.to_string())
        };
        let err = |per_kind, wide| check(NeedleSet::Generated { per_kind, wide });
        let calibrated = |per_kind, k| check(NeedleSet::Calibrated { per_kind, k });
        let empty = "profile settings: the generated needle set needs at least 1 example per kind";
        assert_eq!(err(0, 4).as_deref(), Some(empty));
        assert_eq!(calibrated(0, 4).as_deref(), Some(empty));
        let wide = |k| {
            format!(
                "profile settings: wide and calibrated retrieval-reasoning needles hold 4 to 8 \
                 candidate statements (0: the authors' two-candidate needles only, generated \
                 set), found {k}"
            )
        };
        assert_eq!(err(24, 3), Some(wide(3)));
        assert_eq!(err(24, 9), Some(wide(9)));
        assert_eq!(err(24, 0), None);
        assert_eq!(calibrated(24, 0), Some(wide(0)));
        assert_eq!(calibrated(24, 9), Some(wide(9)));
        assert_eq!(calibrated(24, 4), None);
        assert_eq!(calibrated(24, 8), None);
    }

    #[test]
    fn r2_trials_decode_50_tokens_as_a_plain_completion_by_default() {
        // The authors' `self.decode(q_outputs, input_ids[:, -1], 50)`, no chat template.
        for c in [
            ProfileConfig::standard(0, 2048),
            ProfileConfig::quick(0),
            ProfileConfig::full(0, 8192),
        ] {
            assert_eq!(c.reasoning_decode_tokens, 50);
            assert_eq!(c.reasoning_prompt_style, PromptStyle::Plain);
        }
        let mut c = ProfileConfig::standard(0, 2048);
        c.reasoning_decode_tokens = 0;
        assert!(c.validate(8192).is_err());
    }

    #[test]
    fn measured_models_take_the_plain_r2_prompt() {
        for name in ["SmolLM2-135M-Instruct", "smollm2-135m-instruct", "unknown"] {
            assert_eq!(reasoning_style_for(name), PromptStyle::Plain, "{name}");
        }
    }

    #[test]
    fn rejects_lengths_beyond_the_model() {
        let c = ProfileConfig::standard(0, 2048);
        let err = c.validate(1024).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("profile settings: context length 1152 exceeds the model's 1024")
        );
    }
}
