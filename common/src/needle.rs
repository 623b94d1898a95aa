//! Needle placement on token ids, shared by the profiler's needle trials (Wu et al.'s and
//! HeadKV's `insert_needle`) and the NIAH evaluation (RULER's `niah`).
//!
//! The haystack is cut to `length − |prefix| − |needle| − |suffix|` tokens, so the prompt has
//! exactly `length` tokens. The needle goes at `⌊depth · haystack⌋` with `depth` a fraction in
//! [0, 1], moved back to just after the nearest sentence end (a token ending in a period), so it
//! starts a sentence as both references insert between sentences; at depth 1 it goes after the
//! whole haystack.

use std::ops::Range;

/// Index in `haystack` where the needle goes at `depth` ∈ [0, 1]: `⌊depth · len⌋`, moved back to
/// just after the nearest sentence end; `len` at depth 1.
pub fn insertion_point(
    haystack: &[u32],
    depth: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> usize {
    if depth >= 1.0 {
        return haystack.len();
    }
    let mut at = (haystack.len() as f64 * depth.max(0.0)).floor() as usize;
    while at > 0 && !is_sentence_end(haystack[at - 1]) {
        at -= 1;
    }
    at
}

/// Tokens of a prompt around the haystack.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Before the haystack (chat header, template head, or nothing).
    pub prefix: &'a [u32],
    /// The needle.
    pub needle: &'a [u32],
    /// After the haystack (question, end of turn, answer prefix).
    pub suffix: &'a [u32],
}

/// A prompt with its needle in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The prompt's token ids, exactly the requested length.
    pub ids: Vec<u32>,
    /// Where the needle's tokens lie in `ids`.
    pub needle: Range<usize>,
}

impl Placed {
    /// Where the needle starts, as a fraction of the haystack it was placed in.
    pub fn depth_of(&self, prefix_len: usize, haystack_len: usize) -> f64 {
        (self.needle.start - prefix_len) as f64 / haystack_len.max(1) as f64
    }
}

/// Builds a prompt of exactly `length` tokens: prefix, the haystack cut to fit with the needle
/// at `depth` ∈ [0, 1], suffix. `None` when `haystack` is too short or `length` leaves no room
/// for any haystack.
pub fn place(
    haystack: &[u32],
    frame: Frame<'_>,
    length: usize,
    depth: f64,
    is_sentence_end: impl Fn(u32) -> bool,
) -> Option<Placed> {
    let fixed = frame.prefix.len() + frame.needle.len() + frame.suffix.len();
    let room = length.checked_sub(fixed)?;
    if room == 0 || haystack.len() < room {
        return None;
    }
    let hay = &haystack[..room];
    let at = insertion_point(hay, depth, is_sentence_end);
    let mut ids = Vec::with_capacity(length);
    ids.extend_from_slice(frame.prefix);
    ids.extend_from_slice(&hay[..at]);
    let start = ids.len();
    ids.extend_from_slice(frame.needle);
    let end = ids.len();
    ids.extend_from_slice(&hay[at..]);
    ids.extend_from_slice(frame.suffix);
    Some(Placed {
        ids,
        needle: start..end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token 0 ends a sentence ("."); others are words.
    fn is_period(t: u32) -> bool {
        t == 0
    }

    /// 40 tokens, a period (0) every 5th.
    fn hay() -> Vec<u32> {
        (1..=40)
            .map(|i| if i % 5 == 0 { 0 } else { 100 + i })
            .collect()
    }

    #[test]
    fn insertion_walks_back_to_the_sentence_start_before_the_depth() {
        // Haystack of 20 tokens with periods at indices 4, 9, 14, 19.
        let hay: Vec<u32> = (1..=20).map(|i| if i % 5 == 0 { 0 } else { i }).collect();
        // 0.5 · 20 = 10: hay[9] is a period, so the needle goes right at 10.
        assert_eq!(insertion_point(&hay, 0.5, is_period), 10);
        // 0.6 · 20 = 12: walk back to just after the period at 9 → 10.
        assert_eq!(insertion_point(&hay, 0.6, is_period), 10);
        // 0 → 0; 1 → the end.
        assert_eq!(insertion_point(&hay, 0.0, is_period), 0);
        assert_eq!(insertion_point(&hay, 1.0, is_period), 20);
        // 0.2 · 20 = 4: hay[3] is not a period and none before it → start.
        assert_eq!(insertion_point(&hay, 0.2, is_period), 0);
    }

    #[test]
    fn needle_sits_at_the_sentence_start_before_the_requested_depth() {
        let (prefix, needle, suffix) = ([7u32, 7], [9u32, 9, 9], [8u32]);
        let frame = Frame {
            prefix: &prefix,
            needle: &needle,
            suffix: &suffix,
        };
        // Room = 26 − 6 = 20 haystack tokens; 0.5 → 10, hay[9] is a period → at 10.
        let p = place(&hay(), frame, 26, 0.5, is_period).expect("fits");
        assert_eq!(p.ids.len(), 26);
        assert_eq!(p.needle, 12..15);
        assert_eq!(&p.ids[12..15], &needle);
        assert_eq!(&p.ids[..2], &prefix);
        assert_eq!(p.ids[25], 8);
        assert_eq!(p.ids[11], 0, "the token before the needle ends a sentence");
        assert_eq!(p.depth_of(2, 20), 0.5);
        // 0.65 · 20 = 13 → back to just after the period at 9 → 10.
        let at = |d: f64| place(&hay(), frame, 26, d, is_period).map(|p| p.needle);
        assert_eq!(at(0.65), Some(12..15));
        // 0 → start of the haystack; 1 → after all of it.
        assert_eq!(at(0.0), Some(2..5));
        let end = place(&hay(), frame, 26, 1.0, is_period).expect("fits");
        assert_eq!(end.needle, 22..25);
        // The haystack keeps its order around the needle.
        assert_eq!(end.ids[2..22], hay()[..20]);
    }

    #[test]
    fn too_short_haystack_or_length_gives_none() {
        let frame = Frame {
            prefix: &[1],
            needle: &[2],
            suffix: &[3],
        };
        assert!(place(&hay(), frame, 3, 0.5, is_period).is_none());
        assert!(place(&hay(), frame, 44, 0.5, is_period).is_none());
        assert!(place(&hay(), frame, 43, 0.5, is_period).is_some());
    }
}
