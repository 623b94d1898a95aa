//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`): GPT-2's byte-to-character mapping, the file's
//! merges in rank order, and the pre-tokenizer `tokenizer.ggml.pre` names.
//!
//! A pre-tokenizer decides which chunks the merges may act within, so it decides the ids. The
//! splits are those of the models' own `tokenizer.json` files, which llama.cpp's `llama-vocab.cpp`
//! also implements for these names:
//! - `smollm`: every digit on its own (`Digits(individual)`), then GPT-2's byte-level regex.
//! - `gpt2`, `default`: GPT-2's byte-level regex alone.
//! - `qwen2`: Qwen2's split regex (contractions case-insensitive, letters with one leading
//!   non-letter, single digits, punctuation runs, newline runs), with Unicode NFC first as Qwen's
//!   `tokenizer.json` does.
//! - `llama-bpe`: Llama 3's split — Qwen2's with digits in runs of up to three — and, as llama.cpp
//!   does for it and Llama 3's `tokenizer.json` (`ignore_merges`), a chunk that is itself a token
//!   is taken whole before any merge.
//!
//! Control and user-defined tokens (types 3 and 4) are special tokens, recognised inside text.

use tokenizers::models::bpe::{Vocab as BpeVocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer as HfTokenizer};

use super::meta::{string_array, TokenType, Vocab};
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// Qwen2's split: case-insensitive contractions, letter runs with one leading non-letter, single
/// digits, punctuation runs with trailing newlines, newline runs, other whitespace.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama 3's split: Qwen2's, with digits grouped in runs of one to three.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizer names this module knows (for the error message).
const KNOWN: &str = "smollm, gpt-2 (or gpt2), default, qwen2, llama-bpe";

/// How one `tokenizer.ggml.pre` value tokenizes.
struct PreTokenizer {
    split: PreTokenizerWrapper,
    nfc: bool,
    ignore_merges: bool,
}

/// Builds the byte-level BPE tokenizer of `gguf`.
pub(super) fn build(gguf: &GgufFile, vocab: &Vocab<'_>) -> Result<HfTokenizer> {
    let pre_name = match gguf.meta("tokenizer.ggml.pre") {
        Err(_) => "default",
        Ok(v) => v.as_str().ok_or_else(|| {
            Error::Metadata(format!(
                "tokenizer.ggml.pre: expected a string, found {v:?}"
            ))
        })?,
    };
    // The pre-tokenizer is checked before the merges are read: an unknown one is the error.
    let pre = pre_tokenizer(pre_name)?;
    let merges = merges(gguf)?;
    let ids: BpeVocab = vocab
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(ids, merges)
        .ignore_merges(pre.ignore_merges)
        .build()
        .map_err(|e| Error::Tokenizer(format!("building BPE from tokenizer.ggml.merges: {e}")))?;
    let mut inner = HfTokenizer::new(bpe);
    if pre.nfc {
        inner.with_normalizer(Some(NFC));
    }
    inner.with_pre_tokenizer(Some(pre.split));
    inner.with_decoder(Some(ByteLevel::default()));
    let specials: Vec<AddedToken> = vocab
        .of_type(TokenType::Control)
        .chain(vocab.of_type(TokenType::UserDefined))
        .map(|t| AddedToken::from(t.to_string(), true))
        .collect();
    inner.add_special_tokens(&specials);
    Ok(inner)
}

fn pre_tokenizer(name: &str) -> Result<PreTokenizer> {
    let regex_then_bytes = |regex: &str| -> Result<PreTokenizerWrapper> {
        let split = Split::new(
            SplitPattern::Regex(regex.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| Error::Tokenizer(format!("pre-tokenizer {name:?}: {e}")))?;
        Ok(Sequence::new(vec![
            split.into(),
            ByteLevel::new(false, true, false).into(),
        ])
        .into())
    };
    let byte_level = ByteLevel::new(false, true, true);
    let (split, nfc, ignore_merges) = match name {
        "smollm" => (
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
            false,
            false,
        ),
        // llama.cpp names GPT-2's own pre-tokenizer "gpt-2" (`LLAMA_VOCAB_PRE_TYPE_GPT2`).
        "gpt-2" | "gpt2" | "default" => (byte_level.into(), false, false),
        "qwen2" => (regex_then_bytes(QWEN2_SPLIT)?, true, false),
        "llama-bpe" => (regex_then_bytes(LLAMA3_SPLIT)?, false, true),
        other => {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.pre = {other:?}: supported pre-tokenizers are {KNOWN}"
            )))
        }
    };
    Ok(PreTokenizer {
        split,
        nfc,
        ignore_merges,
    })
}

/// `tokenizer.ggml.merges`: "left right" pairs in rank order.
fn merges(gguf: &GgufFile) -> Result<Vec<(String, String)>> {
    string_array(gguf, "tokenizer.ggml.merges")?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| {
                    Error::Metadata(format!(
                        "tokenizer.ggml.merges[{i}] = {m:?}: expected two tokens separated by a space"
                    ))
                })
        })
        .collect()
}
