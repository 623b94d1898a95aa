//! Tokenizer built from GGUF metadata (`tokenizer.ggml.*`) with the Hugging Face `tokenizers` crate,
//! and chat prompts rendered from the file's own chat template.
//!
//! Two kinds, by `tokenizer.ggml.model`:
//! - `gpt2`: byte-level BPE from tokens and merges, split by the pre-tokenizer
//!   `tokenizer.ggml.pre` names (`smollm`, `gpt2`, `qwen2`, `llama-bpe`; see `bpe.rs`).
//! - `llama`: SentencePiece-style BPE from tokens, scores and token types, merges derived from the
//!   vocabulary when the file has none (Gemma; see `spm.rs`).
//!
//! [`Tokenizer::encode`] adds nothing to the text; [`Tokenizer::encode_prompt`] puts BOS in front when
//! `tokenizer.ggml.add_bos_token` is true (absent: true for `llama`, false for `gpt2`, llama.cpp's
//! defaults). Generation stops at `tokenizer.ggml.eos_token_id` and at the end-of-turn tokens the
//! vocabulary has (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<end_of_turn>`). Chat prompts come
//! from `tokenizer.chat_template` (see `chat.rs`); a model without one has no chat prompt.

mod bpe;
mod chat;
mod meta;
mod spm;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use tokenizers::Tokenizer as HfTokenizer;

pub use chat::ChatMessage;
use chat::{ChatTemplate, TEMPLATE_KEY};
use meta::{flag, Vocab};

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// Tokens that end a turn in the chat formats kvplan's models use; each stops generation when the
/// vocabulary has it.
const END_OF_TURN: [&str; 4] = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"];

/// A tokenizer with the model's special tokens and chat template.
#[derive(Clone)]
pub struct Tokenizer {
    inner: HfTokenizer,
    /// Ids that end generation (`eos_token_id`, then the end-of-turn tokens present).
    pub stop_ids: Vec<u32>,
    bos: Option<u32>,
    /// The compiled template, or why the file's template cannot be used; `None`: the file has none.
    chat: Option<std::result::Result<ChatTemplate, String>>,
    vocab_size: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size)
            .field("bos", &self.bos)
            .field("stop_ids", &self.stop_ids)
            .field("chat_template", &self.chat.is_some())
            .finish()
    }
}

/// A paragraph of ordinary English that speed measurements repeat to the lengths they prefill
/// (`kvplan bench`, the runtime's examples).
pub const FILLER: &str = "The river runs past the old mill, where the miller's children once \
counted the boats going down to the sea. In the spring the water rises and covers the lower \
field; in the autumn it falls again, leaving mud, reeds and the smell of rain. Nobody remembers \
who built the bridge, but everyone agrees that it was built to last. ";

impl Tokenizer {
    /// Builds the tokenizer from the GGUF metadata.
    ///
    /// A chat template that does not compile does not stop the tokenizer: the error is given when
    /// a chat is rendered.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let model = gguf.meta_str("tokenizer.ggml.model")?;
        let vocab = Vocab::read(gguf)?;
        let inner = match model {
            "gpt2" => bpe::build(gguf, &vocab)?,
            "llama" => spm::build(gguf, &vocab)?,
            other => {
                return Err(Error::Tokenizer(format!(
                    "tokenizer.ggml.model = {other:?}: kvplan supports byte-level BPE (\"gpt2\") \
                     and SentencePiece-style BPE (\"llama\")"
                )))
            }
        };
        let bos = bos(gguf, &vocab, model == "llama")?;
        let mut stop_ids = Vec::new();
        let eos = vocab.token_id(gguf, "tokenizer.ggml.eos_token_id")?;
        for id in eos
            .into_iter()
            .chain(END_OF_TURN.iter().filter_map(|t| vocab.find(t)))
        {
            if !stop_ids.contains(&id) {
                stop_ids.push(id);
            }
        }
        let chat = match gguf.meta(TEMPLATE_KEY) {
            Err(_) => None,
            Ok(v) => Some(match v.as_str() {
                None => Err(format!("{TEMPLATE_KEY}: expected a string, found {v:?}")),
                Some(source) => {
                    ChatTemplate::new(source, specials(gguf, &vocab)?).map_err(|e| e.to_string())
                }
            }),
        };
        Ok(Self {
            inner,
            stop_ids,
            bos,
            chat,
            vocab_size: vocab.tokens.len(),
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The BOS id put in front of a prompt, when the model adds one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The first `n` ids of [`FILLER`] repeated.
    pub fn filler_ids(&self, n: usize) -> Result<Vec<u32>> {
        let unit = self.encode(FILLER)?;
        Ok(unit.iter().copied().cycle().take(n).collect())
    }

    /// Encodes `text` as it is: special tokens written in it are parsed as specials, nothing is
    /// added (no BOS). For pieces of a prompt.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Tokenizer(format!("encoding: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Encodes a whole prompt: BOS first when the model adds one, then `text`.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = self.bos.into_iter().collect();
        ids.extend(self.encode(text)?);
        Ok(ids)
    }

    /// Decodes ids to text, special tokens included (so `<|im_end|>` shows as written).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, false)
            .map_err(|e| Error::Tokenizer(format!("decoding: {e}")))
    }

    /// Whether the file has a chat template (it may still fail to compile).
    pub fn has_chat_template(&self) -> bool {
        self.chat.is_some()
    }

    /// Renders a chat with the model's template, the generation prompt appended.
    pub fn render_chat(&self, messages: &[ChatMessage]) -> Result<String> {
        match &self.chat {
            None => Err(Error::Tokenizer(format!(
                "this model has no chat template ({TEMPLATE_KEY} is absent): \
                 it takes plain prompts only"
            ))),
            Some(Err(why)) => Err(Error::Tokenizer(why.clone())),
            Some(Ok(template)) => template.render(messages),
        }
    }

    /// The chat text before and after the content of one user message (the generation prompt is
    /// in the second part), for splicing long content into a chat prompt. An error when the
    /// template does not insert the message verbatim.
    pub fn user_frame(&self) -> Result<(String, String)> {
        const HOLE: &str = "\u{1}USER\u{1}";
        let text = self.render_chat(&[ChatMessage {
            role: "user".into(),
            content: HOLE.into(),
        }])?;
        match text.split_once(HOLE) {
            Some((pre, post)) if !post.contains(HOLE) => Ok((pre.to_string(), post.to_string())),
            _ => Err(Error::Tokenizer(format!(
                "{TEMPLATE_KEY} does not insert a user message verbatim exactly once"
            ))),
        }
    }

    /// Renders a one-message user chat and encodes it (the template writes BOS if it wants one).
    pub fn encode_chat(&self, user_text: &str) -> Result<Vec<u32>> {
        self.encode(&self.render_chat(&[ChatMessage {
            role: "user".into(),
            content: user_text.into(),
        }])?)
    }
}

/// The BOS id when `tokenizer.ggml.add_bos_token` (or the kind's default) asks for it.
fn bos(gguf: &GgufFile, vocab: &Vocab<'_>, default: bool) -> Result<Option<u32>> {
    const ADD: &str = "tokenizer.ggml.add_bos_token";
    if !flag(gguf, ADD)?.unwrap_or(default) {
        return Ok(None);
    }
    match vocab.token_id(gguf, "tokenizer.ggml.bos_token_id")? {
        Some(id) => Ok(Some(id)),
        None => Err(Error::Metadata(format!(
            "{ADD} asks for BOS but tokenizer.ggml.bos_token_id is absent"
        ))),
    }
}

/// The special tokens a chat template may name, from the ids the file gives.
fn specials(gguf: &GgufFile, vocab: &Vocab<'_>) -> Result<BTreeMap<&'static str, String>> {
    let mut out = BTreeMap::new();
    for (name, key) in [
        ("bos_token", "tokenizer.ggml.bos_token_id"),
        ("eos_token", "tokenizer.ggml.eos_token_id"),
        ("unk_token", "tokenizer.ggml.unknown_token_id"),
        ("pad_token", "tokenizer.ggml.padding_token_id"),
    ] {
        if let Some(id) = vocab.token_id(gguf, key)? {
            out.insert(name, vocab.tokens[id as usize].to_string());
        }
    }
    Ok(out)
}
