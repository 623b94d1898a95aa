//! Answer checks of the needle trials, as the authors' code scores them.
//!
//! - [`qa_f1`]: LongBench's `qa_f1_score` (HeadKV `retrieval_head_detection_r2.py` keeps an R2
//!   trial when it exceeds 0.5), which is SQuAD's token F1: [`kvplan_common::score`]'s, shared
//!   with the evaluation.
//! - [`rouge1_recall`]: ROUGE-1 recall of the reference (Wu et al.'s `retrieval_head_detection.py`
//!   keeps a retrieval trial when it exceeds 0.5): lower-case, every run of characters outside
//!   `[a-z0-9]` is a separator (as `rouge_score`'s tokenizer), clipped unigram overlap divided by
//!   the reference's length. Unlike Wu et al. we apply no Porter stemmer, so plural/singular
//!   mismatches count as misses: slightly stricter.
//! - [`names_only`]: the calibrated retrieval-reasoning suite's check (kvplan's, not the authors'):
//!   the response holds the answer's distinguishing phrase, word for word in `rouge_score`'s
//!   tokens, and no other candidate's phrase.

use std::collections::HashMap;

pub use kvplan_common::score::qa_f1;

fn counts<'a>(tokens: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut m = HashMap::new();
    for t in tokens {
        *m.entry(t).or_insert(0) += 1;
    }
    m
}

fn overlap(a: &HashMap<&str, usize>, b: &HashMap<&str, usize>) -> usize {
    a.iter()
        .map(|(t, &n)| n.min(b.get(t).copied().unwrap_or(0)))
        .sum()
}

/// `rouge_score`'s tokens: lower case, runs of `[a-z0-9]`.
fn rouge_tokens(s: &str) -> Vec<String> {
    s.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// ROUGE-1 recall of `reference` by `prediction`, in [0, 1] (0 for an empty reference).
pub fn rouge1_recall(prediction: &str, reference: &str) -> f64 {
    let (p, r) = (rouge_tokens(prediction), rouge_tokens(reference));
    if r.is_empty() {
        return 0.0;
    }
    let pc = counts(p.iter().map(String::as_str));
    let rc = counts(r.iter().map(String::as_str));
    overlap(&rc, &pc) as f64 / r.len() as f64
}

/// Whether `phrase`'s tokens occur in `text`'s as one contiguous run (`rouge_score`'s tokens, so
/// case and punctuation do not matter); an empty phrase occurs nowhere.
pub fn holds_phrase(text: &str, phrase: &str) -> bool {
    let (t, p) = (rouge_tokens(text), rouge_tokens(phrase));
    !p.is_empty() && t.windows(p.len()).any(|w| w == p.as_slice())
}

/// Whether `response` names `key` and none of `others`: a response that names every candidate's
/// phrase, or another's beside the right one, has not chosen.
pub fn names_only(response: &str, key: &str, others: &[String]) -> bool {
    holds_phrase(response, key) && !others.iter().any(|o| holds_phrase(response, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rouge1_recall_of_known_strings() {
        // Reference 4 tokens; prediction covers "purple", "elephant": 2/4.
        let r = rouge1_recall("A purple elephant!", "purple elephant seventeen times");
        assert!((r - 0.5).abs() < 1e-12, "{r}");
        // Clipped counts: "the the the" matches "the" at most twice.
        let r = rouge1_recall("the the the", "the cat the");
        assert!((r - 2.0 / 3.0).abs() < 1e-12, "{r}");
        assert_eq!(rouge1_recall("x", ""), 0.0);
        // Punctuation separates tokens: "can't" → "can", "t".
        assert_eq!(rouge1_recall("can t", "can't"), 1.0);
    }

    #[test]
    fn the_calibrated_check_wants_the_right_phrase_and_no_other() {
        let key = "old train tickets";
        let others = [
            "blue glass bottles".to_string(),
            "recordings of church bells".to_string(),
        ];
        // Case and punctuation aside, the phrase word for word.
        assert!(names_only("Yara collects Old train-tickets.", key, &others));
        // Words of the phrase out of order, or only some of them, are not the phrase.
        assert!(!names_only("tickets for an old train", key, &others));
        assert!(!names_only("old train", key, &others));
        // Tokens, not characters: "bold train tickets" does not hold "old train tickets".
        assert!(!names_only("bold train tickets", key, &others));
        // Naming another candidate's phrase beside the right one is not a choice.
        assert!(!names_only(
            "Yara collects old train tickets; Omar collects blue glass bottles.",
            key,
            &others
        ));
        assert!(!names_only("anything", "", &[]));
    }
}
