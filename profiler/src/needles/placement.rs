//! Needle placement, as Wu et al.'s and HeadKV's `insert_needle` do it, on token ids: the
//! placement itself is [`kvplan_common::needle`]'s (shared with the evaluation; depth a fraction
//! in [0, 1]); this module adds the answer span, located inside the needle's tokens (exactly when
//! the answer tokenises the same there, else the window of best token overlap, as the authors'
//! `find_needle_idx` does). The profile's settings give depths in percent, as the papers do;
//! callers divide by 100.

use std::collections::HashSet;
use std::ops::Range;

use kvplan_common::needle;

/// A needle prompt ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The prompt's token ids.
    pub ids: Vec<u32>,
    /// Index of the needle's first token.
    pub needle_start: usize,
    /// The answer's tokens inside the prompt (the scored span).
    pub answer_span: Range<usize>,
}

/// Where `answer` lies inside `needle`: an exact match, else the first window of `answer`'s
/// length with the largest share of `answer`'s distinct tokens.
pub fn find_span(needle: &[u32], answer: &[u32]) -> Range<usize> {
    let n = answer.len().min(needle.len());
    if n == 0 {
        return 0..0;
    }
    if let Some(i) = needle.windows(answer.len()).position(|w| w == answer) {
        return i..i + answer.len();
    }
    let want: HashSet<u32> = answer.iter().copied().collect();
    let mut best = (0usize, 0usize);
    for (i, w) in needle.windows(n).enumerate() {
        let have: HashSet<u32> = w.iter().copied().collect();
        let overlap = have.intersection(&want).count();
        if overlap > best.1 {
            best = (i, overlap);
        }
    }
    best.0..best.0 + n
}

/// The parts of a prompt around the haystack.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Tokens before the haystack (a chat header, or nothing).
    pub prefix: &'a [u32],
    /// Tokens after it: the question.
    pub suffix: &'a [u32],
}

/// Builds the prompt: prefix, haystack (cut to fit) with the needle at `depth` ∈ [0, 1], suffix;
/// `None` when the haystack is too short or the length leaves no room for it.
pub fn place(
    haystack: &[u32],
    needle: &[u32],
    answer: &[u32],
    frame: Frame<'_>,
    length: usize,
    depth: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> Option<Placed> {
    let shared = needle::Frame {
        prefix: frame.prefix,
        needle,
        suffix: frame.suffix,
    };
    let placed = needle::place(haystack, shared, length, depth, is_sentence_end)?;
    let span = find_span(needle, answer);
    let start = placed.needle.start;
    Some(Placed {
        ids: placed.ids,
        needle_start: start,
        answer_span: start + span.start..start + span.end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token 0 ends a sentence ("."); others are words.
    fn is_period(t: u32) -> bool {
        t == 0
    }

    #[test]
    fn percent_depths_of_the_profiles_place_as_the_percent_formula_did() {
        // The profiles' depths (round(linspace(0, 100, 10)), the quick profile's 25 and 75)
        // divided by 100 must give ⌊len · d / 100⌋, the formula profiles were made with, for
        // every haystack up to 70K tokens (float rounding could otherwise move a needle).
        let depths = [
            0.0, 11.0, 22.0, 33.0, 44.0, 56.0, 67.0, 78.0, 89.0, 100.0, 25.0, 75.0,
        ];
        // Every token ends a sentence, so the insertion point is the floor itself.
        let hay = vec![1u32; 70_000];
        for d in depths {
            for len in 1..hay.len() {
                let old = if d >= 100.0 {
                    len
                } else {
                    (len as f64 * d / 100.0).floor() as usize
                };
                let at = needle::insertion_point(&hay[..len], d / 100.0, |_| true);
                assert_eq!(at, old, "depth {d}%, {len} tokens");
            }
        }
    }

    #[test]
    fn prompt_has_the_requested_length_and_the_needle_at_its_depth() {
        let hay: Vec<u32> = (1..=40)
            .map(|i| if i % 5 == 0 { 0 } else { 100 + i })
            .collect();
        let needle = [900, 901, 902, 903];
        let answer = [902, 903];
        let question = [700, 701];
        let frame = Frame {
            prefix: &[],
            suffix: &question,
        };
        // Length 30: haystack budget 30 − 4 − 2 = 24; 0.5 · 24 = 12 → back to 10 (after hay[9]).
        let p = place(&hay, &needle, &answer, frame, 30, 0.5, is_period).unwrap();
        assert_eq!(p.ids.len(), 30);
        assert_eq!(p.needle_start, 10);
        assert_eq!(&p.ids[10..14], &needle);
        assert_eq!(p.answer_span, 12..14);
        assert_eq!(&p.ids[28..], &question);
        // The haystack before and after the needle is the cut haystack, in order.
        assert_eq!(&p.ids[..10], &hay[..10]);
        assert_eq!(&p.ids[14..28], &hay[10..24]);
        // Too short a haystack or length: no prompt.
        assert!(place(&hay[..5], &needle, &answer, frame, 30, 0.5, is_period).is_none());
        assert!(place(&hay, &needle, &answer, frame, 6, 0.5, is_period).is_none());
        // A prefix shifts the needle and the span; the length still holds.
        let framed = Frame {
            prefix: &[1, 2],
            suffix: &question,
        };
        let p = place(&hay, &needle, &answer, framed, 30, 0.5, is_period).unwrap();
        assert_eq!(p.ids.len(), 30);
        assert_eq!(&p.ids[..2], &[1, 2]);
        // Budget 22; 0.5 · 22 = 11 → back to 10; needle at 2 + 10.
        assert_eq!(p.needle_start, 12);
        assert_eq!(p.answer_span, 14..16);
    }

    #[test]
    fn answer_span_falls_back_to_best_overlap() {
        // The answer tokenised alone differs in its first token (no leading space): best window.
        assert_eq!(find_span(&[5, 6, 7, 8, 9], &[7, 8]), 2..4);
        assert_eq!(find_span(&[5, 6, 7, 8, 9], &[77, 8, 9]), 2..5);
    }
}
