//! `sglang`: SGLang, in the capability table so that `kvplan export --to sglang` answers with
//! what SGLang honours per architecture — which today is nothing a plan can change. Read
//! 2026-11-29 from the `sglang` 0.5.23 wheel on PyPI (its `_version.py` carries no commit; the
//! repository snapshot was too large to fetch, so no commit is pinned):
//!
//! - **Llama, Qwen2**: `LlamaAttention` and `Qwen2Attention` build `RadixAttention(...)` without
//!   `sliding_window_size` (default −1, `layers/radix_attention.py`), and neither model file reads
//!   `sliding_window`, `layer_types`, `use_sliding_window` or `max_window_layers`: no config
//!   override (`--json-model-override-args`, applied to the HF config before the model is built)
//!   windows a layer.
//! - **Gemma 3** (`models/gemma3_causal.py`): the local layers are those `layer_types` marks
//!   sliding, their window `config.sliding_window − 1` — an override changes it, with each layer
//!   type's own RoPE — but `arg_groups/model_overrides/gemma2_gemma3.py` forces
//!   `disable_hybrid_swa_memory` for Gemma 2/3 ("not yet supported"), so every layer keeps the
//!   whole sequence's K/V: the window masks attention and saves no memory.
//! - The hybrid SWA pool that would free out-of-window slots in decode
//!   (`ScheduleBatch.maybe_evict_swa`, `--swa-full-tokens-ratio`) is enabled only for an
//!   allow-list of architectures (`ModelConfig.is_hybrid_swa_model`: Llama 4, GPT-OSS, Gemma 4,
//!   …) that holds none of these.

use crate::export::capability::{Arch, Capability, Engine, Refusal, Source};
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::{Error, Result};

const SGLANG_AT: &str = "0.5.23 (PyPI wheel; no commit recorded in it)";

const SGLANG_DENSE: &[Source] = &[
    Source {
        repo: "sgl-project/sglang",
        commit: SGLANG_AT,
        file: "python/sglang/srt/models/llama.py, qwen2.py: RadixAttention without \
               sliding_window_size (default -1, layers/radix_attention.py)",
    },
    Source {
        repo: "sgl-project/sglang",
        commit: SGLANG_AT,
        file: "python/sglang/srt/configs/model_config.py: is_hybrid_swa_model allow-list (no \
               Llama, Qwen2 or Gemma 3)",
    },
];

const SGLANG_GEMMA3: &[Source] = &[
    Source {
        repo: "sgl-project/sglang",
        commit: SGLANG_AT,
        file: "python/sglang/srt/models/gemma3_causal.py: is_sliding from layer_types, window \
               config.sliding_window - 1",
    },
    Source {
        repo: "sgl-project/sglang",
        commit: SGLANG_AT,
        file: "python/sglang/srt/arg_groups/model_overrides/gemma2_gemma3.py: \
               disable_hybrid_swa_memory for Gemma 2/3",
    },
];

/// The `sglang` target.
pub struct Sglang;

impl ExportTarget for Sglang {
    fn about(&self) -> About {
        About {
            name: "sglang",
            files: &[],
            holds: "nothing yet: SGLang keeps every layer's whole K/V for these architectures",
            reader: "SGLang (--json-model-override-args): nothing a plan can change for llama, \
                     qwen2, gemma3",
        }
    }

    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        match arch {
            Arch::Llama | Arch::Qwen2 => Err(Refusal::new(
                Engine::Sglang,
                arch,
                "SGLang's model code for this architecture passes no sliding window to its \
                 attention (RadixAttention's sliding_window_size stays -1) and reads no \
                 layer_types or sliding_window, and its hybrid SWA memory pool is not enabled \
                 for it: no config override shrinks a layer's cache.",
                "--to vllm or --to trtllm (full layers and one window), or --to kvpress.",
                SGLANG_DENSE,
            )),
            Arch::Gemma3 => Err(Refusal::new(
                Engine::Sglang,
                arch,
                "SGLang reads Gemma 3's sliding_window (the local layers' window), but forces \
                 disable_hybrid_swa_memory for Gemma 2/3, so every layer keeps the whole \
                 sequence's K/V: a smaller window masks attention and saves no memory.",
                "--to vllm, --to trtllm or --to llamacpp (the local window with its memory).",
                SGLANG_GEMMA3,
            )),
            _ => Err(Refusal::unread(Engine::Sglang, arch)),
        }
    }

    fn write(&self, _cx: &Context<'_>, _cap: &Capability) -> Result<Written> {
        Err(Error::invalid(
            "--to sglang",
            "an architecture SGLang can window",
            "none (the capability table refuses every one)",
        ))
    }
}
