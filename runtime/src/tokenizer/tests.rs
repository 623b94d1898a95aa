//! Tokenizers built from tiny in-memory GGUF files: every expected id is worked by hand from the
//! vocabulary, merges or scores written here.

use super::*;
use crate::gguf::{GgufWriter, MetaValue};

fn s(v: &str) -> MetaValue {
    MetaValue::String(v.into())
}

fn strings(items: &[&str]) -> MetaValue {
    MetaValue::Array(items.iter().map(|t| s(t)).collect())
}

fn ints(items: &[i32]) -> MetaValue {
    MetaValue::Array(items.iter().map(|&t| MetaValue::I32(t)).collect())
}

fn floats(items: &[f32]) -> MetaValue {
    MetaValue::Array(items.iter().map(|&t| MetaValue::F32(t)).collect())
}

/// Metadata entries; setting a key again replaces it (a GGUF file may not repeat a key).
#[derive(Default)]
struct Meta(Vec<(&'static str, MetaValue)>);

impl Meta {
    fn set(mut self, key: &'static str, value: MetaValue) -> Self {
        self.0.retain(|(k, _)| *k != key);
        self.0.push((key, value));
        self
    }
}

fn build(m: Meta) -> Result<Tokenizer> {
    let w =
        m.0.into_iter()
            .fold(GgufWriter::new(), |w, (k, v)| w.meta(k, v));
    Tokenizer::from_gguf(&GgufFile::from_bytes(w.to_bytes()).expect("well-formed GGUF"))
}

fn error_of(w: Meta) -> String {
    build(w).expect_err("must be rejected").to_string()
}

/// SmolLM2's chat template, as its GGUF stores it.
const SMOLLM2_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A tiny byte-level vocabulary: "Ġ" is the byte-level form of a space.
fn byte_level(pre: &str) -> Meta {
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
        "3",
        "4",
        "12",
        "123",
        "'",
        "S",
        "'S",
    ];
    let types = [3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1];
    Meta::default()
        .set("tokenizer.ggml.model", s("gpt2"))
        .set("tokenizer.ggml.pre", s(pre))
        .set("tokenizer.ggml.tokens", strings(&tokens))
        .set("tokenizer.ggml.token_type", ints(&types))
        .set(
            "tokenizer.ggml.merges",
            strings(&["a b", "Ġ ab", "1 2", "12 3", "' S"]),
        )
        .set("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
        .set("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
}

fn msg(role: &str, content: &str) -> ChatMessage {
    ChatMessage {
        role: role.into(),
        content: content.into(),
    }
}

#[test]
fn applies_merges_in_rank_order() {
    let t = build(byte_level("smollm")).unwrap();
    // "ab ab" → "ab", "Ġab" after merges a+b then Ġ+ab.
    assert_eq!(t.encode("ab ab").unwrap(), vec![6, 7]);
    assert_eq!(t.decode(&[6, 7]).unwrap(), "ab ab");
}

#[test]
fn smollm_splits_digits_individually() {
    assert_eq!(
        build(byte_level("smollm")).unwrap().encode("12").unwrap(),
        vec![8, 9]
    );
}

#[test]
fn qwen2_keeps_digits_single_and_llama_bpe_groups_three() {
    let qwen = build(byte_level("qwen2")).unwrap();
    let llama = build(byte_level("llama-bpe")).unwrap();
    // Qwen2: one digit per chunk, so no digit merge applies.
    assert_eq!(qwen.encode("1234").unwrap(), vec![8, 9, 11, 12]);
    // Llama 3: chunks "123" and "4"; "123" merges 1+2, then 12+3.
    assert_eq!(llama.encode("1234").unwrap(), vec![14, 12]);
}

#[test]
fn contractions_split_case_insensitively() {
    // "a'S": the contraction "'S" is its own chunk (case-insensitive 's), then merged '+S.
    for pre in ["qwen2", "llama-bpe"] {
        let t = build(byte_level(pre)).unwrap();
        assert_eq!(t.encode("a'S").unwrap(), vec![3, 17], "{pre}");
    }
}

#[test]
fn llama_bpe_takes_a_chunk_that_is_a_token_whole() {
    // "ab" with no merges at all: Llama 3 (ignore_merges) takes the vocabulary entry; Qwen2 cannot.
    let no_merges = |pre: &str| byte_level(pre).set("tokenizer.ggml.merges", strings(&[]));
    assert_eq!(
        build(no_merges("llama-bpe")).unwrap().encode("ab").unwrap(),
        vec![6]
    );
    assert_eq!(
        build(no_merges("qwen2")).unwrap().encode("ab").unwrap(),
        vec![3, 4]
    );
}

#[test]
fn recognises_special_tokens_inside_text() {
    assert_eq!(
        build(byte_level("qwen2"))
            .unwrap()
            .encode("<|im_start|>ab<|im_end|>")
            .unwrap(),
        vec![1, 6, 2]
    );
}

#[test]
fn rejects_unknown_pre_tokenizer_naming_key_and_value() {
    let err = error_of(byte_level("tekken"));
    assert!(
        err.contains("tokenizer.ggml.pre") && err.contains("\"tekken\""),
        "{err}"
    );
    assert!(err.contains("qwen2") && err.contains("llama-bpe"), "{err}");
}

#[test]
fn rejects_unsupported_tokenizer_model() {
    let err = error_of(byte_level("qwen2").set("tokenizer.ggml.model", s("rwkv")));
    assert!(
        err.contains("tokenizer.ggml.model") && err.contains("\"rwkv\""),
        "{err}"
    );
}

#[test]
fn stop_ids_are_eos_then_end_of_turn_tokens() {
    let t = build(byte_level("smollm")).unwrap();
    assert_eq!(t.stop_ids, vec![2, 0]);
}

#[test]
fn bos_follows_add_bos_token() {
    let plain = build(byte_level("qwen2")).unwrap();
    assert_eq!(plain.bos_id(), None, "gpt2 default: no BOS");
    assert_eq!(plain.encode_prompt("ab").unwrap(), vec![6]);
    let with =
        build(byte_level("qwen2").set("tokenizer.ggml.add_bos_token", MetaValue::Bool(true)))
            .unwrap();
    assert_eq!(with.encode_prompt("ab").unwrap(), vec![1, 6]);
    assert_eq!(with.encode("ab").unwrap(), vec![6], "encode adds nothing");
}

#[test]
fn rejects_bad_bos_metadata() {
    let w = byte_level("qwen2").set("tokenizer.ggml.add_bos_token", MetaValue::U8(1));
    assert!(error_of(w).contains("tokenizer.ggml.add_bos_token: expected a boolean"));
    let w = byte_level("qwen2").set("tokenizer.ggml.bos_token_id", MetaValue::U32(99));
    let err = error_of(w.set("tokenizer.ggml.add_bos_token", MetaValue::Bool(true)));
    assert!(err.contains("tokenizer.ggml.bos_token_id = 99"), "{err}");
}

#[test]
fn renders_smollm2_template_as_chatml_with_default_system() {
    let t = build(byte_level("smollm").set(TEMPLATE_KEY, s(SMOLLM2_TEMPLATE))).unwrap();
    assert_eq!(
        t.render_chat(&[msg("user", "hi")]).unwrap(),
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face\
         <|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    assert_eq!(
        t.render_chat(&[msg("system", "S"), msg("user", "hi")])
            .unwrap(),
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
    let (pre, post) = t.user_frame().unwrap();
    assert!(pre.ends_with("<|im_start|>user\n"), "{pre}");
    assert_eq!(post, "<|im_end|>\n<|im_start|>assistant\n");
    assert_eq!(
        t.encode_chat("ab").unwrap()[..],
        t.encode(&t.render_chat(&[msg("user", "ab")]).unwrap())
            .unwrap()[..]
    );
}

#[test]
fn template_sees_special_tokens_loop_controls_and_string_methods() {
    let template =
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{% continue %}\
                    {% endif %}[{{ m.content.strip() }}]{% endfor %}{{ eos_token }}";
    let t = build(byte_level("qwen2").set(TEMPLATE_KEY, s(template))).unwrap();
    let out = t
        .render_chat(&[msg("system", "x"), msg("user", "  hi  ")])
        .unwrap();
    assert_eq!(out, "<|im_start|>[hi]<|im_end|>");
}

#[test]
fn chat_without_template_is_one_clear_error() {
    let t = build(byte_level("qwen2")).unwrap();
    assert!(!t.has_chat_template());
    let err = t.encode_chat("hi").unwrap_err().to_string();
    assert!(
        err.contains("no chat template") && err.contains(TEMPLATE_KEY),
        "{err}"
    );
}

#[test]
fn template_syntax_error_names_key_and_line_when_used() {
    let t = build(byte_level("qwen2").set(TEMPLATE_KEY, s("line one\n{% for m in messages %}")))
        .expect("plain tokenization still works");
    assert_eq!(t.encode("ab").unwrap(), vec![6]);
    let err = t.render_chat(&[msg("user", "hi")]).unwrap_err().to_string();
    assert!(
        err.contains(TEMPLATE_KEY) && err.contains("compiled"),
        "{err}"
    );
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn template_raise_exception_stops_rendering_with_its_message() {
    let template = "{% if messages[0].role != 'user' %}{{ raise_exception('roles must alternate') }}{% endif %}ok";
    let t = build(byte_level("qwen2").set(TEMPLATE_KEY, s(template))).unwrap();
    assert_eq!(t.render_chat(&[msg("user", "hi")]).unwrap(), "ok");
    let err = t
        .render_chat(&[msg("assistant", "hi")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("roles must alternate") && err.contains(TEMPLATE_KEY),
        "{err}"
    );
}

#[test]
fn template_that_is_not_a_string_is_an_error_when_used() {
    let t = build(byte_level("qwen2").set(TEMPLATE_KEY, MetaValue::U32(1))).unwrap();
    let err = t.render_chat(&[msg("user", "hi")]).unwrap_err().to_string();
    assert!(err.contains("expected a string"), "{err}");
}

#[test]
fn rejects_token_type_table_of_wrong_length_or_code() {
    let w = byte_level("qwen2").set("tokenizer.ggml.token_type", ints(&[1, 1]));
    let err = error_of(w);
    assert!(
        err.contains("token_type has 2 entries") && err.contains("has 18"),
        "{err}"
    );
    let mut types = vec![1; 18];
    types[4] = 9;
    let err = error_of(byte_level("qwen2").set("tokenizer.ggml.token_type", ints(&types)));
    assert!(
        err.contains("tokenizer.ggml.token_type[4]") && err.contains("0 to 6"),
        "{err}"
    );
}

#[test]
fn rejects_malformed_merges() {
    let w = byte_level("qwen2").set("tokenizer.ggml.merges", strings(&["ab"]));
    assert!(error_of(w).contains("tokenizer.ggml.merges[0] = \"ab\""));
    let w = byte_level("qwen2").set("tokenizer.ggml.merges", strings(&["a zz"]));
    assert!(error_of(w).contains("tokenizer.ggml.merges"));
}

// ---- SentencePiece-style ("llama") -------------------------------------------------------------

/// Tokens 0–10 of a tiny SentencePiece vocabulary; ranks follow the scores unless a token made of
/// spaces marks it as Gemma's.
fn spm(tokens: &[&str], scores: &[f32], types: &[i32]) -> Meta {
    Meta::default()
        .set("tokenizer.ggml.model", s("llama"))
        .set("tokenizer.ggml.tokens", strings(tokens))
        .set("tokenizer.ggml.scores", floats(scores))
        .set("tokenizer.ggml.token_type", ints(types))
        .set("tokenizer.ggml.bos_token_id", MetaValue::U32(1))
        .set("tokenizer.ggml.eos_token_id", MetaValue::U32(2))
        .set("tokenizer.ggml.unknown_token_id", MetaValue::U32(0))
        .set("tokenizer.ggml.add_space_prefix", MetaValue::Bool(false))
}

const SPM_TOKENS: [&str; 11] = [
    "<unk>",
    "<bos>",
    "<eos>",
    "a",
    "b",
    "c",
    "ab",
    "bc",
    "\u{2581}",
    "\u{2581}ab",
    "<0x41>",
];
const SPM_TYPES: [i32; 11] = [2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6];
/// "bc" scores above "ab": by score, b+c is merged first.
const SPM_SCORES: [f32; 11] = [0.0, 0.0, 0.0, -1.0, -1.0, -1.0, -5.0, -2.0, -1.0, -6.0, 0.0];

#[test]
fn spm_ranks_derived_merges_by_score() {
    let t = build(spm(&SPM_TOKENS, &SPM_SCORES, &SPM_TYPES)).unwrap();
    // "abc": candidate merges a+b (score −5) and b+c (score −2): b+c wins, then nothing applies.
    assert_eq!(t.encode("abc").unwrap(), vec![3, 7]);
    // " ab": the space becomes ▁ (no prefix added); a+b, then ▁+ab.
    assert_eq!(t.encode(" ab").unwrap(), vec![9]);
    assert_eq!(t.decode(&[9]).unwrap(), " ab");
    // BOS is the llama default; the unknown "A" falls back to its byte <0x41>.
    assert_eq!(t.encode_prompt("A").unwrap(), vec![1, 10]);
    assert_eq!(t.decode(&[10, 3]).unwrap(), "Aa");
}

#[test]
fn spm_ranks_gemma_vocabulary_by_position() {
    // A token of two spaces marks Gemma's vocabulary: ranks follow the position, so a+b (id 6)
    // comes before b+c (id 7) whatever the scores; the space run is respelled ▁▁ and is
    // reachable as ▁+▁ (and kept whole: it is user-defined).
    let mut tokens = SPM_TOKENS.to_vec();
    tokens.push("  ");
    let mut scores = SPM_SCORES.to_vec();
    scores.push(-1000.0);
    let mut types = SPM_TYPES.to_vec();
    types.push(4);
    let t = build(spm(&tokens, &scores, &types)).unwrap();
    assert_eq!(t.encode("abc").unwrap(), vec![6, 5]);
    assert_eq!(t.encode("  ab").unwrap(), vec![11, 6]);
    assert_eq!(t.decode(&[11, 6]).unwrap(), "  ab");
}

#[test]
fn spm_space_prefix_and_control_tokens() {
    let w = spm(&SPM_TOKENS, &SPM_SCORES, &SPM_TYPES)
        .set("tokenizer.ggml.add_space_prefix", MetaValue::Bool(true))
        .set("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    let t = build(w).unwrap();
    assert_eq!(t.bos_id(), None);
    // "ab" → "▁ab" with the prefix; "<eos>" inside text is the control token.
    assert_eq!(t.encode("ab<eos>").unwrap(), vec![9, 2]);
    assert_eq!(t.decode(&[9]).unwrap(), "ab");
}

#[test]
fn spm_rejects_scores_of_wrong_length_or_kind() {
    let err = error_of(spm(&SPM_TOKENS, &SPM_SCORES[..4], &SPM_TYPES));
    assert!(
        err.contains("tokenizer.ggml.scores has 4 entries") && err.contains("has 11"),
        "{err}"
    );
    let w = spm(&SPM_TOKENS, &SPM_SCORES, &SPM_TYPES)
        .set("tokenizer.ggml.scores", strings(&SPM_TOKENS));
    assert!(error_of(w).contains("tokenizer.ggml.scores[0]: expected a finite number"));
    let mut nan = SPM_SCORES;
    nan[3] = f32::NAN;
    assert!(error_of(spm(&SPM_TOKENS, &nan, &SPM_TYPES)).contains("tokenizer.ggml.scores[3]"));
    let w = Meta::default()
        .set("tokenizer.ggml.model", s("llama"))
        .set("tokenizer.ggml.tokens", strings(&SPM_TOKENS));
    assert!(error_of(w).contains("cannot find tokenizer.ggml.scores"));
}

#[test]
fn spm_rejects_bad_token_types_and_ids() {
    let mut types = SPM_TYPES;
    types[0] = -1;
    let err = error_of(spm(&SPM_TOKENS, &SPM_SCORES, &types));
    assert!(err.contains("tokenizer.ggml.token_type[0]"), "{err}");
    let w = spm(&SPM_TOKENS, &SPM_SCORES, &SPM_TYPES)
        .set("tokenizer.ggml.unknown_token_id", MetaValue::U32(11));
    assert!(error_of(w).contains("tokenizer.ggml.unknown_token_id = 11"));
    let w = spm(&[], &[], &[]);
    assert!(error_of(w).contains("at least one token"));
}
