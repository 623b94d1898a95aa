//! The chat-template renderer (minijinja with Python compatibility, as `Tokenizer::render_chat`
//! sets it up) on fuzzed templates: the input is the `tokenizer.chat_template` string of a small
//! byte-level BPE vocabulary. Seeds: the real models' templates.
#![no_main]

use kvplan_runtime::gguf::{GgufFile, GgufWriter, MetaValue};
use kvplan_runtime::tokenizer::{ChatMessage, Tokenizer};
use libfuzzer_sys::fuzz_target;

const TOKENS: [&str; 8] = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "a",
    "b",
    "\u{120}",
    "ab",
    "\n",
];

fn strings(items: &[&str]) -> MetaValue {
    MetaValue::Array(
        items
            .iter()
            .map(|t| MetaValue::String(t.to_string()))
            .collect(),
    )
}

fn tokenizer(template: &str) -> Option<Tokenizer> {
    let types = MetaValue::Array([3, 3, 3, 1, 1, 1, 1, 1].map(MetaValue::I32).to_vec());
    let bytes = GgufWriter::new()
        .meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String("smollm".into()))
        .meta("tokenizer.ggml.tokens", strings(&TOKENS))
        .meta("tokenizer.ggml.token_type", types)
        .meta("tokenizer.ggml.merges", strings(&["a b"]))
        .meta("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
        .meta("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
        .meta(
            "tokenizer.chat_template",
            MetaValue::String(template.into()),
        )
        .to_bytes();
    let file = GgufFile::from_bytes(bytes).ok()?;
    Tokenizer::from_gguf(&file).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    let Some(tok) = tokenizer(template) else {
        return;
    };
    let message = |role: &str, content: &str| ChatMessage {
        role: role.into(),
        content: content.into(),
    };
    let chats = [
        vec![message("user", "ab")],
        vec![
            message("system", "a"),
            message("user", "b"),
            message("assistant", "ab"),
            message("user", ""),
        ],
    ];
    for chat in &chats {
        let _ = tok.render_chat(chat);
    }
    let _ = tok.user_frame();
    let _ = tok.encode_chat("ab");
});
