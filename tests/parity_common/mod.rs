//! Parity checks shared by the per-model parity tests: the runtime against reference outputs of
//! an independent implementation (Hugging Face transformers, float32) in `tests/fixtures/<model>/`,
//! with the tolerances of the fixtures' READMEs (logits 1e-2 absolute, identical argmax and greedy
//! continuations, keys/values/attention 1e-3). Token ids come from the fixtures, so these checks
//! do not depend on the tokenizer.

#![allow(dead_code)]

use std::path::PathBuf;

use kvplan_runtime::generate::{argmax, generate, GenerateConfig, Sampling};
use kvplan_runtime::model::{Logits, Model, ModelConfig};
use kvplan_runtime::observe::{ObserveConfig, Observer};
use serde_json::Value;

/// The backend the tests run on.
pub type B = kvplan_runtime::backend::Selected;

/// Logits tolerance (absolute).
pub const LOGITS_TOL: f32 = 1e-2;
/// Keys, values and attention probabilities tolerance (absolute).
pub const KV_TOL: f32 = 1e-3;

/// Loads the model at `path` on the default device.
pub fn load(path: &PathBuf) -> Model<B> {
    super::common::backend_setup();
    Model::load(path, &kvplan_runtime::backend::device())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The model's `(layers, query heads, KV heads, head dim)`, as read from the GGUF's metadata.
pub fn heads(c: &ModelConfig) -> (usize, usize, usize, usize) {
    let g = &c.geometry;
    (g.layers, g.q_heads, g.kv_heads, g.head_dim)
}

/// `tests/fixtures/<model>/<name>`, parsed.
pub fn fixture(model: &str, name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(model)
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("an array of ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

pub fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("an array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

/// Largest absolute difference.
pub fn max_diff(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}

/// Logits of every position of `prompt`, row-major `[t][vocab]`.
pub fn all_logits(model: &Model<B>, prompt: &[u32]) -> Vec<f32> {
    let logits = model
        .forward(prompt, &mut model.new_cache(), None, Logits::All)
        .expect("forward");
    logits.into_data().iter::<f32>().collect()
}

/// One case of `logits.json`: argmax at every position, the last position's logits, and the
/// greedy continuation (generated without stop ids for exactly the reference's length, so a
/// reference ending in a stop token is matched token for token).
pub fn check_logits_case(model: &Model<B>, name: &str, case: &Value) {
    check_logits_case_within(model, name, case, LOGITS_TOL);
}

/// [`check_logits_case`] with the last-position logits within `tol`.
pub fn check_logits_case_within(model: &Model<B>, name: &str, case: &Value, tol: f32) {
    let prompt = ids(&case["ids"]);
    let vocab = model.config.vocab;
    let flat = all_logits(model, &prompt);
    let top10 = case["top10_ids_per_position"].as_array().expect("top10");
    for (pos, row) in flat.chunks_exact(vocab).enumerate() {
        let want = top10[pos][0].as_u64().expect("id") as u32;
        assert_eq!(argmax(row), want, "{name}: argmax at position {pos}");
    }
    let last = &flat[(prompt.len() - 1) * vocab..];
    let diff = max_diff(last, &floats(&case["last_logits"]));
    eprintln!("{name}: last-position logits within {diff}");
    assert!(diff < tol, "{name}: last-position logits differ by {diff}");
    let want = ids(&case["greedy_ids"]);
    let config = GenerateConfig {
        max_new_tokens: want.len(),
        sampling: Sampling::Greedy,
        stop_ids: Vec::new(),
    };
    let got = generate(
        model,
        &prompt,
        &config,
        &mut model.new_cache(),
        None,
        |_| {},
    )
    .expect("generate");
    assert_eq!(got, want, "{name}: greedy continuation");
}

/// `kv_attention.json`: cached keys (after RoPE, Hugging Face order) and values of every KV head,
/// and the attention of the last 8 query rows of every query head, at the fixture's layers.
pub fn check_kv_attention(model: &Model<B>, fx: &Value) {
    check_kv_attention_within(model, fx, KV_TOL);
}

/// [`check_kv_attention`] within `tol`.
pub fn check_kv_attention_within(model: &Model<B>, fx: &Value, tol: f32) {
    let prompt = ids(&fx["ids"]);
    let layers: Vec<usize> = fx["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| l.as_u64().expect("layer") as usize)
        .collect();
    let config = ObserveConfig {
        attn_rows: 8,
        rows_end: None,
        keys_values: false,
        layers: Some(layers.clone()),
        column_sums: false,
    };
    let mut obs = Observer::new(config, model.config.geometry.layers);
    let mut cache = model.new_cache();
    model
        .forward(&prompt, &mut cache, Some(&mut obs), Logits::Last)
        .expect("forward");
    let d = model.config.geometry.head_dim;
    for &l in &layers {
        for kind in ["keys", "values"] {
            let want_all = fx[format!("{kind}_L{l}")].as_array().expect("heads");
            assert_eq!(want_all.len(), model.config.geometry.kv_heads);
            for (h, want) in want_all.iter().enumerate() {
                let (k, v) = cache.layers[l].head(h).expect("cached head");
                let got: Vec<f32> = if kind == "keys" { k } else { v }
                    .into_data()
                    .iter::<f32>()
                    .collect();
                let want: Vec<f32> = want
                    .as_array()
                    .expect("rows")
                    .iter()
                    .flat_map(floats)
                    .collect();
                assert_eq!(got.len(), prompt.len() * d);
                let diff = max_diff(&got, &want);
                assert!(diff < tol, "layer {l} {kind} head {h}: {diff}");
            }
        }
        let rec = &obs.layers[l].attention[0];
        let want_all = fx[format!("attention_L{l}")].as_array().expect("heads");
        assert_eq!(want_all.len(), model.config.geometry.q_heads);
        for (h, want) in want_all.iter().enumerate() {
            for (r, want_row) in want.as_array().expect("rows").iter().enumerate() {
                let diff = max_diff(&rec.probs[h][r], &floats(want_row));
                assert!(diff < tol, "layer {l} attention head {h} row {r}: {diff}");
            }
        }
    }
}
