//! SentencePiece-style BPE (`tokenizer.ggml.model = "llama"`) from tokens, scores and token types,
//! for files that carry no merges (Gemma).
//!
//! The merges are derived as Hugging Face transformers' GGUF converter derives them
//! (`GGUFTokenizerSkeleton`): every way of cutting a token into two pieces that are both tokens is
//! a merge; one token's cuts are ordered by the pieces' scores (higher first, ties in cut order);
//! all merges are then ordered by the rank of the token they make. The rank is the token's score,
//! except for Gemma's vocabulary, which is already in merge order while its scores have placeholders
//! punched through them (every whitespace run scores −1000): there the rank is the position, lower
//! first. Gemma's vocabulary is recognised as transformers recognises it, by tokens made of spaces
//! written as spaces; they are respelled with `▁` (U+2581) before the merges are derived, so `▁▁`
//! can be reached from `▁`.
//!
//! Text is normalised by writing every space as `▁` (no pre-tokenizer: the whole text is one chunk);
//! a `▁` is prepended only when `tokenizer.ggml.add_space_prefix` is true (llama.cpp's default when
//! the key is absent; Gemma's file says false). Characters outside the vocabulary fall back to their
//! UTF-8 bytes as `<0xNN>` tokens. Control tokens (type 3) are special tokens, recognised inside
//! text; user-defined tokens (type 4: Gemma's newline, tab and space runs, `[multimodal]`) are kept
//! whole wherever they occur, as SentencePiece and llama.cpp keep them. (transformers' GGUF path
//! leaves both to the merges; the fixtures' cases give the same ids either way.)

use std::collections::{HashMap, HashSet};

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab as BpeVocab, BPE};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::{AddedToken, NormalizerWrapper, Tokenizer as HfTokenizer};

use super::meta::{flag, scores, TokenType, Vocab};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// SentencePiece's word-boundary mark, which stands for a space inside tokens.
const SPACE_MARK: char = '\u{2581}';

/// Builds the SentencePiece-style BPE tokenizer of `gguf`.
pub(super) fn build(gguf: &GgufFile, vocab: &Vocab<'_>) -> Result<HfTokenizer> {
    let scores = scores(gguf, vocab.tokens.len())?;
    let spelled: Vec<String> = vocab.tokens.iter().map(|t| respelled(t)).collect();
    let rank_by_position = spelled
        .iter()
        .zip(&vocab.tokens)
        .any(|(s, t)| s.as_str() != *t);
    let merges = derive_merges(&spelled, &scores, rank_by_position);
    let unk = vocab.token_id(gguf, "tokenizer.ggml.unknown_token_id")?;
    let ids: BpeVocab = spelled
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let mut builder = BPE::builder()
        .vocab_and_merges(ids, merges)
        .fuse_unk(true)
        .byte_fallback(true);
    if let Some(id) = unk {
        builder = builder.unk_token(spelled[id as usize].clone());
    }
    let bpe = builder
        .build()
        .map_err(|e| Error::Tokenizer(format!("building BPE from tokenizer.ggml.scores: {e}")))?;
    let mut inner = HfTokenizer::new(bpe);
    let space_prefix = flag(gguf, "tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
    inner.with_normalizer(Some(normalizer(space_prefix)?));
    inner.with_decoder(Some(decoder(space_prefix)?));
    add_whole_tokens(&mut inner, vocab, &spelled);
    Ok(inner)
}

/// A token made only of spaces, in the `▁` spelling the merges and the normaliser use.
fn respelled(token: &str) -> String {
    if !token.is_empty() && token.chars().all(|c| c == ' ') {
        SPACE_MARK.to_string().repeat(token.chars().count())
    } else {
        token.to_string()
    }
}

/// Merges in priority order (see the module header for the derivation).
fn derive_merges(
    tokens: &[String],
    scores: &[f32],
    rank_by_position: bool,
) -> Vec<(String, String)> {
    // Later duplicates win, as in the Python dictionaries the reference builds.
    let mut score: HashMap<&str, f32> = HashMap::with_capacity(tokens.len());
    let mut position: HashMap<&str, usize> = HashMap::with_capacity(tokens.len());
    for (i, t) in tokens.iter().enumerate() {
        score.insert(t, scores[i]);
        position.insert(t, i);
    }
    let rank = |t: &str| -> f64 {
        if rank_by_position {
            -(position[t] as f64)
        } else {
            score[t] as f64
        }
    };
    let by_desc = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal);
    let mut seen = HashSet::with_capacity(tokens.len());
    let mut merges: Vec<(&str, &str, f64)> = Vec::new();
    for t in tokens {
        if !seen.insert(t.as_str()) {
            continue;
        }
        let mut local: Vec<(&str, &str, f64)> = t
            .char_indices()
            .skip(1)
            .map(|(cut, _)| t.split_at(cut))
            .filter(|(l, r)| score.contains_key(l) && score.contains_key(r))
            .map(|(l, r)| (l, r, rank(t)))
            .collect();
        local.sort_by(|a, b| {
            by_desc(score[a.0] as f64, score[b.0] as f64)
                .then_with(|| by_desc(score[a.1] as f64, score[b.1] as f64))
        });
        merges.extend(local);
    }
    merges.sort_by(|a, b| by_desc(a.2, b.2));
    merges
        .into_iter()
        .map(|(l, r, _)| (l.to_string(), r.to_string()))
        .collect()
}

fn normalizer(space_prefix: bool) -> Result<NormalizerWrapper> {
    let replace = Replace::new(" ", SPACE_MARK.to_string())
        .map_err(|e| Error::Tokenizer(format!("space normaliser: {e}")))?;
    Ok(if space_prefix {
        NormalizerSequence::new(vec![
            Prepend::new(SPACE_MARK.to_string()).into(),
            replace.into(),
        ])
        .into()
    } else {
        replace.into()
    })
}

fn decoder(space_prefix: bool) -> Result<DecoderWrapper> {
    let replace = Replace::new(SPACE_MARK.to_string(), " ")
        .map_err(|e| Error::Tokenizer(format!("space decoder: {e}")))?;
    let mut steps: Vec<DecoderWrapper> = vec![replace.into()];
    steps.push(ByteFallback::new().into());
    steps.push(Fuse::new().into());
    if space_prefix {
        steps.push(Strip::new(' ', 1, 0).into());
    }
    Ok(DecoderSequence::new(steps).into())
}

/// Control tokens as special tokens; user-defined ones as tokens kept whole (matched after the
/// normaliser, so Gemma's space runs match in their `▁` spelling).
fn add_whole_tokens(inner: &mut HfTokenizer, vocab: &Vocab<'_>, spelled: &[String]) {
    let of = |ty: TokenType| -> Vec<&String> {
        spelled
            .iter()
            .zip(&vocab.types)
            .filter(|(_, t)| **t == ty)
            .map(|(s, _)| s)
            .collect()
    };
    let control: Vec<AddedToken> = of(TokenType::Control)
        .into_iter()
        .map(|t| AddedToken::from(t.clone(), true))
        .collect();
    inner.add_special_tokens(&control);
    let user: Vec<AddedToken> = of(TokenType::UserDefined)
        .into_iter()
        .map(|t| AddedToken::from(t.clone(), false).normalized(true))
        .collect();
    inner.add_tokens(&user);
}
