//! The architectures kvplan runs, named by `general.architecture`, and what each adds to the
//! Llama decoder block — one table, read by the config, the loader and the forward pass.
//!
//! | `general.architecture` | RoPE rows in the GGUF | Q/K/V bias | Q/K norm | post-norms | gate activation | embeddings | windows |
//! |---|---|---|---|---|---|---|---|
//! | `llama`  | adjacent pairs (NORM): un-permuted on load | no  | no  | no  | SiLU      | as stored | no  |
//! | `qwen2`  | halves (NEOX): HF order already            | yes | no  | no  | SiLU      | as stored | no  |
//! | `gemma3` | halves (NEOX): HF order already            | no  | yes | yes | GELU-tanh | × √hidden | yes |
//!
//! The RoPE layouts are llama.cpp's (`llama_model_rope_type`: `LLM_ARCH_LLAMA` → NORM,
//! `LLM_ARCH_QWEN2` and `LLM_ARCH_GEMMA3` → NEOX): only NORM rows need the permutation that
//! docs/design.md's "RoPE and the GGUF weight order" describes.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How llama.cpp lays out the rows of `attn_q` / `attn_k` within a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RopeLayout {
    /// Rotates adjacent pairs `(2i, 2i+1)`: rows are permuted relative to Hugging Face order.
    Norm,
    /// Rotates halves `(i, i + d/2)`: rows are in Hugging Face order.
    Neox,
}

/// The activation of the gate in the gated feed-forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Activation {
    /// `x·σ(x)` (SwiGLU).
    Silu,
    /// GELU with the tanh approximation (GeGLU; PyTorch's `gelu(approximate="tanh")`).
    GeluTanh,
}

/// A supported `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Architecture {
    /// Llama and its small derivatives (SmolLM2).
    Llama,
    /// Qwen2 / Qwen2.5.
    Qwen2,
    /// Gemma 3 (text).
    Gemma3,
}

/// Every supported architecture, in the order errors list them.
pub const ARCHITECTURES: [Architecture; 3] = [
    Architecture::Llama,
    Architecture::Qwen2,
    Architecture::Gemma3,
];

impl Architecture {
    /// The architecture named `name` (`general.architecture`), or an error listing the supported ones.
    pub fn from_name(name: &str) -> Result<Self> {
        ARCHITECTURES
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = ARCHITECTURES.iter().map(|a| a.name()).collect();
                Error::Model(format!(
                    "general.architecture = {name:?}: kvplan runs {}",
                    known.join(", ")
                ))
            })
    }

    /// The name GGUF files use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Gemma3 => "gemma3",
        }
    }

    /// Row layout of `attn_q` / `attn_k`.
    pub fn rope_layout(self) -> RopeLayout {
        match self {
            Self::Llama => RopeLayout::Norm,
            Self::Qwen2 | Self::Gemma3 => RopeLayout::Neox,
        }
    }

    /// Whether the Q, K and V projections carry biases (`attn_{q,k,v}.bias`).
    pub fn qkv_bias(self) -> bool {
        self == Self::Qwen2
    }

    /// Whether each query and key head is RMS-normalised before RoPE (`attn_{q,k}_norm`).
    pub fn qk_norm(self) -> bool {
        self == Self::Gemma3
    }

    /// Whether attention and feed-forward outputs are RMS-normalised before the residual add
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub fn post_norms(self) -> bool {
        self == Self::Gemma3
    }

    /// The gate's activation.
    pub fn activation(self) -> Activation {
        match self {
            Self::Llama | Self::Qwen2 => Activation::Silu,
            Self::Gemma3 => Activation::GeluTanh,
        }
    }

    /// Whether token embeddings are multiplied by √hidden before the first block.
    pub fn scales_embeddings(self) -> bool {
        self == Self::Gemma3
    }

    /// Whether some layers attend over a sliding window.
    pub fn has_windows(self) -> bool {
        self == Self::Gemma3
    }

    /// The tensors of block `n`, without the `blk.N.` prefix, that this architecture reads.
    pub fn layer_tensors(self) -> Vec<&'static str> {
        let mut names = vec![
            "attn_norm.weight",
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_output.weight",
            "ffn_norm.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ];
        if self.qkv_bias() {
            names.extend(["attn_q.bias", "attn_k.bias", "attn_v.bias"]);
        }
        if self.qk_norm() {
            names.extend(["attn_q_norm.weight", "attn_k_norm.weight"]);
        }
        if self.post_norms() {
            names.extend(["post_attention_norm.weight", "post_ffw_norm.weight"]);
        }
        names
    }
}

/// Gemma 3's hyper-parameters that its GGUF files need not carry, as llama.cpp
/// (`src/llama-model.cpp`, `load_hparams`, case `LLM_ARCH_GEMMA3`) and transformers
/// (`models/gemma3/configuration_gemma3.py`, `Gemma3TextConfig`) fix them. The config prefers a
/// metadata key where the file has one (named at each constant).
pub mod gemma3 {
    /// Layer `l` attends globally iff `(l + 1) % GLOBAL_EVERY == 0` (layers 5, 11, 17, …), the
    /// others over the sliding window: llama.cpp `hparams.set_swa_pattern(6)`, transformers'
    /// default `sliding_window_pattern = 6` behind `layer_types`. Key preferred:
    /// `gemma3.attention.sliding_window_pattern` (a period, or one bool per layer, true = windowed).
    pub const GLOBAL_EVERY: usize = 6;

    /// RoPE base of the sliding-window layers (global layers use `gemma3.rope.freq_base`):
    /// llama.cpp `rope_freq_base_train_swa = 10000.0f`, transformers `rope_local_base_freq =
    /// 10_000.0`. Key preferred: `gemma3.rope.freq_base_swa`.
    pub const LOCAL_ROPE_BASE: f64 = 10_000.0;

    /// Layer count of Gemma 3 27B, whose query scale is `1/√(hidden / heads)` instead of
    /// `1/√head_dim` (llama.cpp `f_attention_scale` for `LLM_TYPE_27B`; transformers'
    /// `query_pre_attn_scalar = 168` in that model's config). Every other size scales by
    /// `1/√head_dim` (`query_pre_attn_scalar = 256 = head_dim`).
    pub const LAYERS_27B: usize = 62;
}
