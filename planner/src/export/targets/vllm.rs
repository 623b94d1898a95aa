//! `vllm`: the HF `config.json` keys vLLM's model code reads for per-layer windows —
//! `layer_types` (`full_attention` / `sliding_attention`), `sliding_window`,
//! `use_sliding_window` — as a `config.json` merge (`config_override.json`) and as the exact
//! `--hf-overrides` argument (`hf_overrides.txt`; vLLM applies it with `config.update` after
//! loading the config, `vllm/transformers_utils/config.py`). Llama: two classes; Qwen2: one
//! window on every layer; Gemma 3: refused (the capability table says why).

use super::{bytes_note, file, json, prefill_note, reduce, Context, Writer, Written};
use crate::export::capability::{Capability, Engine, Layers};
use crate::export::classes::LayerClass;
use crate::Result;

/// The `vllm` target.
pub struct Vllm;

impl Writer for Vllm {
    fn engine(&self) -> Engine {
        Engine::Vllm
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let (r, summary) = reduce(cx, cap)?;
        let window = r.window();
        let layer_types: Vec<&str> = r
            .layers
            .iter()
            .map(|c| match c {
                LayerClass::Window(_) => "sliding_attention",
                LayerClass::Full => "full_attention",
            })
            .collect();
        let body = serde_json::json!({
            "layer_types": layer_types,
            "sliding_window": window,
            "use_sliding_window": window.is_some(),
        });
        let compact = serde_json::to_string(&body).unwrap_or_default();
        let full = layer_types
            .iter()
            .filter(|t| **t == "full_attention")
            .count();
        let mut notes = vec![
            format!(
                "{full} of {} layers full, the others a sliding window of {}; {}",
                r.layers.len(),
                window.map_or("–".to_string(), |w| w.to_string()),
                bytes_note(&summary, cx.n)
            ),
            prefill_note(cap),
            "serve: vllm serve MODEL --hf-overrides \"$(cat hf_overrides.txt)\", or merge \
             config_override.json into the model's config.json"
                .to_string(),
        ];
        if cap.layers == Some(Layers::OneWindow) {
            notes.push(format!(
                "vLLM's {} runs one window on every layer (mixed layer_types are refused): the \
                 plan's layer budgets are averaged; --to trtllm keeps one window per layer",
                cx.arch.name()
            ));
        }
        Ok(Written {
            files: vec![
                file("config_override.json", json(&body)?),
                file("hf_overrides.txt", format!("{compact}\n").into_bytes()),
            ],
            notes,
            reduction: Some(summary),
            scores: None,
        })
    }
}
