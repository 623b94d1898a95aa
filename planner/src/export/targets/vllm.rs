//! `vllm`: the HF `config.json` keys vLLM's model code reads for per-layer windows —
//! `layer_types` (`full_attention` / `sliding_attention`), `sliding_window`,
//! `use_sliding_window` — as a `config.json` merge (`config_override.json`) and as the exact
//! `--hf-overrides` argument (`hf_overrides.txt`; vLLM applies it with `config.update` after
//! loading the config, `vllm/transformers_utils/config.py`). Llama: two classes; Qwen2: one
//! window on every layer; Gemma 3: refused (the capability table says why).
//!
//! What vLLM honours (the capability table's entries; vLLM read from its 0.33.0 wheel, commit
//! `4ba787ec9`, 2026-11):
//!
//! - **Llama**: `LlamaAttention` passes `per_layer_sliding_window = config.sliding_window`
//!   to the layers `layer_types` marks `sliding_attention`: full layers and ONE window. The
//!   kernel windows prefill as well. No sinks. Blocks of 16 tokens (`CacheConfig.DEFAULT_BLOCK_SIZE`);
//!   a sliding layer is admitted with `⌈min(W − 1 + c·T, n)/16⌉ + 1` blocks — the window and
//!   the tokens in flight, `T` = `max_num_batched_tokens`, `c` = 2 batches with async scheduling
//!   (`SlidingWindowSpec.max_admission_blocks_per_request`, [`crate::export::blocks`]) — so at
//!   4K with the default `T` a sliding layer costs as much as a full one at admission; the
//!   window saves at long contexts and in steady decode.
//! - **Qwen2**: `Qwen2Model` asserts `max_window_layers == num_hidden_layers` when
//!   `layer_types` mixes kinds, and `Qwen2Attention` passes no per-layer window; the model-wide
//!   window (`CacheConfig.sliding_window`) is set only when every layer is sliding
//!   (`EngineArgs.create_engine_config`). So Qwen2 runs ONE window on every layer, or none.
//! - **Gemma 3**: `Gemma3Attention` takes the RoPE parameters of its layer type
//!   (`config.rope_parameters[layer_type]`) and `per_layer_sliding_window = config.sliding_window`
//!   on the layers `layer_types` marks sliding: a global layer marked sliding would rotate with
//!   the local base (10 000, not 1 000 000) — another model — so the global layers stay
//!   `full_attention`, and what a plan can change is the local layers' one window: `sliding_window`
//!   alone, the model's own `layer_types` written back unchanged (as the llama.cpp target does;
//!   refused where the full global layers alone hold more than the plan).

use super::windows::{bytes_note, prefill_note, reduce};
use crate::export::capability::{
    Arch, BlockRule, Capability, Engine, Layers, Prefill, Refusal, Source,
};
use crate::export::classes::LayerClass;
use crate::export::manifest::{file, json};
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::Result;

const VLLM: &str = "vllm-project/vllm";
const VLLM_AT: &str = "v0.33.0 (4ba787ec9)";

const VLLM_LLAMA: &[Source] = &[
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/model_executor/models/llama.py: LlamaAttention, per_layer_sliding_window from layer_types",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/config/cache.py: CacheConfig.DEFAULT_BLOCK_SIZE = 16",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/v1/kv_cache_interface.py: SlidingWindowSpec.max_admission_blocks_per_request",
    },
];

const VLLM_QWEN2: &[Source] = &[
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/model_executor/models/qwen2.py: Qwen2Model asserts max_window_layers == \
               num_hidden_layers for mixed layer_types; Qwen2Attention passes no window",
    },
    Source {
        repo: VLLM,
        commit: VLLM_AT,
        file: "vllm/engine/arg_utils.py: CacheConfig.sliding_window only when every layer slides",
    },
];

const VLLM_GEMMA3: &[Source] = &[Source {
    repo: VLLM,
    commit: VLLM_AT,
    file: "vllm/model_executor/models/gemma3.py: Gemma3Attention, rope_parameters[layer_type], \
           sliding_window = config.sliding_window if is_sliding",
}];

/// The `vllm` target.
pub struct Vllm;

impl ExportTarget for Vllm {
    fn about(&self) -> About {
        About {
            name: "vllm",
            files: &["config_override.json", "hf_overrides.txt"],
            holds: "layer_types, sliding_window, use_sliding_window",
            reader: "vLLM: --hf-overrides \"$(cat hf_overrides.txt)\", or config_override.json \
                     merged into the model's config.json (per-layer sliding windows)",
        }
    }

    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        let windows = |layers, sources| {
            Capability::windows(
                Engine::Vllm,
                arch,
                layers,
                Prefill::Windowed,
                BlockRule::Vllm,
                sources,
            )
        };
        match arch {
            a if !a.engines_read() => Err(Refusal::unread(Engine::Vllm, a)),
            Arch::Llama => Ok(windows(Layers::TwoClasses, VLLM_LLAMA)),
            Arch::Qwen2 => Ok(windows(Layers::OneWindow, VLLM_QWEN2)),
            Arch::Gemma3 => Ok(windows(Layers::NativeWindowOnly, VLLM_GEMMA3)),
            _ => Err(Refusal::unread(Engine::Vllm, arch)),
        }
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
        // `use_sliding_window`: transformers' `Qwen2Config` (5.24.0) drops `sliding_window`
        // without it when config.json is read (vLLM itself never reads it, and `--hf-overrides`
        // sets attributes after that step); kept for Llama files as before, left out of
        // Gemma 3's, whose config has no such key.
        let body = if cx.arch == Arch::Gemma3 {
            serde_json::json!({ "layer_types": layer_types, "sliding_window": window })
        } else {
            serde_json::json!({
                "layer_types": layer_types,
                "sliding_window": window,
                "use_sliding_window": window.is_some(),
            })
        };
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
            format!(
                "serve: vllm serve MODEL --max-model-len {n} --max-num-batched-tokens {t} \
                 --hf-overrides \"$(cat hf_overrides.txt)\" (or merge config_override.json into \
                 the model's config.json); the bytes above assume these two settings and async \
                 scheduling (vLLM's default: {c} batches in flight). A smaller \
                 --max-num-batched-tokens lowers what a sliding layer needs at admission",
                n = cx.n,
                t = summary.serving.max_num_batched_tokens,
                c = summary.serving.concurrent_batches,
            ),
        ];
        if cap.layers == Some(Layers::OneWindow) {
            notes.push(format!(
                "vLLM's {} runs one window on every layer (mixed layer_types are refused): the \
                 plan's layer budgets are averaged; --to trtllm keeps full layers beside one window",
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
