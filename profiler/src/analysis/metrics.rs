//! Answer checks of the needle trials, as the authors' code scores them.
//!
//! - [`qa_f1`]: LongBench's `qa_f1_score` (HeadKV `retrieval_head_detection_r2.py` keeps an R2
//!   trial when it exceeds 0.5): lower-case, drop ASCII punctuation, drop the articles a/an/the,
//!   split on white space; F1 of the bag-of-words overlap.
//! - [`rouge1_recall`]: ROUGE-1 recall of the reference (Wu et al.'s `retrieval_head_detection.py`
//!   keeps a retrieval trial when it exceeds 0.5): lower-case, every run of characters outside
//!   `[a-z0-9]` is a separator (as `rouge_score`'s tokenizer), clipped unigram overlap divided by
//!   the reference's length. Unlike Wu et al. we apply no Porter stemmer, so plural/singular
//!   mismatches count as misses: slightly stricter.

use std::collections::HashMap;

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

/// LongBench's `normalize_answer`: lower case, no punctuation, no articles, single spaces.
pub fn normalize_answer(s: &str) -> String {
    let lower = s.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// QA-F1 of `prediction` against `truth`, in [0, 1].
pub fn qa_f1(prediction: &str, truth: &str) -> f64 {
    let p = normalize_answer(prediction);
    let t = normalize_answer(truth);
    let (pc, tc) = (counts(p.split(' ')), counts(t.split(' ')));
    let (np, nt) = (
        p.split(' ').filter(|w| !w.is_empty()).count(),
        t.split(' ').filter(|w| !w.is_empty()).count(),
    );
    let same = overlap(&pc, &tc);
    if same == 0 || np == 0 || nt == 0 {
        return 0.0;
    }
    let precision = same as f64 / np as f64;
    let recall = same as f64 / nt as f64;
    2.0 * precision * recall / (precision + recall)
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
    fn normalisation_drops_case_punctuation_and_articles() {
        assert_eq!(normalize_answer("The  Cat, an owl & A dog!"), "cat owl dog");
    }

    #[test]
    fn qa_f1_of_known_strings() {
        assert_eq!(qa_f1("bake bread", "bake bread"), 1.0);
        // Prediction "bake bread daily" vs truth "to bake sourdough bread": overlap 2 (bake,
        // bread); P = 2/3, R = 2/4; F1 = 2·(2/3)(1/2)/(2/3 + 1/2) = (2/3)/(7/6) = 4/7.
        let f = qa_f1("Bake bread daily.", "to bake sourdough bread");
        assert!((f - 4.0 / 7.0).abs() < 1e-12, "{f}");
        assert_eq!(qa_f1("nothing shared", "bake bread"), 0.0);
        assert_eq!(qa_f1("", "bake bread"), 0.0);
        // Articles alone normalise to nothing.
        assert_eq!(qa_f1("the", "a"), 0.0);
    }

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
