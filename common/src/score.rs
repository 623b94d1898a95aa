//! Token F1 of a free-form answer: SQuAD's `f1_score` (`evaluate-v1.1.py`), which LongBench's
//! `qa_f1_score` repeats and HeadKV's retrieval-reasoning check (`retrieval_head_detection_r2.py`)
//! keeps when above 0.5. Both sides are normalised (lower case, ASCII punctuation dropped, the
//! articles a/an/the dropped, split on white space); F1 = 2PR/(P+R) over the multiset of tokens
//! they share.

/// SQuAD's `normalize_answer`, as tokens: lower case, ASCII punctuation removed, articles (a, an,
/// the) removed, split on white space.
pub fn normalize_answer(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    no_punct
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .map(str::to_string)
        .collect()
}

/// Token F1 of `pred` against one reference, in [0, 1]: 2PR/(P+R) over the multiset of
/// normalised tokens they share; 0 when either side is empty after normalising.
pub fn qa_f1(pred: &str, reference: &str) -> f64 {
    let p = normalize_answer(pred);
    let r = normalize_answer(reference);
    if p.is_empty() || r.is_empty() {
        return 0.0;
    }
    let mut left: Vec<&String> = r.iter().collect();
    let mut same = 0usize;
    for t in &p {
        if let Some(i) = left.iter().position(|x| *x == t) {
            left.swap_remove(i);
            same += 1;
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / r.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// The best [`qa_f1`] over several references (SQuAD's `metric_max_over_ground_truths`).
pub fn qa_f1_max(pred: &str, refs: &[&str]) -> f64 {
    refs.iter().map(|r| qa_f1(pred, r)).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_drops_case_punctuation_and_articles() {
        assert_eq!(
            normalize_answer("The  Eiffel Tower, in an old city!"),
            ["eiffel", "tower", "in", "old", "city"]
        );
        assert_eq!(
            normalize_answer("The  Cat, an owl & A dog!"),
            ["cat", "owl", "dog"]
        );
    }

    #[test]
    fn f1_on_hand_worked_strings() {
        // pred {eiffel, tower}, ref {eiffel, tower, paris}: P = 1, R = 2/3, F1 = 0.8.
        assert!((qa_f1("The Eiffel Tower", "Eiffel Tower, Paris") - 0.8).abs() < 1e-12);
        // Repeated tokens count once each side: pred {red, red, car}, ref {red, car}: overlap
        // 2, P = 2/3, R = 1, F1 = 0.8.
        assert!((qa_f1("red red car", "red car") - 0.8).abs() < 1e-12);
        // Prediction "bake bread daily" vs truth "to bake sourdough bread": overlap 2 (bake,
        // bread); P = 2/3, R = 2/4; F1 = 2·(2/3)(1/2)/(2/3 + 1/2) = (2/3)/(7/6) = 4/7.
        let f = qa_f1("Bake bread daily.", "to bake sourdough bread");
        assert!((f - 4.0 / 7.0).abs() < 1e-12, "{f}");
        assert_eq!(qa_f1("bake bread", "bake bread"), 1.0);
        assert_eq!(qa_f1("Denver Broncos", "denver broncos."), 1.0);
        assert_eq!(qa_f1("blue", "red car"), 0.0);
        assert_eq!(qa_f1("", "bake bread"), 0.0);
        // Articles alone normalise to nothing.
        assert_eq!(qa_f1("the", "a"), 0.0);
        assert!(
            (qa_f1_max("Denver", &["Carolina Panthers", "Denver Broncos"]) - 2.0 / 3.0).abs()
                < 1e-12
        );
    }
}
