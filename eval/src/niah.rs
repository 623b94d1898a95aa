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
//! **Placement (token-exact).** The haystack is cut to `length − |prefix| − |needle| − |suffix|`
//! tokens so the prompt has exactly `length` tokens; the needle goes at
//! `⌊depth · haystack⌋`, moved back to just after the nearest sentence end (a token ending in a
//! period) so it starts a sentence, as RULER inserts between sentences; at depth 1 it goes after
//! the whole haystack.

use std::ops::Range;

pub use crate::rng::Rng;

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

/// A prompt with its needle in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The prompt's token ids, exactly the requested length.
    pub ids: Vec<u32>,
    /// Where the needle's tokens lie in `ids`.
    pub needle: Range<usize>,
}

impl Placed {
    /// Where the needle starts, as a fraction of the haystack it was placed in.
    pub fn depth_of(&self, prefix_len: usize, haystack_len: usize) -> f64 {
        (self.needle.start - prefix_len) as f64 / haystack_len.max(1) as f64
    }
}

/// Index in `haystack` where the needle goes at `depth` ∈ [0, 1]: `⌊depth · len⌋`, moved back to
/// just after the nearest sentence end.
pub fn insertion_point(
    haystack: &[u32],
    depth: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> usize {
    if depth >= 1.0 {
        return haystack.len();
    }
    let mut at = (haystack.len() as f64 * depth.max(0.0)).floor() as usize;
    while at > 0 && !is_sentence_end(haystack[at - 1]) {
        at -= 1;
    }
    at
}

/// Tokens of a prompt around the haystack.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Before the haystack (chat header, template head).
    pub prefix: &'a [u32],
    /// The needle.
    pub needle: &'a [u32],
    /// After the haystack (question, end of turn, answer prefix).
    pub suffix: &'a [u32],
}

/// Builds a prompt of exactly `length` tokens; `None` when `haystack` is too short or `length`
/// leaves no room for any haystack.
pub fn place(
    haystack: &[u32],
    frame: Frame<'_>,
    length: usize,
    depth: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> Option<Placed> {
    let fixed = frame.prefix.len() + frame.needle.len() + frame.suffix.len();
    let room = length.checked_sub(fixed)?;
    if room == 0 || haystack.len() < room {
        return None;
    }
    let hay = &haystack[..room];
    let at = insertion_point(hay, depth, is_sentence_end);
    let mut ids = Vec::with_capacity(length);
    ids.extend_from_slice(frame.prefix);
    ids.extend_from_slice(&hay[..at]);
    let start = ids.len();
    ids.extend_from_slice(frame.needle);
    let end = ids.len();
    ids.extend_from_slice(&hay[at..]);
    ids.extend_from_slice(frame.suffix);
    Some(Placed {
        ids,
        needle: start..end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_period(t: u32) -> bool {
        t == 0
    }

    /// 40 tokens, a period (0) every 5th.
    fn hay() -> Vec<u32> {
        (1..=40)
            .map(|i| if i % 5 == 0 { 0 } else { 100 + i })
            .collect()
    }

    #[test]
    fn needle_sits_at_the_sentence_start_before_the_requested_depth() {
        let (prefix, needle, suffix) = ([7u32, 7], [9u32, 9, 9], [8u32]);
        let frame = Frame {
            prefix: &prefix,
            needle: &needle,
            suffix: &suffix,
        };
        // Room = 26 − 6 = 20 haystack tokens; 50% → 10, hay[9] is a period → at 10.
        let p = place(&hay(), frame, 26, 0.5, is_period).expect("fits");
        assert_eq!(p.ids.len(), 26);
        assert_eq!(p.needle, 12..15);
        assert_eq!(&p.ids[12..15], &needle);
        assert_eq!(&p.ids[..2], &prefix);
        assert_eq!(p.ids[25], 8);
        assert_eq!(p.ids[11], 0, "the token before the needle ends a sentence");
        assert_eq!(p.depth_of(2, 20), 0.5);
        // 65% of 20 = 13 → back to just after the period at 9 → 10.
        assert_eq!(
            place(&hay(), frame, 26, 0.65, is_period)
                .expect("fits")
                .needle,
            12..15
        );
        // 0 → start of the haystack; 1 → after all of it.
        assert_eq!(
            place(&hay(), frame, 26, 0.0, is_period)
                .expect("fits")
                .needle,
            2..5
        );
        let end = place(&hay(), frame, 26, 1.0, is_period).expect("fits");
        assert_eq!(end.needle, 22..25);
        // The haystack keeps its order around the needle.
        let mut rest = end.ids[2..22].to_vec();
        rest.truncate(20);
        assert_eq!(rest, hay()[..20]);
    }

    #[test]
    fn too_short_haystack_or_length_gives_none() {
        let frame = Frame {
            prefix: &[1],
            needle: &[2],
            suffix: &[3],
        };
        assert!(place(&hay(), frame, 3, 0.5, is_period).is_none());
        assert!(place(&hay(), frame, 44, 0.5, is_period).is_none());
        assert!(place(&hay(), frame, 43, 0.5, is_period).is_some());
    }

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
