//! The BPE (`gpt2`) and SentencePiece-style (`llama`) tokenizers built from fuzzed GGUF metadata
//! (`Tokenizer::from_gguf`), then encoding and decoding fuzzed text and ids.
//!
//! Input: a little-endian `u16` length, that many bytes of text, then a GGUF file. The seeds are
//! the real models' tokenizer metadata, cut down to a few hundred tokens (see ../README.md).
#![no_main]

use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::tokenizer::{ChatMessage, Tokenizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let n = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
    let (text, gguf) = data[2..].split_at(n);
    let text = String::from_utf8_lossy(text);
    let Ok(file) = GgufFile::from_bytes(gguf.to_vec()) else {
        return;
    };
    let Ok(tok) = Tokenizer::from_gguf(&file) else {
        return;
    };
    let vocab = tok.vocab_size() as u32;
    for encode in [Tokenizer::encode, Tokenizer::encode_prompt] {
        if let Ok(ids) = encode(&tok, &text) {
            assert!(
                ids.iter().all(|&id| id < vocab),
                "an id past the vocabulary {vocab}"
            );
            let _ = tok.decode(&ids);
        }
    }
    // Ids as the model might emit them, in range or not.
    let ids: Vec<u32> = text
        .bytes()
        .map(|b| u32::from(b) * 7 % (vocab + 3))
        .collect();
    let _ = tok.decode(&ids);
    if tok.has_chat_template() {
        let chat = [ChatMessage {
            role: "user".into(),
            content: text.clone().into_owned(),
        }];
        let _ = tok.render_chat(&chat);
        let _ = tok.encode_chat(&text);
        let _ = tok.user_frame();
    }
});
