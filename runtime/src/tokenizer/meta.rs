//! The `tokenizer.ggml.*` metadata every tokenizer kind reads: tokens, token types, scores, special
//! token ids and flags — each checked against the vocabulary before use, so a malformed file is one
//! error naming the key, never a panic or an out-of-range id.

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, MetaValue};

/// A token's type as llama.cpp's converters write it (`tokenizer.ggml.token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenType {
    /// 0: not stated.
    Undefined,
    /// 1: an ordinary piece.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: a control token (`<bos>`, `<|im_start|>`): special, never produced by the model's BPE.
    Control,
    /// 4: a user-defined piece that is always kept whole (`<tool_call>`, Gemma's `\n\n`).
    UserDefined,
    /// 5: a placeholder (`[PAD151931]`).
    Unused,
    /// 6: a byte-fallback piece `<0xNN>`.
    Byte,
}

impl TokenType {
    fn from_code(code: i64) -> Option<Self> {
        Some(match code {
            0 => Self::Undefined,
            1 => Self::Normal,
            2 => Self::Unknown,
            3 => Self::Control,
            4 => Self::UserDefined,
            5 => Self::Unused,
            6 => Self::Byte,
            _ => return None,
        })
    }
}

/// The vocabulary of a GGUF tokenizer: tokens in id order and their types.
#[derive(Debug)]
pub(super) struct Vocab<'a> {
    /// `tokenizer.ggml.tokens`, index = id.
    pub tokens: Vec<&'a str>,
    /// `tokenizer.ggml.token_type`, all [`TokenType::Normal`] when the key is absent.
    pub types: Vec<TokenType>,
}

impl<'a> Vocab<'a> {
    /// Reads tokens and token types, checking that they have one entry per token.
    pub fn read(gguf: &'a GgufFile) -> Result<Self> {
        let tokens = string_array(gguf, "tokenizer.ggml.tokens")?;
        if tokens.is_empty() {
            return Err(Error::Metadata(
                "tokenizer.ggml.tokens: expected at least one token, found none".into(),
            ));
        }
        let types = match gguf.meta("tokenizer.ggml.token_type") {
            Ok(v) => token_types(v, tokens.len())?,
            Err(_) => vec![TokenType::Normal; tokens.len()],
        };
        Ok(Self { tokens, types })
    }

    /// Tokens of type `ty`, in id order.
    pub fn of_type(&self, ty: TokenType) -> impl Iterator<Item = &'a str> + '_ {
        self.tokens
            .iter()
            .zip(&self.types)
            .filter(move |(_, t)| **t == ty)
            .map(|(tok, _)| *tok)
    }

    /// The id stored under `key`, checked to name a token; `None` when the key is absent.
    pub fn token_id(&self, gguf: &GgufFile, key: &str) -> Result<Option<u32>> {
        let Ok(v) = gguf.meta(key) else {
            return Ok(None);
        };
        let id = v
            .as_u64()
            .ok_or_else(|| Error::Metadata(format!("{key}: expected a token id, found {v:?}")))?;
        if id >= self.tokens.len() as u64 {
            return Err(Error::Metadata(format!(
                "{key} = {id}: expected an id below the vocabulary size {}",
                self.tokens.len()
            )));
        }
        Ok(Some(id as u32))
    }

    /// The id of the token spelled `text`, if the vocabulary has it.
    pub fn find(&self, text: &str) -> Option<u32> {
        self.tokens
            .iter()
            .position(|t| *t == text)
            .map(|i| i as u32)
    }
}

/// `key` as an array of strings.
pub(super) fn string_array<'a>(gguf: &'a GgufFile, key: &str) -> Result<Vec<&'a str>> {
    let arr = gguf
        .meta(key)?
        .as_array()
        .ok_or_else(|| Error::Metadata(format!("{key}: expected an array of strings")))?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_str().ok_or_else(|| {
                Error::Metadata(format!("{key}[{i}]: expected a string, found {v:?}"))
            })
        })
        .collect()
}

/// `v` (metadata `key`) as an array of `what` with one entry per token.
fn per_token<'a>(
    v: &'a MetaValue,
    key: &str,
    what: &str,
    n_tokens: usize,
) -> Result<&'a [MetaValue]> {
    let arr = v
        .as_array()
        .ok_or_else(|| Error::Metadata(format!("{key}: expected an array of {what}")))?;
    if arr.len() != n_tokens {
        return Err(Error::Metadata(format!(
            "{key} has {} entries, tokenizer.ggml.tokens has {n_tokens}",
            arr.len()
        )));
    }
    Ok(arr)
}

/// `tokenizer.ggml.scores`: one finite float per token.
pub(super) fn scores(gguf: &GgufFile, n_tokens: usize) -> Result<Vec<f32>> {
    const KEY: &str = "tokenizer.ggml.scores";
    let arr = per_token(gguf.meta(KEY)?, KEY, "numbers", n_tokens)?;
    arr.iter()
        .enumerate()
        .map(|(i, v)| match v.as_f64() {
            Some(s) if s.is_finite() => Ok(s as f32),
            _ => Err(Error::Metadata(format!(
                "{KEY}[{i}]: expected a finite number, found {v:?}"
            ))),
        })
        .collect()
}

/// `key` as a boolean; `None` when absent.
pub(super) fn flag(gguf: &GgufFile, key: &str) -> Result<Option<bool>> {
    match gguf.meta(key) {
        Err(_) => Ok(None),
        Ok(MetaValue::Bool(b)) => Ok(Some(*b)),
        Ok(v) => Err(Error::Metadata(format!(
            "{key}: expected a boolean, found {v:?}"
        ))),
    }
}

fn token_types(v: &MetaValue, n_tokens: usize) -> Result<Vec<TokenType>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let arr = per_token(v, KEY, "integers", n_tokens)?;
    arr.iter()
        .enumerate()
        .map(|(i, t)| {
            let code = match t {
                MetaValue::I32(c) => Some(*c as i64),
                other => other.as_u64().and_then(|c| i64::try_from(c).ok()),
            };
            code.and_then(TokenType::from_code).ok_or_else(|| {
                Error::Metadata(format!(
                    "{KEY}[{i}]: expected a token type 0 to 6, found {t:?}"
                ))
            })
        })
        .collect()
}
