//! Real text as token ids: haystacks for the needle trials and samples for the layer analyses.

use kvplan_runtime::generate::SplitMix64;
use kvplan_runtime::tokenizer::Tokenizer;

use crate::{Error, Result};
use kvplan_common::data::Corpus;

/// Characters per token assumed when cutting text before encoding (generous for English BPE).
const CHARS_PER_TOKEN: usize = 6;

/// Byte offset of a paragraph start in the first half of `text`, chosen by `rng` (0 when the
/// text has no paragraph break there).
fn paragraph_start(text: &str, rng: &mut SplitMix64) -> usize {
    let half = text.len() / 2;
    let starts: Vec<usize> = text
        .match_indices("\n\n")
        .map(|(i, _)| i + 2)
        .filter(|&i| i < half)
        .collect();
    if starts.is_empty() {
        return 0;
    }
    starts[(rng.next_u64() % starts.len() as u64) as usize]
}

/// Exactly `n` tokens of `corpus` text: from the start of a seeded document (`from_paragraph`:
/// from a seeded paragraph in its first half), continuing through the next documents in order.
pub(crate) fn text_tokens(
    tok: &Tokenizer,
    corpus: &Corpus,
    seed: u64,
    n: usize,
    from_paragraph: bool,
) -> Result<Vec<u32>> {
    let docs = &corpus.documents;
    if docs.is_empty() {
        return Err(Error::Data(format!("{} is empty", corpus.source)));
    }
    let mut rng = SplitMix64::new(seed);
    let first = (rng.next_u64() % docs.len() as u64) as usize;
    let mut text = String::new();
    let start = if from_paragraph {
        paragraph_start(&docs[first].1, &mut rng)
    } else {
        0
    };
    text.push_str(docs[first].1[start..].trim_start());
    let mut next = first + 1;
    let mut ids = Vec::new();
    // Each pass adds documents until the text is long enough, then encodes it; a corpus shorter
    // than the request is an error rather than an endless loop.
    for _ in 0..=docs.len() {
        while text.len() < n * CHARS_PER_TOKEN && next < first + docs.len() {
            text.push_str("\n\n");
            text.push_str(docs[next % docs.len()].1.trim());
            next += 1;
        }
        let cut = floor_char_boundary(&text, (n * CHARS_PER_TOKEN).max(1) * 2);
        ids = tok.encode(&text[..cut])?;
        if ids.len() >= n || next >= first + docs.len() {
            break;
        }
        text.push_str("\n\n");
        text.push_str(docs[next % docs.len()].1.trim());
        next += 1;
    }
    if ids.len() < n {
        return Err(Error::Data(format!(
            "{} yields only {} tokens, {n} needed",
            corpus.source,
            ids.len()
        )));
    }
    ids.truncate(n);
    Ok(ids)
}

fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
