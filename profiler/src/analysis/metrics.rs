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
}
