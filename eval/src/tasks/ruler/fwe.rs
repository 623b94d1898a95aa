//! RULER's frequent words extraction, `fwe` (`data/synthetic/freq_words_extraction.py`,
//! template and answer prefix from `data/synthetic/constants.py`, `alpha: 2.0` from
//! `synthetic.yaml`, the script's defaults otherwise: `coded_wordlen` 6, `vocab_size`
//! `max_seq_length // 50`).
//!
//! As in RULER: a vocabulary of distinct random 6-letter lower-case "coded" words, sorted then
//! shuffled, its first word replaced by `...` (noise); the word of rank `k` appears
//! `⌊n · k^−α / ζ(α)⌋` times in a text of about `n` words (a Zipf law), shuffled and joined by
//! spaces. The answer is the three most frequent coded words (ranks 2 to 4, the noise excluded).
//! Score: `string_match_all` of the three.
//!
//! Differences from RULER: the size `n` is found by the bisection every task here uses, so the
//! prompt and `tokens_to_generate` fit the length (RULER sizes `n` against the length alone and
//! lets a prompt pass it by up to the 50 tokens to generate); `n` is at least [`MIN_WORDS`], so
//! ranks 4 and 5 keep distinct counts and the answer is well defined.

use super::{fill, Built};
use crate::rng::Rng;

/// RULER's `freq_words_extraction` template.
pub const TEMPLATE: &str = "Read the following coded text and track the frequency of each coded \
word. Find the three most frequently appeared coded words. {context}\nQuestion: Do not provide \
any explanation. Please ignore the dots '....'. What are the three most frequently appeared words \
in the above coded text?";
/// RULER's `freq_words_extraction` answer prefix.
pub const ANSWER_PREFIX: &str =
    " Answer: According to the coded text above, the three most frequently appeared words are:";
/// RULER's `tokens_to_generate` for `freq_words_extraction`.
pub const TOKENS_TO_GENERATE: usize = 50;
/// The Zipf exponent (`alpha`).
pub const ALPHA: f64 = 2.0;
/// Letters of a coded word (`coded_wordlen`).
pub const WORD_LEN: usize = 6;
/// The smallest text: ranks 4 and 5 then appear 3 and 2 times.
pub const MIN_WORDS: usize = 100;
/// What the answer asks, for the records.
pub const QUERY: &str = "the three most frequent coded words";

/// RULER's vocabulary size at `length` tokens (`max_seq_length // 50`), at least 5 so the
/// three answers and a rank below them exist.
pub fn vocab_size(length: usize) -> usize {
    (length / 50).max(5)
}

/// Riemann's ζ(s) for s > 1: the first 10,000 terms, then the Euler–Maclaurin tail
/// `N^(1−s)/(s−1) − N^(−s)/2` (error below `s·N^(−s−1)/12`).
pub fn zeta(s: f64) -> f64 {
    const N: usize = 10_000;
    let head: f64 = (1..N).map(|k| (k as f64).powf(-s)).sum();
    let n = N as f64;
    head + n.powf(1.0 - s) / (s - 1.0) + n.powf(-s) / 2.0
}

/// The vocabulary of one example: `size` distinct random coded words, sorted, shuffled, the
/// first replaced by `...`.
fn vocabulary(size: usize, rng: &mut Rng) -> Vec<String> {
    let mut words = std::collections::BTreeSet::new();
    while words.len() < size {
        let w: String = (0..WORD_LEN)
            .map(|_| (b'a' + rng.below(26) as u8) as char)
            .collect();
        words.insert(w);
    }
    let mut vocab: Vec<String> = words.into_iter().collect();
    rng.shuffle(&mut vocab);
    vocab[0] = "...".to_string();
    vocab
}

/// How often the word of each rank appears in a text of `n` words: `⌊n · k^−α / ζ(α)⌋`.
pub fn counts(n: usize, ranks: usize) -> Vec<usize> {
    let z = zeta(ALPHA);
    (1..=ranks)
        .map(|k| (n as f64 * (k as f64).powf(-ALPHA) / z) as usize)
        .collect()
}

/// The example of about `n_words` words with a vocabulary of `vocab` words (`gen_text`).
pub fn build(vocab: usize, n_words: usize, rng: &mut Rng) -> Built {
    let vocab = vocabulary(vocab, rng);
    let mut words: Vec<&str> = Vec::new();
    for (w, c) in vocab.iter().zip(counts(n_words, vocab.len())) {
        words.extend(std::iter::repeat_n(w.as_str(), c));
    }
    rng.shuffle(&mut words);
    Built {
        user: fill(TEMPLATE, &[("context", &words.join(" ")), ("query", "")]),
        answer_prefix: ANSWER_PREFIX.to_string(),
        answers: vocab[1..4].to_vec(),
        query: QUERY.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::ruler::tests::{assert_fills, at, Words};
    use crate::tasks::ruler::{generate, score, Sources, Task};

    #[test]
    fn zeta_of_two_is_pi_squared_over_six() {
        let want = std::f64::consts::PI.powi(2) / 6.0;
        assert!((zeta(2.0) - want).abs() < 1e-10, "{}", zeta(2.0));
        assert!((zeta(3.0) - 1.202_056_903_159_594).abs() < 1e-10);
    }

    #[test]
    fn counts_follow_zipf_with_alpha_two() {
        // n = 1000: 1000 / ζ(2) = 607.93; / 4 = 151.98; / 9 = 67.55; / 16 = 37.99.
        assert_eq!(counts(1000, 5), [607, 151, 67, 37, 24]);
        let c = counts(MIN_WORDS, 5);
        assert!(c[3] > c[4] && c[4] > 0, "{c:?}");
    }

    #[test]
    fn the_answers_are_the_three_most_frequent_words_after_the_noise() {
        let b = build(40, 500, &mut Rng::new(9));
        assert_eq!(b.answers.len(), 3);
        let text = &b.user;
        let context = text
            .split("coded words. ")
            .nth(1)
            .and_then(|t| t.split("\nQuestion:").next())
            .expect("context");
        let mut freq: std::collections::HashMap<&str, usize> = Default::default();
        for w in context.split(' ') {
            *freq.entry(w).or_default() += 1;
        }
        let mut by: Vec<(&str, usize)> = freq.into_iter().collect();
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        assert_eq!(by[0].0, "...", "the noise is the most frequent");
        let top: Vec<&str> = by[1..4].iter().map(|(w, _)| *w).collect();
        assert_eq!(top, b.answers);
        assert_eq!(by[1].1, counts(500, 2)[1]);
        for a in &b.answers {
            assert!(a.len() == WORD_LEN && a.chars().all(|c| c.is_ascii_lowercase()));
        }
        assert!(text.starts_with(
            "Read the following coded text and track the frequency of each coded word. Find the \
             three most frequently appeared coded words. "
        ));
        assert!(text.ends_with(
            "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are \
             the three most frequently appeared words in the above coded text?"
        ));
        assert_eq!(
            b.answer_prefix,
            " Answer: According to the coded text above, the three most frequently appeared words \
             are:"
        );
    }

    #[test]
    fn fwe_scores_the_share_of_the_three_found() {
        let answers: Vec<String> = ["abcdef", "ghijkl", "mnopqr"].map(String::from).into();
        let s = |r: &str| score(Task::Fwe, r, &answers);
        assert_eq!(s(" abcdef, ghijkl, mnopqr"), 1.0);
        assert!((s("ABCDEF and mnopqr") - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s("..."), 0.0);
    }

    #[test]
    fn examples_fit_the_length_and_differ_by_index() {
        let sources = Sources::in_memory(None, None, None, None);
        let ex = generate(Task::Fwe, &sources, &Words, at(1024, 0, 0)).expect("fits");
        assert_fills(ex.tokens, 1024 - TOKENS_TO_GENERATE, 5);
        let other = generate(Task::Fwe, &sources, &Words, at(1024, 0, 1)).expect("fits");
        assert_ne!(ex.built.answers, other.built.answers);
        assert_eq!(vocab_size(4096), 81);
    }
}
