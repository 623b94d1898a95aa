//! Needle-in-a-haystack prompts in RULER's `niah` form (`data/synthetic/niah.py` and
//! `constants.py` of `nvidia-long-context-eval==26.3`), built on token ids.
//!
//! One needle, "One of the special magic numbers for {key} is: {value}.", a word key and a
//! 7-digit value drawn from a seeded generator, hidden in Paul Graham essays. The profiler's
//! needles (invented facts about Lisbon, soup, lighthouses) are never used here, so evaluation
//! does not test on what the plan was fitted to. With one needle RULER's template turns plural
//! into singular ("Some … are" → "A … is"); the prompt is the template in the model's chat
//! template with the answer prefix (its leading space dropped) appended after the generation
//! prompt, as RULER does for chat models. Score: RULER's `string_match_all` of the value.
//!
//! **Placement (token-exact)** is [`kvplan_common::needle`]'s, shared with the profiler: the
//! prompt has exactly the requested length and the needle starts a sentence at the requested
//! depth (a fraction in [0, 1]), as RULER inserts between sentences.

pub use crate::rng::Rng;
pub use kvplan_common::needle::{insertion_point, place, Frame, Placed};

/// RULER's niah template for one needle (singular), split around the context.
pub const TEMPLATE_HEAD: &str = "A special magic number is hidden within the following text. \
Make sure to memorize it. I will quiz you about the number afterwards.\n";
/// Question after the context; `{key}` is replaced.
pub const TEMPLATE_QUESTION: &str =
    "\nWhat is the special magic number for {key} mentioned in the provided text?";
/// RULER's answer prefix (singular), appended after the assistant turn opens.
pub const ANSWER_PREFIX: &str =
    " The special magic number for {key} mentioned in the provided text is";
/// The needle sentence.
pub const NEEDLE: &str = "One of the special magic numbers for {key} is: {value}.";
/// Tokens to generate: enough for the 7-digit value and its punctuation (RULER allows 128; the
/// answer follows the prefix at once, so a short budget loses nothing and saves decode time).
pub const ANSWER_TOKENS: usize = 16;

pub(crate) const ADJECTIVES: [&str; 24] = [
    "amber", "brave", "calm", "dusty", "eager", "faint", "gentle", "hollow", "icy", "jolly",
    "keen", "lofty", "mellow", "nimble", "odd", "polished", "quiet", "rusty", "silky", "tidy",
    "upbeat", "vivid", "wary", "zesty",
];
pub(crate) const NOUNS: [&str; 24] = [
    "anchor", "badger", "candle", "dolphin", "easel", "falcon", "garden", "harbor", "igloo",
    "jacket", "kettle", "lantern", "meadow", "needle", "orchard", "pepper", "quarry", "ribbon",
    "saddle", "teapot", "umbrella", "violin", "walnut", "yacht",
];

/// One needle: key, value and the texts around it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Needle {
    /// Index of the example (its seed offset).
    pub index: usize,
    /// The key, an adjective-noun pair as RULER's `words` keys.
    pub key: String,
    /// The 7-digit value, the reference answer.
    pub value: String,
}

impl Needle {
    /// Example `index` of the run seeded `seed`: the same for every method, length and depth.
    pub fn generate(seed: u64, index: usize) -> Self {
        let mut rng = Rng::new(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let adj = ADJECTIVES[rng.below(ADJECTIVES.len() as u64) as usize];
        let noun = NOUNS[rng.below(NOUNS.len() as u64) as usize];
        let value = 1_000_000 + rng.below(9_000_000);
        Self {
            index,
            key: format!("{adj}-{noun}"),
            value: value.to_string(),
        }
    }

    /// The needle sentence.
    pub fn sentence(&self) -> String {
        NEEDLE
            .replace("{key}", &self.key)
            .replace("{value}", &self.value)
    }

    /// The user message around the context: (text before, text after).
    pub fn user_frame(&self) -> (String, String) {
        (
            TEMPLATE_HEAD.to_string(),
            TEMPLATE_QUESTION.replace("{key}", &self.key),
        )
    }

    /// The answer prefix appended after the generation prompt.
    pub fn answer_prefix(&self) -> String {
        ANSWER_PREFIX.replace("{key}", &self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needles_are_seeded_and_differ_between_examples() {
        let a = Needle::generate(0, 0);
        assert_eq!(a, Needle::generate(0, 0));
        assert_ne!(a.value, Needle::generate(0, 1).value);
        assert_ne!(a.value, Needle::generate(1, 0).value);
        assert_eq!(a.value.len(), 7);
        assert!(a.sentence().contains(&a.value) && a.sentence().contains(&a.key));
        assert!(!a.answer_prefix().contains(&a.value));
        assert!(!a.user_frame().1.contains(&a.value));
    }
}
