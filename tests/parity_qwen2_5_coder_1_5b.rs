//! Parity of the runtime with Hugging Face transformers (float32) on Qwen2.5-Coder-1.5B-Instruct
//! (`qwen2`: NEOX RoPE rows, Q/K/V biases, separate output, GQA 6:1, head_dim 128; Q4_K/Q6_K),
//! fixtures in `tests/fixtures/qwen2.5-coder-1.5b-instruct/`. The model is loaded once for the
//! binary. Ignored by default: the file is 1.1 GB and the f32 model needs about 8 GB of memory.

mod common;
mod parity_common;

use std::sync::OnceLock;

use kvplan_runtime::model::Model;
use parity_common::B;

const MODEL: &str = "qwen2.5-coder-1.5b-instruct";

fn model() -> &'static Model<B> {
    static MODEL_ONCE: OnceLock<Model<B>> = OnceLock::new();
    MODEL_ONCE.get_or_init(|| parity_common::load(&common::catalog_model(MODEL)))
}

#[test]
#[ignore = "1.1 GB model, ~8 GB RAM; run with cargo test --release --test parity_qwen2_5_coder_1_5b -- --ignored"]
fn reads_the_qwen2_geometry_from_metadata() {
    let c = &model().config;
    assert_eq!(c.architecture, "qwen2");
    assert_eq!(parity_common::heads(c), (28, 12, 2, 128));
    assert_eq!((c.hidden, c.ffn, c.vocab), (1536, 8960, 151_936));
    assert_eq!(c.rope_theta, 1e6);
    assert!(c.layer_windows.iter().all(Option::is_none));
}

#[test]
#[ignore = "1.1 GB model, ~8 GB RAM; run with cargo test --release --test parity_qwen2_5_coder_1_5b -- --ignored"]
fn logits_and_greedy_continuations_match_transformers() {
    let fx = parity_common::fixture(MODEL, "logits.json");
    for name in ["prompt", "chat"] {
        parity_common::check_logits_case(model(), name, &fx[name]);
    }
}

#[test]
#[ignore = "1.1 GB model, ~8 GB RAM; run with cargo test --release --test parity_qwen2_5_coder_1_5b -- --ignored"]
fn keys_values_and_attention_match_transformers() {
    let fx = parity_common::fixture(MODEL, "kv_attention.json");
    parity_common::check_kv_attention(model(), &fx);
}
