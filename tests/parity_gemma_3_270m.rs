//! Parity of the runtime with Hugging Face transformers (float32) on Gemma 3 270M (`gemma3`:
//! sliding-window and global layers with their own RoPE bases, Q/K norms, post-norms, GeGLU,
//! scaled embeddings, one KV head of 256 dimensions), fixtures in `tests/fixtures/gemma-3-270m/`.
//! `long_context.json` is longer than the 512-token window, so it fails unless the local layers
//! mask older keys; it runs in both attention kernels. The model is loaded once for the binary.

mod common;
mod parity_common;

use std::sync::{Mutex, MutexGuard, OnceLock};

use kvplan_runtime::generate::argmax;
use kvplan_runtime::model::{Logits, Model};
use parity_common::{floats, ids, max_diff, B, LOGITS_TOL};

const MODEL: &str = "gemma-3-270m";

/// The model, locked: the long-context test switches kernels on it.
fn model() -> MutexGuard<'static, Model<B>> {
    static MODEL_ONCE: OnceLock<Mutex<Model<B>>> = OnceLock::new();
    MODEL_ONCE
        .get_or_init(|| {
            let path = common::catalog_model(MODEL);
            Mutex::new(parity_common::load(&path))
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

#[test]
fn reads_the_gemma3_geometry_windows_and_bases() {
    let m = model();
    let c = &m.config;
    assert_eq!(c.architecture, "gemma3");
    assert_eq!(parity_common::heads(c), (18, 4, 1, 256));
    assert_eq!(c.hidden, 640);
    let globals: Vec<usize> = (0..18).filter(|&l| c.window(l).is_none()).collect();
    assert_eq!(globals, vec![5, 11, 17]);
    assert!((0..18).all(|l| globals.contains(&l) || c.window(l) == Some(512)));
    for l in 0..18 {
        let want = if globals.contains(&l) { 1e6 } else { 1e4 };
        assert_eq!(c.rope_bases[l], want, "layer {l}");
    }
}

#[test]
fn logits_and_greedy_continuations_match_transformers() {
    let m = model();
    let fx = parity_common::fixture(MODEL, "logits.json");
    for name in ["prompt", "chat"] {
        parity_common::check_logits_case(&m, name, &fx[name]);
    }
}

#[test]
fn keys_values_and_attention_match_transformers() {
    let m = model();
    let fx = parity_common::fixture(MODEL, "kv_attention.json");
    parity_common::check_kv_attention(&m, &fx);
}

/// The long prompt: argmax over its last 32 positions, the last logits, and 16 greedy tokens
/// decoded from the prompt's cache.
fn check_long_context(m: &Model<B>, fx: &serde_json::Value, kernel: &str) {
    let prompt = ids(&fx["ids"]);
    let top10 = fx["top10_ids_last32"].as_array().expect("top10");
    let (head, tail) = prompt.split_at(prompt.len() - top10.len());
    let mut cache = m.new_cache();
    m.forward(head, &mut cache, None, Logits::Last)
        .expect("prefill");
    let logits: Vec<f32> = m
        .forward(tail, &mut cache, None, Logits::All)
        .expect("tail")
        .into_data()
        .iter::<f32>()
        .collect();
    let vocab = m.config.vocab;
    for (i, row) in logits.chunks_exact(vocab).enumerate() {
        let want = top10[i][0].as_u64().expect("id") as u32;
        assert_eq!(argmax(row), want, "{kernel}: argmax at {}", head.len() + i);
    }
    let last = &logits[logits.len() - vocab..];
    let diff = max_diff(last, &floats(&fx["last_logits"]));
    eprintln!("{kernel}: long-context last logits within {diff}");
    assert!(diff < LOGITS_TOL, "{kernel}: last logits differ by {diff}");
    let want = ids(&fx["greedy_ids"]);
    let mut next = argmax(last);
    let mut got = vec![next];
    while got.len() < want.len() {
        let row: Vec<f32> = m
            .forward(&[next], &mut cache, None, Logits::Last)
            .expect("decode")
            .into_data()
            .iter::<f32>()
            .collect();
        next = argmax(&row);
        got.push(next);
    }
    assert_eq!(got, want, "{kernel}: greedy continuation");
}

#[test]
fn long_context_beyond_the_window_matches_transformers_in_both_kernels() {
    let mut m = model();
    let fx = parity_common::fixture(MODEL, "long_context.json");
    check_long_context(&m, &fx, "default kernel");
    m.set_generic_attention(true);
    check_long_context(&m, &fx, "generic kernel");
    m.set_generic_attention(false);
}
