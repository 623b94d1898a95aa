//! Tokenizer built from GGUF metadata (`tokenizer.ggml.*`) with the Hugging Face `tokenizers` crate.
//!
//! Supported: `tokenizer.ggml.model = "gpt2"` (byte-level BPE from `tokens` + `merges`), with the
//! pre-tokenizer named by `tokenizer.ggml.pre`: `smollm` splits every digit on its own before the
//! GPT-2 byte-level regex (what SmolLM2's `tokenizer.json` does: `Digits(individual)` then
//! `ByteLevel`); `gpt2`/`default` use the byte-level regex alone. Control and user-defined tokens
//! (`token_type` 3 and 4) are special tokens, recognised inside text. No BOS is added.
//!
//! Chat prompts are rendered in ChatML (`<|im_start|>role\n…<|im_end|>\n`, then
//! `<|im_start|>assistant\n` as the generation prompt). When the chat has no system message the
//! default system message is inserted, as SmolLM2's chat template does; the default is read from
//! the GGUF's `tokenizer.chat_template` when it contains one.

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, Tokenizer as HfTokenizer};

use crate::error::{Error, Result};
use crate::gguf::{GgufFile, MetaValue};

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// A byte-level BPE tokenizer with the model's special tokens and chat template.
#[derive(Clone)]
pub struct Tokenizer {
    inner: HfTokenizer,
    /// Ids that end generation (`eos_token_id`, `<|im_end|>`, `<|endoftext|>` when present).
    pub stop_ids: Vec<u32>,
    default_system: Option<String>,
    vocab_size: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size)
            .field("stop_ids", &self.stop_ids)
            .finish()
    }
}

/// GGUF token types that become special tokens (control, user-defined).
const SPECIAL_TOKEN_TYPES: [i64; 2] = [3, 4];

fn string_array<'a>(gguf: &'a GgufFile, key: &str) -> Result<Vec<&'a str>> {
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

impl Tokenizer {
    /// Builds the tokenizer from the GGUF metadata.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let model = gguf.meta_str("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(Error::Tokenizer(format!(
                "tokenizer.ggml.model = {model:?}: kvplan supports byte-level BPE (\"gpt2\") only"
            )));
        }
        let tokens = string_array(gguf, "tokenizer.ggml.tokens")?;
        let merges_raw = string_array(gguf, "tokenizer.ggml.merges")?;
        let pre = gguf
            .meta("tokenizer.ggml.pre")
            .ok()
            .and_then(MetaValue::as_str)
            .unwrap_or("default");
        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect();
        let merges = merges_raw
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
            .collect::<Result<Vec<_>>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| Error::Tokenizer(format!("building BPE: {e}")))?;
        let mut inner = HfTokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "smollm" => Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into(),
            "gpt2" | "default" => byte_level.into(),
            other => {
                return Err(Error::Tokenizer(format!(
                    "tokenizer.ggml.pre = {other:?}: supported pre-tokenizers are smollm, gpt2, default"
                )))
            }
        };
        inner.with_pre_tokenizer(Some(pre_tokenizer));
        inner.with_decoder(Some(ByteLevel::default()));
        let specials = special_tokens(gguf, &tokens)?;
        let added: Vec<AddedToken> = specials
            .iter()
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        inner.add_special_tokens(&added);
        let mut stop_ids = Vec::new();
        if let Ok(eos) = gguf.meta_u64("tokenizer.ggml.eos_token_id") {
            stop_ids.push(eos as u32);
        }
        for name in ["<|im_end|>", "<|endoftext|>", "<|eot_id|>"] {
            if let Some(id) = tokens.iter().position(|t| *t == name) {
                if !stop_ids.contains(&(id as u32)) {
                    stop_ids.push(id as u32);
                }
            }
        }
        let default_system = gguf
            .meta("tokenizer.chat_template")
            .ok()
            .and_then(MetaValue::as_str)
            .and_then(default_system_from_template);
        Ok(Self {
            inner,
            stop_ids,
            default_system,
            vocab_size: tokens.len(),
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Encodes `text` (special tokens written in the text are parsed as specials; no BOS added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(format!("encoding: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids to text, special tokens included (so `<|im_end|>` shows as written).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| Error::Tokenizer(format!("decoding: {e}")))
    }

    /// Renders a chat in ChatML with the generation prompt appended.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> String {
        let mut out = String::new();
        let has_system = messages.first().is_some_and(|m| m.role == "system");
        if let (false, Some(system)) = (has_system, &self.default_system) {
            out.push_str(&format!("<|im_start|>system\n{system}<|im_end|>\n"));
        }
        for m in messages {
            out.push_str(&format!(
                "<|im_start|>{}\n{}<|im_end|>\n",
                m.role, m.content
            ));
        }
        out.push_str("<|im_start|>assistant\n");
        out
    }

    /// Renders a one-message user chat and encodes it.
    pub fn encode_chat(&self, user_text: &str) -> Result<Vec<u32>> {
        self.encode(&self.render_chat(&[ChatMessage {
            role: "user".into(),
            content: user_text.into(),
        }]))
    }
}

fn special_tokens<'a>(gguf: &GgufFile, tokens: &[&'a str]) -> Result<Vec<&'a str>> {
    let Ok(types) = gguf.meta("tokenizer.ggml.token_type") else {
        return Ok(Vec::new());
    };
    let types = types
        .as_array()
        .ok_or_else(|| Error::Metadata("tokenizer.ggml.token_type: expected an array".into()))?;
    if types.len() != tokens.len() {
        return Err(Error::Metadata(format!(
            "tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens has {}",
            types.len(),
            tokens.len()
        )));
    }
    Ok(tokens
        .iter()
        .zip(types)
        .filter(|(_, t)| {
            t.as_f64()
                .is_some_and(|t| SPECIAL_TOKEN_TYPES.contains(&(t as i64)))
        })
        .map(|(tok, _)| *tok)
        .collect())
}

/// Extracts the default system message from a ChatML Jinja template: the text between
/// `<|im_start|>system\n` and `<|im_end|>` in the branch used when no system message is given.
fn default_system_from_template(template: &str) -> Option<String> {
    let marker = "<|im_start|>system\n";
    let start = template.find(marker)? + marker.len();
    let rest = &template[start..];
    let end = rest.find("<|im_end|>")?;
    let text = &rest[..end];
    // A template that interpolates the message (`{{ ... }}`) has no literal default.
    (!text.contains("{{") && !text.contains("{%")).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgufWriter;

    fn s(v: &str) -> MetaValue {
        MetaValue::String(v.into())
    }

    /// A tiny byte-level vocabulary: "Ġ" is the byte-level form of a space.
    fn tiny() -> Tokenizer {
        let tokens = [
            "<|endoftext|>",
            "<|im_start|>",
            "<|im_end|>",
            "a",
            "b",
            "Ġ",
            "ab",
            "Ġab",
            "1",
            "2",
            "\n",
        ];
        let types = [3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1];
        let bytes = GgufWriter::new()
            .meta("tokenizer.ggml.model", s("gpt2"))
            .meta("tokenizer.ggml.pre", s("smollm"))
            .meta("tokenizer.ggml.tokens", MetaValue::Array(tokens.iter().map(|t| s(t)).collect()))
            .meta(
                "tokenizer.ggml.token_type",
                MetaValue::Array(types.iter().map(|&t| MetaValue::I32(t)).collect()),
            )
            .meta("tokenizer.ggml.merges", MetaValue::Array(vec![s("a b"), s("Ġ ab")]))
            .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
            .meta(
                "tokenizer.chat_template",
                s("{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nBe kind.<|im_end|>\n' }}{% endif %}"),
            )
            .to_bytes();
        Tokenizer::from_gguf(&GgufFile::from_bytes(bytes).unwrap()).unwrap()
    }

    #[test]
    fn applies_merges_in_rank_order() {
        let t = tiny();
        // "ab ab" → "ab", "Ġab" after merges a+b then Ġ+ab.
        assert_eq!(t.encode("ab ab").unwrap(), vec![6, 7]);
        assert_eq!(t.decode(&[6, 7]).unwrap(), "ab ab");
    }

    #[test]
    fn splits_digits_individually() {
        assert_eq!(tiny().encode("12").unwrap(), vec![8, 9]);
    }

    #[test]
    fn recognises_special_tokens_inside_text() {
        assert_eq!(
            tiny().encode("<|im_start|>ab<|im_end|>").unwrap(),
            vec![1, 6, 2]
        );
    }

    #[test]
    fn renders_chatml_with_default_system() {
        let t = tiny();
        let msgs = [ChatMessage {
            role: "user".into(),
            content: "hi".into(),
        }];
        assert_eq!(
            t.render_chat(&msgs),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let with_system = [
            ChatMessage {
                role: "system".into(),
                content: "S".into(),
            },
            ChatMessage {
                role: "user".into(),
                content: "hi".into(),
            },
        ];
        assert!(t
            .render_chat(&with_system)
            .starts_with("<|im_start|>system\nS<|im_end|>"));
        assert_eq!(t.stop_ids, vec![2, 0]);
    }

    #[test]
    fn rejects_unsupported_tokenizer_model() {
        let bytes = GgufWriter::new()
            .meta("tokenizer.ggml.model", s("llama"))
            .to_bytes();
        let err = Tokenizer::from_gguf(&GgufFile::from_bytes(bytes).unwrap()).unwrap_err();
        assert!(err.to_string().contains("supports byte-level BPE"));
    }
}
