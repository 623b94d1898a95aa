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
//!
//! **Independent prompts (protocol `ruler-niah-chat/v2`).** Every prompt of a grid is its own
//! needle: its key drawn without replacement from the 24 × 24 adjective-noun pairs
//! ([`distinct_needles`]), its own 7-digit value, and its own stretch of the essays
//! ([`haystack_starts`]: the haystack cut into one stretch per prompt, handed out in a seeded
//! order), so no two prompts share a needle or a haystack. (Protocol v1 asked 5 needles at every
//! length and depth, all from the haystack's start: 50 prompts, about 10 independent ones.)
//!
//! The run over the model is `task` (feature `model`); its records are the prompt tasks'
//! ([`crate::records::Record`]), summarised by [`crate::aggregate::aggregate_niah`] and
//! [`crate::table::markdown`].

#[cfg(feature = "model")]
pub mod task;

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

/// Random stream of the needles' keys and values (with the run's seed).
const NEEDLE_STREAM: u64 = 0x6e65_6564; // "need"
/// Random stream of the haystack stretches' order.
const HAYSTACK_STREAM: u64 = 0x6861_7973; // "hays"

/// Distinct keys there are: every adjective with every noun.
pub const KEYS: usize = ADJECTIVES.len() * NOUNS.len();

/// The needles of a grid of `count` prompts seeded `seed`, prompt `p` the `p`-th: distinct keys
/// drawn without replacement from the [`KEYS`] adjective-noun pairs and distinct 7-digit
/// values. An error naming the limit past [`KEYS`] prompts.
pub fn distinct_needles(seed: u64, count: usize) -> Result<Vec<Needle>, String> {
    if count > KEYS {
        return Err(format!(
            "{count} prompts need {count} distinct needle keys; there are {KEYS} ({} adjectives \
             × {} nouns): ask for fewer examples, lengths or depths",
            ADJECTIVES.len(),
            NOUNS.len()
        ));
    }
    let mut rng = Rng::derive(seed, &[NEEDLE_STREAM]);
    let keys = rng.sample_indices(KEYS, count);
    let mut values = std::collections::HashSet::new();
    let needles = keys
        .into_iter()
        .enumerate()
        .map(|(index, k)| {
            let value = loop {
                let v = 1_000_000 + rng.below(9_000_000);
                if values.insert(v) {
                    break v;
                }
            };
            let (adj, noun) = (ADJECTIVES[k / NOUNS.len()], NOUNS[k % NOUNS.len()]);
            Needle {
                index,
                key: format!("{adj}-{noun}"),
                value: value.to_string(),
            }
        })
        .collect();
    Ok(needles)
}

/// Where each of `count` prompts starts reading a haystack of `len` tokens: the haystack cut
/// into `count` equal stretches, prompt `p` given stretch `order[p]` of a permutation seeded
/// `seed`. Stretches are disjoint for prompts of up to `len / count` tokens; longer prompts
/// still start at distinct places and overlap their neighbours' stretches.
pub fn haystack_starts(seed: u64, count: usize, len: usize) -> Vec<usize> {
    let mut rng = Rng::derive(seed, &[HAYSTACK_STREAM]);
    let order = rng.sample_indices(count, count);
    order.into_iter().map(|s| s * len / count.max(1)).collect()
}

/// `need` tokens of `haystack` read from the first sentence start at or after `start`
/// (`is_sentence_end` marks the token that ends one), wrapping to its beginning at its end; the
/// haystack itself when it has no more than `need` tokens.
pub fn read_from(
    haystack: &[u32],
    start: usize,
    need: usize,
    is_sentence_end: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let n = haystack.len();
    if n <= need || n == 0 {
        return haystack.to_vec();
    }
    let start = start % n;
    let at = (start..n)
        .find(|&i| i == 0 || is_sentence_end(haystack[i - 1]))
        .unwrap_or(start);
    haystack
        .iter()
        .cycle()
        .skip(at)
        .take(need)
        .copied()
        .collect()
}

/// One needle: key, value and the texts around it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Needle {
    /// Index of its prompt in the grid.
    pub index: usize,
    /// The key, an adjective-noun pair as RULER's `words` keys.
    pub key: String,
    /// The 7-digit value, the reference answer.
    pub value: String,
}

impl Needle {
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
    fn every_prompt_gets_its_own_key_and_value() {
        let all = distinct_needles(7, KEYS).expect("576 keys");
        let keys: std::collections::HashSet<&str> = all.iter().map(|n| n.key.as_str()).collect();
        let values: std::collections::HashSet<&str> =
            all.iter().map(|n| n.value.as_str()).collect();
        assert_eq!((keys.len(), values.len()), (KEYS, KEYS));
        assert!(all.iter().all(|n| n.value.len() == 7));
        assert_eq!(distinct_needles(7, 50), distinct_needles(7, 50), "seeded");
        assert_ne!(distinct_needles(7, 50), distinct_needles(8, 50));
        let err = distinct_needles(7, KEYS + 1).expect_err("577 prompts");
        assert!(
            err.contains("577 prompts need 577 distinct needle keys; there are 576"),
            "{err}"
        );
    }

    #[test]
    fn prompts_read_distinct_stretches_of_the_haystack() {
        // 10 prompts of a 1000-token haystack: starts 0, 100, …, 900 in a seeded order.
        let starts = haystack_starts(3, 10, 1000);
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).map(|i| i * 100).collect::<Vec<_>>());
        assert_ne!(starts, sorted, "a seeded order, not the haystack's");
        assert_eq!(starts, haystack_starts(3, 10, 1000));
        // Token 0 ends a sentence: reading from 4 skips to the token after the next period
        // (index 5 of 1 2 3 0 | 5 6 0 | 8 9 …), wrapping at the end.
        let hay: Vec<u32> = vec![1, 2, 3, 0, 5, 6, 0, 8, 9, 0];
        assert_eq!(read_from(&hay, 4, 6, |t| t == 0), vec![5, 6, 0, 8, 9, 0]);
        assert_eq!(read_from(&hay, 5, 6, |t| t == 0), vec![8, 9, 0, 1, 2, 3]);
        assert_eq!(read_from(&hay, 0, 3, |t| t == 0), vec![1, 2, 3]);
        assert_eq!(
            read_from(&hay, 3, 20, |t| t == 0),
            hay,
            "too short: all of it"
        );
    }

    #[test]
    fn the_texts_hold_the_key_and_only_the_needle_the_value() {
        let a = &distinct_needles(0, 1).expect("one")[0];
        assert!(a.sentence().contains(&a.value) && a.sentence().contains(&a.key));
        assert!(!a.answer_prefix().contains(&a.value));
        assert!(!a.user_frame().1.contains(&a.value));
        assert!(a.user_frame().1.contains(&a.key));
    }
}
