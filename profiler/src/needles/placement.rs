//! Needle placement, as Wu et al.'s and HeadKV's `insert_needle` do it, on token ids.
//!
//! The haystack is cut to `length − |needle| − |question|` tokens so that the prompt has exactly
//! the requested length. The needle goes at `⌊depth% · haystack⌋` tokens, moved back to just after
//! the nearest sentence end (a token ending in "."), so it starts a sentence; at depth 100 it goes
//! after the whole haystack. The answer span is located inside the needle's tokens (exactly when
//! the answer tokenises the same there, else the window of best token overlap, as the authors'
//! `find_needle_idx` does).

use std::collections::HashSet;
use std::ops::Range;

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

/// Index in `haystack` where the needle goes for `depth_percent`.
pub fn insertion_point(
    haystack: &[u32],
    depth_percent: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> usize {
    if depth_percent >= 100.0 {
        return haystack.len();
    }
    let mut at = (haystack.len() as f64 * depth_percent / 100.0).floor() as usize;
    while at > 0 && !is_sentence_end(haystack[at - 1]) {
        at -= 1;
    }
    at
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

/// Builds the prompt: prefix, haystack (cut to fit) with the needle at the depth, suffix; `None`
/// when the haystack is too short or the length leaves no room for it.
pub fn place(
    haystack: &[u32],
    needle: &[u32],
    answer: &[u32],
    frame: Frame<'_>,
    length: usize,
    depth_percent: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> Option<Placed> {
    let (prefix, question) = (frame.prefix, frame.suffix);
    let budget = length.checked_sub(prefix.len() + needle.len() + question.len())?;
    if budget == 0 || haystack.len() < budget {
        return None;
    }
    let hay = &haystack[..budget];
    let at = insertion_point(hay, depth_percent, is_sentence_end);
    let mut ids = Vec::with_capacity(length);
    ids.extend_from_slice(prefix);
    ids.extend_from_slice(&hay[..at]);
    ids.extend_from_slice(needle);
    ids.extend_from_slice(&hay[at..]);
    ids.extend_from_slice(question);
    let span = find_span(needle, answer);
    let start = prefix.len() + at;
    Some(Placed {
        ids,
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
    fn needle_lands_after_the_sentence_end_before_the_requested_depth() {
        // Haystack of 20 tokens with periods at indices 4, 9, 14, 19.
        let hay: Vec<u32> = (1..=20).map(|i| if i % 5 == 0 { 0 } else { i }).collect();
        // 50% of 20 = 10: hay[9] is a period, so the needle goes right at 10.
        assert_eq!(insertion_point(&hay, 50.0, is_period), 10);
        // 60% = 12: walk back to just after the period at 9 → 10.
        assert_eq!(insertion_point(&hay, 60.0, is_period), 10);
        // 0% → 0; 100% → the end.
        assert_eq!(insertion_point(&hay, 0.0, is_period), 0);
        assert_eq!(insertion_point(&hay, 100.0, is_period), 20);
        // 20% = 4: hay[3] is not a period and none before it → start.
        assert_eq!(insertion_point(&hay, 20.0, is_period), 0);
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
        // Length 30: haystack budget 30 − 4 − 2 = 24; 50% = 12 → back to 10 (after hay[9]).
        let p = place(&hay, &needle, &answer, frame, 30, 50.0, is_period).unwrap();
        assert_eq!(p.ids.len(), 30);
        assert_eq!(p.needle_start, 10);
        assert_eq!(&p.ids[10..14], &needle);
        assert_eq!(p.answer_span, 12..14);
        assert_eq!(&p.ids[28..], &question);
        // The haystack before and after the needle is the cut haystack, in order.
        assert_eq!(&p.ids[..10], &hay[..10]);
        assert_eq!(&p.ids[14..28], &hay[10..24]);
        // Too short a haystack or length: no prompt.
        assert!(place(&hay[..5], &needle, &answer, frame, 30, 50.0, is_period).is_none());
        assert!(place(&hay, &needle, &answer, frame, 6, 50.0, is_period).is_none());
        // A prefix shifts the needle and the span; the length still holds.
        let framed = Frame {
            prefix: &[1, 2],
            suffix: &question,
        };
        let p = place(&hay, &needle, &answer, framed, 30, 50.0, is_period).unwrap();
        assert_eq!(p.ids.len(), 30);
        assert_eq!(&p.ids[..2], &[1, 2]);
        // Budget 22; 50% = 11 → back to 10; needle at 2 + 10.
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
