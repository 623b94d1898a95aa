//! Scoring, as RULER's `eval/synthetic/constants.py` and `eval/evaluate.py` do it
//! (`nvidia-long-context-eval==26.3`), and SQuAD's token F1 for free-form QA.
//!
//! RULER first post-processes a prediction (strip, control characters → newline, strip), then
//! scores it against its references case-insensitively by substring:
//! - `string_match_all` (niah, variable tracking, common / frequent words): the share of the
//!   references found in the prediction;
//! - `string_match_part` (qa): 1 when any reference is found.
//!
//! RULER reports these ×100; here every score is in [0, 1].

/// RULER's `postprocess_pred`: trim, replace ASCII control characters by newlines, trim again.
pub fn postprocess(pred: &str) -> String {
    let cleaned: String = pred
        .trim()
        .chars()
        .map(|c| if (c as u32) < 0x20 { '\n' } else { c })
        .collect();
    cleaned.trim().to_string()
}

/// Share of `refs` that occur in `pred` (case-insensitive substrings); 0 when `refs` is empty.
pub fn string_match_all(pred: &str, refs: &[&str]) -> f64 {
    if refs.is_empty() {
        return 0.0;
    }
    let pred = pred.to_lowercase();
    let found = refs
        .iter()
        .filter(|r| pred.contains(&r.to_lowercase()))
        .count();
    found as f64 / refs.len() as f64
}

/// 1 when any of `refs` occurs in `pred` (case-insensitive substring), else 0.
pub fn string_match_part(pred: &str, refs: &[&str]) -> f64 {
    let pred = pred.to_lowercase();
    let any = refs.iter().any(|r| pred.contains(&r.to_lowercase()));
    if any {
        1.0
    } else {
        0.0
    }
}

/// SQuAD's `normalize_answer`: lower case, punctuation removed, articles (a, an, the) removed,
/// whitespace collapsed; returns the tokens.
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

/// SQuAD token F1 of `pred` against one reference: 2PR/(P+R) over the multiset of normalised
/// tokens they share; 0 when either side is empty after normalising.
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
    fn postprocess_strips_and_turns_control_characters_into_newlines() {
        assert_eq!(postprocess("  7 1\t2\r\n"), "7 1\n2");
        assert_eq!(postprocess("\u{1}abc\u{7f}"), "abc\u{7f}");
    }

    #[test]
    fn match_all_counts_the_share_of_references_found_ignoring_case() {
        let pred = "The numbers are 1234567 and ABC-9.";
        assert_eq!(string_match_all(pred, &["1234567"]), 1.0);
        assert_eq!(string_match_all(pred, &["1234567", "abc-9"]), 1.0);
        assert_eq!(string_match_all(pred, &["1234567", "7654321"]), 0.5);
        assert_eq!(string_match_all(pred, &["1", "2", "3", "x"]), 0.75);
        assert_eq!(string_match_all(pred, &[]), 0.0);
        // A substring match, as RULER's: "123456" is inside "1234567".
        assert_eq!(string_match_all(pred, &["123456"]), 1.0);
    }

    #[test]
    fn match_part_is_one_when_any_reference_is_found() {
        assert_eq!(
            string_match_part("Paris, France", &["london", "PARIS"]),
            1.0
        );
        assert_eq!(string_match_part("Paris, France", &["london"]), 0.0);
        assert_eq!(string_match_part("anything", &[]), 0.0);
    }

    #[test]
    fn normalize_drops_case_punctuation_and_articles() {
        assert_eq!(
            normalize_answer("The  Eiffel Tower, in an old city!"),
            ["eiffel", "tower", "in", "old", "city"]
        );
    }

    #[test]
    fn f1_on_hand_worked_strings() {
        // pred {eiffel, tower}, ref {eiffel, tower, paris}: P = 1, R = 2/3, F1 = 0.8.
        assert!((qa_f1("The Eiffel Tower", "Eiffel Tower, Paris") - 0.8).abs() < 1e-12);
        // Repeated tokens count once each side: pred {a? no: "red", "red", "car"}, ref {"red",
        // "car"}: overlap 2, P = 2/3, R = 1, F1 = 0.8.
        assert!((qa_f1("red red car", "red car") - 0.8).abs() < 1e-12);
        assert_eq!(qa_f1("blue", "red car"), 0.0);
        assert_eq!(qa_f1("the", "a"), 0.0);
        assert_eq!(qa_f1("Denver Broncos", "denver broncos."), 1.0);
        assert!(
            (qa_f1_max("Denver", &["Carolina Panthers", "Denver Broncos"]) - 2.0 / 3.0).abs()
                < 1e-12
        );
    }
}
