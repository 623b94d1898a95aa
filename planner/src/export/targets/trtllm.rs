//! `trtllm`: TensorRT-LLM's `KvCacheConfig` — `max_attention_window` (one window per layer,
//! all L), `sink_token_length` 0, `tokens_per_block` — as JSON (`kv_cache_config.json`, for
//! `LLM(kv_cache_config=KvCacheConfig(**json))`) and nested under `kv_cache_config:` for
//! `trtllm-serve --extra_llm_api_options` (`extra_llm_api_options.yaml`). The same files serve
//! the PyTorch backend (dense prefill, windowed cache: `trtllm:<method>` simulates it) and the
//! legacy TensorRT engine (windowed prefill: `trtllm-engine:<method>`).

use super::{bytes_note, file, json, prefill_note, reduce, Context, Writer, Written};
use crate::export::capability::{self, Capability, Engine};
use crate::Result;

/// The `trtllm` target.
pub struct Trtllm;

impl Writer for Trtllm {
    fn engine(&self) -> Engine {
        Engine::Trtllm
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let (r, summary) = reduce(cx, cap)?;
        let windows: Vec<usize> = r.layers.iter().map(|c| c.held(cx.n)).collect();
        let mut distinct = windows.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let block = summary.block_size;
        let body = serde_json::json!({
            "max_attention_window": windows,
            "sink_token_length": 0,
            "tokens_per_block": block,
        });
        let list: Vec<String> = windows.iter().map(ToString::to_string).collect();
        let yaml = format!(
            "kv_cache_config:\n  max_attention_window: [{}]\n  sink_token_length: 0\n  \
             tokens_per_block: {block}\n",
            list.join(", ")
        );
        let mut notes = vec![
            format!(
                "{} distinct windows (TensorRT-LLM keeps one pool per window); {}",
                distinct.len(),
                bytes_note(&summary, cx.n)
            ),
            prefill_note(cap),
        ];
        if let Ok(legacy) = capability::capability(Engine::TrtllmEngine, cx.arch) {
            notes.push(prefill_note(&legacy));
        }
        notes.push(
            "serve: trtllm-serve MODEL --extra_llm_api_options extra_llm_api_options.yaml; \
             LLM API: KvCacheConfig(**json.load(open('kv_cache_config.json')))"
                .to_string(),
        );
        Ok(Written {
            files: vec![
                file("kv_cache_config.json", json(&body)?),
                file("extra_llm_api_options.yaml", yaml.into_bytes()),
            ],
            notes,
            reduction: Some(summary),
            scores: None,
        })
    }
}
