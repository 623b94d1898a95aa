//! Parity of the burn runtime with an independent implementation (Hugging Face transformers,
//! float32) on the shipped model: `tests/fixtures/smollm2/`. Tolerances from the fixtures' README.

mod common;
mod parity_common;

use kvplan_runtime::generate::{generate, GenerateConfig, Sampling};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::observe::{ObserveConfig, Observer};
use kvplan_runtime::tokenizer::{ChatMessage, Tokenizer};
use parity_common::{floats, ids, max_diff, B};

fn load() -> (Model<B>, Tokenizer) {
    common::backend_setup();
    let gguf = GgufFile::open(common::shipped_model()).expect("model opens");
    let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer builds");
    (
        Model::from_gguf(&gguf, &kvplan_runtime::backend::device()).expect("model loads"),
        tok,
    )
}

#[test]
fn tokenizer_reproduces_every_fixture_case() {
    let gguf = GgufFile::open(common::shipped_model()).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let fx = common::fixture("tokenizer.json");
    for case in fx["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(
            tok.encode(text).unwrap(),
            ids(&case["ids"]),
            "text {text:?}"
        );
        if let Some(chat) = case.get("chat") {
            let msgs: Vec<ChatMessage> = serde_json::from_value(chat.clone()).unwrap();
            assert_eq!(
                tok.render_chat(&msgs).unwrap(),
                text,
                "chat template rendering"
            );
        }
    }
}

#[test]
fn logits_and_greedy_continuations_match_transformers() {
    let (model, tok) = load();
    let mut failed = Vec::new();
    let fx = common::fixture("logits.json");
    for name in ["prompt", "chat"] {
        let case = &fx[name];
        let prompt = ids(&case["ids"]);
        assert_eq!(
            tok.encode(case["text"].as_str().unwrap()).unwrap(),
            prompt,
            "{name}: ids"
        );
        let logits = model
            .forward(&prompt, &mut model.new_cache(), None, Logits::All)
            .unwrap();
        let [t, vocab] = logits.dims();
        let flat: Vec<f32> = logits.into_data().iter::<f32>().collect();
        let top10 = case["top10_ids_per_position"].as_array().unwrap();
        let wrong: Vec<usize> = (0..t)
            .filter(|&pos| {
                let row = &flat[pos * vocab..(pos + 1) * vocab];
                kvplan_runtime::generate::argmax(row) != top10[pos][0].as_u64().unwrap() as u32
            })
            .collect();
        report(
            &mut failed,
            wrong.is_empty(),
            format!("{name}: argmax differs at positions {wrong:?} of {t}"),
        );
        let last = &flat[(t - 1) * vocab..];
        let want = floats(&case["last_logits"]);
        let diff = max_diff(last, &want);
        report(
            &mut failed,
            diff < 1e-2,
            format!("{name}: last-position logits max |Δ| {diff} (tolerance 0.01)"),
        );
        let want_ids = ids(&case["greedy_ids"]);
        let config = GenerateConfig {
            max_new_tokens: want_ids.len(),
            sampling: Sampling::Greedy,
            stop_ids: tok.stop_ids.clone(),
        };
        let got = generate(
            &model,
            &prompt,
            &config,
            &mut model.new_cache(),
            None,
            |_| {},
        )
        .unwrap();
        report(
            &mut failed,
            got == want_ids,
            format!("{name}: greedy continuation {got:?}, fixture {want_ids:?}"),
        );
        if got == want_ids {
            assert_eq!(
                tok.decode(&got).unwrap(),
                case["greedy_text"].as_str().unwrap()
            );
        }
    }
    assert!(
        failed.is_empty(),
        "out of tolerance:\n{}",
        failed.join("\n")
    );
}

/// Prints one measured comparison (`cargo test -- --nocapture` shows them all, which is how the
/// GPU's fast path is measured per tensor) and records it when out of tolerance.
fn report(failed: &mut Vec<String>, ok: bool, line: String) {
    eprintln!("parity {}: {line}", if ok { "ok" } else { "OUT" });
    if !ok {
        failed.push(line);
    }
}

#[test]
fn keys_values_and_attention_match_transformers() {
    let (model, _) = load();
    let fx = common::fixture("kv_attention.json");
    let prompt = ids(&fx["ids"]);
    let layers: Vec<usize> = fx["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_u64().unwrap() as usize)
        .collect();
    let mut obs = Observer::new(
        ObserveConfig {
            attn_rows: 8,
            rows_end: None,
            keys_values: false,
            layers: Some(layers.clone()),
            column_sums: false,
        },
        model.config.geometry.layers,
    );
    let mut cache = model.new_cache();
    model
        .forward(&prompt, &mut cache, Some(&mut obs), Logits::Last)
        .unwrap();
    let d = model.config.geometry.head_dim;
    let mut failed = Vec::new();
    for &l in &layers {
        // Cached keys are post-RoPE in Hugging Face order (the loader un-permutes the GGUF rows).
        for (kind, want_all) in [
            ("keys", &fx[format!("keys_L{l}")]),
            ("values", &fx[format!("values_L{l}")]),
        ] {
            let mut worst = 0f32;
            for (h, want) in want_all.as_array().unwrap().iter().enumerate() {
                let (k, v) = cache.layers[l].head(h).unwrap();
                let got: Vec<f32> = if kind == "keys" { k } else { v }
                    .into_data()
                    .iter::<f32>()
                    .collect();
                let want: Vec<f32> = want.as_array().unwrap().iter().flat_map(floats).collect();
                assert_eq!(got.len(), prompt.len() * d);
                worst = worst.max(max_diff(&got, &want));
            }
            report(
                &mut failed,
                worst < 1e-3,
                format!("layer {l} {kind}: max |Δ| over heads {worst} (tolerance 0.001)"),
            );
        }
        let rec = &obs.layers[l].attention[0];
        let mut worst = 0f32;
        for (h, want) in fx[format!("attention_L{l}")]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            for (r, want_row) in want.as_array().unwrap().iter().enumerate() {
                worst = worst.max(max_diff(&rec.probs[h][r], &floats(want_row)));
            }
        }
        report(
            &mut failed,
            worst < 1e-3,
            format!("layer {l} attention: max |Δ| over heads and rows {worst} (tolerance 0.001)"),
        );
    }
    assert!(
        failed.is_empty(),
        "out of tolerance:\n{}",
        failed.join("\n")
    );
}
