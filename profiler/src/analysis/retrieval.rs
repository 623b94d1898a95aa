//! Retrieval heads (HeadKV §3.1 eq. 1, after Wu et al.).
//!
//! At decode step t, head h earns 1/N when the token it attends to most (`argmax(a_h^t)`, ties:
//! the lower position) lies inside the needle's answer span *and* is the token just generated
//! (Wu et al.'s `retrieval_head_detection.py` checks both). N is the span's length in tokens; we
//! divide by max(N, decode steps allowed) so that a trial's score stays in [0, 1] even when the
//! answer tokenises longer than the span. A head's score is the mean over kept trials.

use std::ops::Range;

use super::argmax;

/// Whether one decode step's attention `row` (over keys at `key_positions`) copies from `span`:
/// the most-attended key lies in `span` and holds the `generated` token in `prompt`.
pub fn copies_from_span(
    row: &[f32],
    key_positions: &[usize],
    span: &Range<usize>,
    prompt: &[u32],
    generated: u32,
) -> bool {
    argmax(row)
        .and_then(|i| key_positions.get(i).copied())
        .is_some_and(|p| span.contains(&p) && prompt.get(p) == Some(&generated))
}

/// Denominator of a trial's score: the span length N, or the decode budget when longer.
pub fn denominator(span_len: usize, decode_budget: usize) -> f64 {
    span_len.max(decode_budget).max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prompt of 8 tokens; the needle's answer occupies positions 3..6 with tokens 30, 40, 50.
    const PROMPT: [u32; 8] = [1, 2, 9, 30, 40, 50, 7, 8];
    const SPAN: Range<usize> = 3..6;

    fn one_hot(n: usize, at: usize) -> Vec<f32> {
        let mut r = vec![0.01; n];
        r[at] = 0.9;
        r
    }

    #[test]
    fn head_always_looking_at_the_needle_scores_one() {
        // Three decode steps generate 30, 40, 50; the head's top key is the matching needle token
        // each time: 3 hits · 1/N with N = 3 → 1.
        let keys: Vec<usize> = (0..8).collect();
        let generated = [30, 40, 50];
        let mut score = 0.0;
        for (t, &g) in generated.iter().enumerate() {
            if copies_from_span(&one_hot(8, 3 + t), &keys, &SPAN, &PROMPT, g) {
                score += 1.0 / denominator(SPAN.len(), generated.len());
            }
        }
        assert!((score - 1.0).abs() < 1e-12, "{score}");
    }

    #[test]
    fn needs_both_the_span_and_the_generated_token() {
        let keys: Vec<usize> = (0..8).collect();
        // Right place, wrong token generated.
        assert!(!copies_from_span(&one_hot(8, 3), &keys, &SPAN, &PROMPT, 40));
        // Same token outside the span (position 2 holds 9; generated 9).
        assert!(!copies_from_span(&one_hot(8, 2), &keys, &SPAN, &PROMPT, 9));
        // Keys stored out of order: index 0 holds position 4 (token 40).
        let shuffled = [4, 0, 1, 2, 3, 5, 6, 7];
        assert!(copies_from_span(
            &one_hot(8, 0),
            &shuffled,
            &SPAN,
            &PROMPT,
            40
        ));
    }

    #[test]
    fn score_is_bounded_when_decoding_more_steps_than_the_span() {
        assert_eq!(denominator(3, 5), 5.0);
        assert_eq!(denominator(4, 2), 4.0);
    }
}
