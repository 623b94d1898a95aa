//! RULER's common words extraction, `cwe` (`data/synthetic/common_words_extraction.py`, template
//! and answer prefix from `data/synthetic/constants.py`, `freq_cw: 30`, `freq_ucw: 3`,
//! `num_cw: 10` from `synthetic.yaml`).
//!
//! A numbered list ("1. word 2. word …") in which ten words appear 30 times each and every other
//! word 3 times, shuffled; the question asks for the ten most common. As in RULER a worked
//! example goes first (40 words, 10 × 10 and 30 × 3, with its answer), and below 4096 tokens the
//! repeats drop to 6 and 1 (example: 20 words, 3 and 1). Score: `string_match_all` of the ten.
//!
//! Difference from RULER: the words are not the `wonderwords` noun, adjective and verb lists,
//! which the package does not ship, but the distinct lower-case words of 4 to 12 letters of the
//! essays of `PaulGrahamEssays.json` ([`vocabulary`]); a longer minimum keeps a listed word from
//! being part of another (`art` in `start`), which would score by substring.

use super::{fill, Built};
use crate::rng::Rng;

/// RULER's `common_words_extraction` template.
pub const TEMPLATE: &str = "Below is a numbered list of words. In these words, some appear more \
often than others. Memorize the ones that appear most often.\n{context}\nQuestion: What are the \
10 most common words in the above list?";
/// RULER's `common_words_extraction` answer prefix.
pub const ANSWER_PREFIX: &str = " Answer: The top 10 words that appear most often in the list are:";
/// RULER's `tokens_to_generate` for `common_words_extraction`.
pub const TOKENS_TO_GENERATE: usize = 120;
/// Common words (`num_cw`).
pub const NUM_CW: usize = 10;
/// Repeats of a common and of an uncommon word from 4096 tokens on (`freq_cw`, `freq_ucw`).
pub const FREQ_CW: usize = 30;
/// See [`FREQ_CW`].
pub const FREQ_UCW: usize = 3;
/// Words of the worked example from 4096 tokens on.
pub const EXAMPLE_WORDS: usize = 40;

/// The word list: distinct lower-case ASCII words of 4 to 12 letters in `text`, sorted.
pub fn vocabulary(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphabetic()))
        .filter(|w| (4..=12).contains(&w.len()) && w.chars().all(|c| c.is_ascii_lowercase()))
        .map(str::to_string)
        .collect();
    words.sort_unstable();
    words.dedup();
    words
}

/// `1. a 2. b …`.
fn numbered(words: &[String]) -> String {
    words
        .iter()
        .enumerate()
        .map(|(i, w)| format!("{}. {w}", i + 1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A shuffled list of `num_words` words, the first `NUM_CW` repeated `common` times and the
/// rest `uncommon` times, and its common words (`get_example`).
fn list(
    rng: &mut Rng,
    words: &[String],
    num_words: usize,
    common: usize,
    uncommon: usize,
) -> (String, Vec<String>) {
    let drawn = rng.sample(words, num_words);
    let (cw, ucw) = drawn.split_at(NUM_CW.min(drawn.len()));
    let mut all = Vec::with_capacity(cw.len() * common + ucw.len() * uncommon);
    for _ in 0..common {
        all.extend_from_slice(cw);
    }
    for _ in 0..uncommon {
        all.extend_from_slice(ucw);
    }
    rng.shuffle(&mut all);
    (numbered(&all), cw.to_vec())
}

/// The example with `num_words` words in the list, for a run at `length` tokens
/// (`generate_input_output`).
pub fn build(words: &[String], num_words: usize, length: usize, rng: &mut Rng) -> Built {
    let (example, main) = if length < 4096 {
        ((20, 3, 1), (6, 1))
    } else {
        ((EXAMPLE_WORDS, 10, 3), (FREQ_CW, FREQ_UCW))
    };
    let (ex_context, ex_answer) = list(rng, words, example.0, example.1, example.2);
    let (context, answers) = list(rng, words, num_words, main.0, main.1);
    let shown = format!(
        "{}{}{}",
        fill(TEMPLATE, &[("context", &ex_context)]),
        ANSWER_PREFIX,
        numbered(&ex_answer)
    );
    Built {
        user: format!("{shown}\n{}", fill(TEMPLATE, &[("context", &context)])),
        answer_prefix: ANSWER_PREFIX.to_string(),
        answers,
        query: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::ruler::tests::{at, essay_text, Words};
    use crate::tasks::ruler::{generate, score, Sources, Task};

    fn pool(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("word{i:04}x")).collect()
    }

    #[test]
    fn vocabulary_keeps_plain_lower_case_words_once() {
        let v = vocabulary(
            "The cat's \"start\" art, start. Zebra e-mail (window) windows1 abcdefghijklm",
        );
        assert_eq!(v, ["start", "window", "windows"]);
    }

    #[test]
    fn common_words_appear_thirty_times_others_three_at_4096() {
        let words = pool(500);
        let b = build(&words, 100, 4096, &mut Rng::new(5));
        let task = &b.user[b.user.rfind("Below is a numbered list").expect("task")..];
        assert_eq!(b.answers.len(), NUM_CW);
        let count = |w: &str| task.split_whitespace().filter(|x| *x == w).count();
        for a in &b.answers {
            assert_eq!(count(a), FREQ_CW, "{a}");
        }
        let listed: Vec<&str> = task
            .split_whitespace()
            .filter(|x| x.starts_with("word") && x.ends_with('x'))
            .collect();
        assert_eq!(listed.len(), NUM_CW * FREQ_CW + 90 * FREQ_UCW);
        assert!(
            task.contains(&format!(" {}. ", listed.len())),
            "numbered to the end"
        );
        // The worked example first, with its answer after the answer prefix.
        assert!(b.user.starts_with(
            "Below is a numbered list of words. In these words, some appear more often than \
             others. Memorize the ones that appear most often.\n1. word"
        ));
        assert!(b.user.contains(
            "\nQuestion: What are the 10 most common words in the above list? Answer: The top \
             10 words that appear most often in the list are:1. word"
        ));
        assert!(b
            .user
            .ends_with("\nQuestion: What are the 10 most common words in the above list?"));
        assert_eq!(b.answer_prefix, ANSWER_PREFIX);
    }

    #[test]
    fn shorter_runs_repeat_words_less() {
        let b = build(&pool(500), 50, 1024, &mut Rng::new(6));
        let task = &b.user[b.user.rfind("Below is a numbered list").expect("task")..];
        let count = |w: &str| task.split_whitespace().filter(|x| *x == w).count();
        assert!(b.answers.iter().all(|a| count(a) == 6));
    }

    #[test]
    fn cwe_scores_the_share_of_common_words_listed() {
        let answers: Vec<String> = (0..10).map(|i| format!("common{i}")).collect();
        let all: Vec<String> = (0..10).map(|i| format!("{}. common{i}", i + 1)).collect();
        assert_eq!(score(Task::Cwe, &all.join(" "), &answers), 1.0);
        assert_eq!(
            score(Task::Cwe, "1. COMMON3 2. common7 3. other", &answers),
            0.2
        );
    }

    #[test]
    fn cwe_fills_the_length_to_within_one_word() {
        let sources = Sources::in_memory(Some(&essay_text(20)), Some(pool(3000)), None, None);
        let ex = generate(Task::Cwe, &sources, &Words, at(4096, 0, 0)).expect("fits");
        let budget = 4096 - TOKENS_TO_GENERATE;
        // One more word adds three entries of two whitespace tokens each.
        assert!(
            ex.tokens <= budget && ex.tokens + 2 * FREQ_UCW >= budget,
            "{}",
            ex.tokens
        );
    }
}
