//! Parity of the runtime with Hugging Face transformers (float32, eager attention) on tiny
//! random-weight models of every architecture kvplan runs beyond the catalog's, each converted
//! to GGUF by llama.cpp's own converter (`convert-hf-to-gguf` from the registry): Llama 3.x RoPE
//! (`rope_freqs.weight`), linear and YaRN scaling, Mistral's sliding window, Qwen2 with YaRN,
//! Qwen3, Phi-3, Gemma 2, OLMo 2 and SmolLM3. Fixtures and models in
//! `tests/fixtures/<name>-tiny/` (`tests/fixtures/tiny-README.md`), made by
//! `tools/tiny_fixtures.py` — never by kvplan.
//!
//! At f32 a correct implementation meets: the argmax at every position, the last position's
//! logits within 1e-3, the 16 greedy tokens, and cached keys (after RoPE), values and attention
//! rows within 1e-3. Each fixture has a `long` case past the sliding window (32) and past the
//! RoPE-scaling boundary (original context 64).

mod common;
mod parity_common;

use std::path::PathBuf;

use kvplan_runtime::model::Model;
use parity_common::B;

/// Logits tolerance at f32 (absolute), the bar.
const F32_LOGITS_TOL: f32 = 1e-3;
/// Keys, values and attention tolerance at f32 (absolute).
const F32_KV_TOL: f32 = 1e-3;

fn fixture_dir(name: &str) -> String {
    format!("{name}-tiny")
}

fn model_path(name: &str, file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture_dir(name))
        .join(file)
}

fn load(name: &str, file: &str) -> Model<B> {
    parity_common::load(&model_path(name, file))
}

/// The f32 file against transformers: logits, greedy tokens, keys, values and attention.
fn f32_parity(name: &str, architecture: &str) {
    let model = load(name, "model-f32.gguf");
    assert_eq!(model.config.architecture, architecture);
    check_f32(name, &model);
    tokenizes_as_the_reference(name);
}

/// The fixture's texts tokenize to its ids (Hugging Face `tokenizers` made them; the
/// converter wrote the vocabulary into the file).
fn tokenizes_as_the_reference(name: &str) {
    let path = model_path(name, "model-f32.gguf");
    let gguf = kvplan_runtime::gguf::GgufFile::open(&path).expect("tiny model");
    let tok = kvplan_runtime::tokenizer::Tokenizer::from_gguf(&gguf)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let fx = parity_common::fixture(&fixture_dir(name), "logits.json");
    for case in ["prompt", "long"] {
        let text = fx[case]["text"].as_str().expect("text");
        let want = parity_common::ids(&fx[case]["ids"]);
        assert_eq!(tok.encode(text).expect("encode"), want, "{name} {case}");
    }
}

/// [`f32_parity`]'s checks on a loaded model.
fn check_f32(name: &str, model: &Model<B>) {
    let dir = fixture_dir(name);
    let fx = parity_common::fixture(&dir, "logits.json");
    for case in ["prompt", "long"] {
        let label = format!("{name} {case}");
        parity_common::check_logits_case_within(model, &label, &fx[case], F32_LOGITS_TOL);
    }
    let kv = parity_common::fixture(&dir, "kv_attention.json");
    parity_common::check_kv_attention_within(model, &kv, F32_KV_TOL);
}

/// The tiny Mistral file with `llama.attention.sliding_window` set to `window`: llama.cpp's
/// converter (convert-hf-to-gguf 0.1.1) writes no window for `MistralForCausalLM`, so the file
/// as converted runs every layer global (in llama.cpp too); a file that sets one is windowed.
/// (The Q8_0 file's weights are copied dequantised, as f32.)
fn mistral_with_window(window: u32, file: &str) -> Model<B> {
    use kvplan_runtime::gguf::{GgufFile, MetaValue};
    let key = "llama.attention.sliding_window";
    let bytes = common::gguf_with_key(&model_path("mistral", file), key, MetaValue::U32(window));
    let g = GgufFile::from_bytes(bytes).expect("rewritten file");
    common::backend_setup();
    Model::from_gguf(&g, &kvplan_runtime::backend::device()).expect("windowed mistral")
}

#[test]
fn mistral_with_its_window_set_matches_transformers() {
    let m = mistral_with_window(32, "model-f32.gguf");
    assert!(m.config.layer_windows.iter().all(|w| *w == Some(32)));
    check_f32("mistral", &m);
    let q = mistral_with_window(32, "model-q8_0.gguf");
    let fx = parity_common::fixture(&fixture_dir("mistral"), "logits-q8_0.json");
    for case in ["prompt", "long"] {
        let label = format!("mistral q8_0 {case}");
        parity_common::check_logits_case_within(&q, &label, &fx[case], F32_LOGITS_TOL);
    }
}

#[test]
fn mistral_as_converted_runs_global_and_matches_within_the_window() {
    // Without the key every layer is global: the same as transformers while the sequence is
    // within the window (the `prompt` case's 24 tokens; its greedy tokens pass 32 and differ).
    let m = load("mistral", "model-f32.gguf");
    assert!(m.config.layer_windows.iter().all(Option::is_none));
    let fx = parity_common::fixture(&fixture_dir("mistral"), "logits.json");
    let case = &fx["prompt"];
    let ids = parity_common::ids(&case["ids"]);
    assert!(ids.len() <= 32);
    let flat = parity_common::all_logits(&m, &ids);
    let last = &flat[(ids.len() - 1) * m.config.vocab..];
    let diff = parity_common::max_diff(last, &parity_common::floats(&case["last_logits"]));
    assert!(diff < F32_LOGITS_TOL, "{diff}");
}

/// The Q8_0 file, held as its blocks (the CPU backend's default), against transformers on the
/// same weights dequantised to f32 (`logits-q8_0.json`): kvplan's quantised products dequantise
/// and compute in f32, so the f32 bar holds.
fn q8_0_parity(name: &str) {
    let model = load(name, "model-q8_0.gguf");
    let fx = parity_common::fixture(&fixture_dir(name), "logits-q8_0.json");
    for case in ["prompt", "long"] {
        let label = format!("{name} q8_0 {case}");
        parity_common::check_logits_case_within(&model, &label, &fx[case], F32_LOGITS_TOL);
    }
}

macro_rules! tiny_parity {
    ($($test:ident: $name:literal, $arch:literal;)*) => {
        $(
            mod $test {
                #[test]
                fn f32_matches_transformers() {
                    super::f32_parity($name, $arch);
                }

                #[test]
                fn q8_0_matches_transformers_on_its_dequantised_weights() {
                    super::q8_0_parity($name);
                }
            }
        )*
    };
}

tiny_parity! {
    llama3_rope_freqs: "llama3", "llama";
    llama_linear_scaling: "llama-linear", "llama";
    llama_yarn: "llama-yarn", "llama";
    qwen2_yarn: "qwen2-yarn", "qwen2";
    qwen3: "qwen3", "qwen3";
    phi3: "phi3", "phi3";
    gemma2: "gemma2", "gemma2";
    olmo2: "olmo2", "olmo2";
    smollm3: "smollm3", "smollm3";
    // Other shapes: head_dim × heads ≠ hidden, MHA and 4:1 groups, more layers, tied
    // embeddings, a Phi-3 without LongRoPE, other windows and bases.
    gemma2_wide: "gemma2-wide", "gemma2";
    qwen3_wide: "qwen3-wide", "qwen3";
    phi3_4k: "phi3-4k", "phi3";
    olmo2_mha: "olmo2-mha", "olmo2";
    smollm3_8l: "smollm3-8l", "smollm3";
    llama3_tied: "llama3-tied", "llama";
}
