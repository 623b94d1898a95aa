//! Parity of the runtime with Hugging Face transformers (float32) on Qwen2.5-Coder-0.5B-Instruct
//! (`qwen2`: NEOX RoPE rows, Q/K/V biases, separate output, GQA 7:1), fixtures in
//! `tests/fixtures/qwen2.5-coder-0.5b-instruct/`. The model is loaded once for the binary.

mod common;
mod parity_common;

use std::sync::OnceLock;

use kvplan_runtime::model::Model;
use parity_common::B;

const MODEL: &str = "qwen2.5-coder-0.5b-instruct";

fn model() -> &'static Model<B> {
    static MODEL_ONCE: OnceLock<Model<B>> = OnceLock::new();
    MODEL_ONCE.get_or_init(|| parity_common::load(&common::catalog_model(MODEL)))
}

#[test]
fn reads_the_qwen2_geometry_from_metadata() {
    let c = &model().config;
    assert_eq!(c.architecture, "qwen2");
    assert_eq!(parity_common::heads(c), (24, 14, 2, 64));
    assert_eq!(c.vocab, 151_936);
    assert_eq!(c.rope_theta, 1e6);
    assert!(c.layer_windows.iter().all(Option::is_none));
}

#[test]
fn logits_and_greedy_continuations_match_transformers() {
    let fx = parity_common::fixture(MODEL, "logits.json");
    for name in ["prompt", "chat"] {
        parity_common::check_logits_case(model(), name, &fx[name]);
    }
}

#[test]
fn keys_values_and_attention_match_transformers() {
    let fx = parity_common::fixture(MODEL, "kv_attention.json");
    parity_common::check_kv_attention(model(), &fx);
}
