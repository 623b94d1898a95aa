//! The architectures kvplan runs, named by `general.architecture`, and what each adds to or
//! takes from the Llama decoder block — one table, read by the config, the loader and the forward
//! pass.
//!
//! | `general.architecture` | RoPE rows | Q/K/V bias | Q/K norm | pre-norms | post-norms | gate | embeddings | windows | soft-caps | fused tensors |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | `llama`   | NORM: un-permuted on load | no  | no       | yes | no  | SiLU      | as stored | every layer, where the file sets one (Mistral) | no  | no |
//! | `smollm3` | NORM: un-permuted on load | no  | no       | yes | no  | SiLU      | as stored | no | no | no |
//! | `qwen2`   | NEOX: HF order already    | yes | no       | yes | no  | SiLU      | as stored | no | no | no |
//! | `qwen3`   | NEOX                      | no  | per head | yes | no  | SiLU      | as stored | no | no | no |
//! | `olmo2`   | NEOX                      | no  | whole projection | **no** | yes | SiLU | as stored | no | no | no |
//! | `phi3`    | NEOX                      | no  | no       | yes | no  | SiLU      | as stored | every layer, where the file sets one | no | `attn_qkv`, `ffn_up` = gate ‖ up |
//! | `gemma2`  | NEOX                      | no  | no       | yes | yes | GELU-tanh | × √hidden | even layers (period 2) | attention and final logits | no |
//! | `gemma3`  | NEOX                      | no  | per head | yes | yes | GELU-tanh | × √hidden | all but every 6th layer | no | no |
//!
//! Sources, per architecture: llama.cpp's graph builders (`src/models/<arch>.cpp`: `llm_build_llama`,
//! `llm_build_smollm3`, `llm_build_qwen2`, `llm_build_qwen3`, `llm_build_olmo2`, `llm_build_phi3`,
//! `llm_build_gemma2_iswa`, `llm_build_gemma3_iswa`) and `load_hparams` in `src/llama-model.cpp`,
//! and transformers' `models/<arch>/modeling_<arch>.py` (the model cards' reference code):
//! - **RoPE rows.** llama.cpp's `llama_model_rope_type`: `LLM_ARCH_LLAMA` and `LLM_ARCH_SMOLLM3` →
//!   NORM (adjacent pairs; its converter permutes `q_proj`/`k_proj` rows, which the loader undoes),
//!   every other one here → NEOX (halves, Hugging Face order as stored).
//! - **Qwen3** (`Qwen3Attention`): `q_norm`/`k_norm` are RMSNorms over each head's `head_dim`,
//!   before RoPE, as Gemma 3's.
//! - **OLMo 2** (`Olmo2DecoderLayer`, `llm_build_olmo2`): no norm before attention or the
//!   feed-forward; `x + post_attention_layernorm(attn(x))`, then `h + post_feedforward_layernorm(
//!   mlp(h))`; `q_norm`/`k_norm` are RMSNorms over the whole `[heads·head_dim]` projection.
//! - **Phi-3** (`Phi3Attention`, `llm_build_phi3`): `qkv_proj` is one tensor (Q, then K, then V
//!   rows: the fused projection kvplan already runs) and `gate_up_proj` one tensor whose first
//!   half is the gate; RoPE factors for short and long contexts ([`super::rope`]).
//! - **Gemma 2** (`Gemma2Attention`, `llm_build_gemma2_iswa`): `tanh(s / c)·c` on the scaled
//!   scores (`attn_logit_softcapping`) and on the final logits (`final_logit_softcapping`); even
//!   layers slide (`layer_types`: `(i + 1) % 2` → sliding; llama.cpp `set_swa_pattern(2)`).
//! - **SmolLM3** (`SmolLM3Attention`, `llm_build_smollm3`): every `no_rope_layer_interval`-th layer
//!   (layers 3, 7, … at the default 4) applies no rotary embedding (NoPE). Such a layer's keys are
//!   cached as they are projected; its entries keep their token positions (a press that moves an
//!   entry to a new position turns nothing there), and a plan's windows and budgets count entries
//!   as on any other layer.

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

/// Where an architecture RMS-normalises queries and keys before RoPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum QkNorm {
    /// No Q/K norm.
    None,
    /// Over each head's `head_dim` (`attn_{q,k}_norm` of `[head_dim]`: Qwen3, Gemma 3).
    PerHead,
    /// Over the whole projection (`attn_q_norm` of `[heads·head_dim]`, `attn_k_norm` of
    /// `[kv_heads·head_dim]`: OLMo 2).
    Whole,
}

/// Which layers of an architecture attend over a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WindowRule {
    /// None; a file setting `attention.sliding_window` is refused.
    Never,
    /// Every layer, where the file sets `attention.sliding_window` (Mistral's `llama` files,
    /// Phi-3).
    EveryLayerWhenSet,
    /// All but every `p`-th layer (layer `l` global iff `(l + 1) % p == 0`), `p` from
    /// `attention.sliding_window_pattern` where the file has it; the window is required.
    Periodic(usize),
}

/// A supported `general.architecture`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Architecture {
    /// Llama 1–3 (RoPE scaling `linear`, `yarn`, `llama3`'s `rope_freqs`), Mistral, SmolLM2.
    Llama,
    /// Qwen2 / Qwen2.5 (YaRN where the file sets it).
    Qwen2,
    /// Qwen3 (dense).
    Qwen3,
    /// OLMo 2.
    Olmo2,
    /// Phi-3 / Phi-3.5 (dense).
    Phi3,
    /// Gemma 2.
    Gemma2,
    /// Gemma 3 (text).
    Gemma3,
    /// SmolLM3.
    Smollm3,
}

/// Every supported architecture, in the order errors list them.
pub const ARCHITECTURES: [Architecture; 8] = [
    Architecture::Llama,
    Architecture::Qwen2,
    Architecture::Qwen3,
    Architecture::Olmo2,
    Architecture::Phi3,
    Architecture::Gemma2,
    Architecture::Gemma3,
    Architecture::Smollm3,
];

/// Architectures whose files kvplan recognises and refuses, with the reason (what it would
/// have to run that it does not).
const REFUSED: [(&str, &str); 12] = [
    ("qwen2moe", "mixture-of-experts feed-forward"),
    ("qwen3moe", "mixture-of-experts feed-forward"),
    ("mixtral", "mixture-of-experts feed-forward"),
    ("olmoe", "mixture-of-experts feed-forward"),
    ("phimoe", "mixture-of-experts feed-forward"),
    (
        "deepseek2",
        "multi-head latent attention (MLA) and mixture-of-experts",
    ),
    ("deepseek", "mixture-of-experts feed-forward"),
    ("llama4", "mixture-of-experts and chunked attention"),
    ("gemma3n", "per-layer embeddings and AltUp"),
    ("mllama", "a vision tower (cross-attention layers)"),
    ("clip", "a vision tower"),
    (
        "gpt-oss",
        "mixture-of-experts feed-forward and attention sinks",
    ),
];

impl Architecture {
    /// The architecture named `name` (`general.architecture`), or an error listing the supported ones.
    pub fn from_name(name: &str) -> Result<Self> {
        ARCHITECTURES
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = ARCHITECTURES.iter().map(|a| a.name()).collect();
                let why = REFUSED
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, why)| format!(" ({why} is not supported)"))
                    .unwrap_or_default();
                Error::Model(format!(
                    "general.architecture = {name:?}{why}: kvplan runs {}",
                    known.join(", ")
                ))
            })
    }

    /// The name GGUF files use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Olmo2 => "olmo2",
            Self::Phi3 => "phi3",
            Self::Gemma2 => "gemma2",
            Self::Gemma3 => "gemma3",
            Self::Smollm3 => "smollm3",
        }
    }

    /// Row layout of `attn_q` / `attn_k`.
    pub fn rope_layout(self) -> RopeLayout {
        match self {
            Self::Llama | Self::Smollm3 => RopeLayout::Norm,
            _ => RopeLayout::Neox,
        }
    }

    /// Whether the Q, K and V projections carry biases (`attn_{q,k,v}.bias`).
    pub fn qkv_bias(self) -> bool {
        self == Self::Qwen2
    }

    /// Where queries and keys are RMS-normalised before RoPE (`attn_{q,k}_norm`).
    pub fn qk_norm(self) -> QkNorm {
        match self {
            Self::Qwen3 | Self::Gemma3 => QkNorm::PerHead,
            Self::Olmo2 => QkNorm::Whole,
            _ => QkNorm::None,
        }
    }

    /// Whether attention and feed-forward inputs are RMS-normalised (`attn_norm`, `ffn_norm`).
    pub fn pre_norms(self) -> bool {
        self != Self::Olmo2
    }

    /// Whether attention and feed-forward outputs are RMS-normalised before the residual add
    /// (`post_attention_norm`, `post_ffw_norm`).
    pub fn post_norms(self) -> bool {
        matches!(self, Self::Gemma2 | Self::Gemma3 | Self::Olmo2)
    }

    /// The gate's activation.
    pub fn activation(self) -> Activation {
        match self {
            Self::Gemma2 | Self::Gemma3 => Activation::GeluTanh,
            _ => Activation::Silu,
        }
    }

    /// Whether token embeddings are multiplied by √hidden before the first block.
    pub fn scales_embeddings(self) -> bool {
        matches!(self, Self::Gemma2 | Self::Gemma3)
    }

    /// Which layers attend over a sliding window.
    pub fn windows(self) -> WindowRule {
        match self {
            Self::Llama | Self::Phi3 => WindowRule::EveryLayerWhenSet,
            Self::Gemma2 => WindowRule::Periodic(gemma2::GLOBAL_EVERY),
            Self::Gemma3 => WindowRule::Periodic(gemma3::GLOBAL_EVERY),
            _ => WindowRule::Never,
        }
    }

    /// Whether some layers can attend over a sliding window.
    pub fn has_windows(self) -> bool {
        self.windows() != WindowRule::Never
    }

    /// Whether attention scores and final logits may be soft-capped
    /// (`attn_logit_softcapping`, `final_logit_softcapping`).
    pub fn soft_caps(self) -> bool {
        self == Self::Gemma2
    }

    /// Whether Q, K and V come as one tensor `attn_qkv` (Phi-3).
    pub fn fused_qkv(self) -> bool {
        self == Self::Phi3
    }

    /// Whether gate and up come as one tensor `ffn_up` of `2·ffn` rows, gate first (Phi-3).
    pub fn fused_gate_up(self) -> bool {
        self == Self::Phi3
    }

    /// Whether RoPE scaling (`rope.scaling.*`, `rope_freqs.weight`) applies to every layer the
    /// way llama.cpp's `ggml_rope_ext` applies it: not on the Gemma models, whose local layers
    /// rotate at their own base.
    pub fn rope_scaling(self) -> bool {
        !matches!(self, Self::Gemma2 | Self::Gemma3)
    }

    /// Every n-th layer without RoPE (`n` from `no_rope_layer_step`, else the default), or
    /// `None` where every layer rotates.
    pub fn no_rope_every(self) -> Option<usize> {
        (self == Self::Smollm3).then_some(smollm3::NO_ROPE_EVERY)
    }

    /// The tensors of block `n`, without the `blk.N.` prefix, that this architecture reads.
    pub fn layer_tensors(self) -> Vec<&'static str> {
        let mut names = vec!["attn_output.weight", "ffn_down.weight", "ffn_up.weight"];
        match self.fused_qkv() {
            true => names.push("attn_qkv.weight"),
            false => names.extend(["attn_q.weight", "attn_k.weight", "attn_v.weight"]),
        }
        if !self.fused_gate_up() {
            names.push("ffn_gate.weight");
        }
        if self.pre_norms() {
            names.extend(["attn_norm.weight", "ffn_norm.weight"]);
        }
        if self.qkv_bias() {
            names.extend(["attn_q.bias", "attn_k.bias", "attn_v.bias"]);
        }
        if self.qk_norm() != QkNorm::None {
            names.extend(["attn_q_norm.weight", "attn_k_norm.weight"]);
        }
        if self.post_norms() {
            names.extend(["post_attention_norm.weight", "post_ffw_norm.weight"]);
        }
        names
    }

    /// The tensors outside the blocks that this architecture may read besides the embedding,
    /// the final norm and the output: RoPE factors.
    pub fn global_tensors(self) -> &'static [&'static str] {
        match self {
            Self::Phi3 => &["rope_factors_long.weight", "rope_factors_short.weight"],
            a if a.rope_scaling() => &["rope_freqs.weight"],
            _ => &[],
        }
    }
}

/// Gemma 2's hyper-parameters that its GGUF files need not carry: llama.cpp
/// (`src/llama-model.cpp`, `load_hparams`, case `LLM_ARCH_GEMMA2`) and transformers
/// (`models/gemma2/configuration_gemma2.py`, `Gemma2Config`).
pub mod gemma2 {
    /// Layer `l` attends globally iff `(l + 1) % GLOBAL_EVERY == 0` (layers 1, 3, 5, …):
    /// llama.cpp `hparams.set_swa_pattern(2)`, transformers `layer_types` (`(i + 1) % 2` →
    /// sliding).
    pub const GLOBAL_EVERY: usize = 2;

    /// Layer count of Gemma 2 27B, whose query scale is `1/√(hidden / heads)` (llama.cpp
    /// `f_attention_scale` for `LLM_TYPE_27B`; transformers `query_pre_attn_scalar = 144`);
    /// 2B and 9B scale by `1/√head_dim` (`query_pre_attn_scalar = 256 = head_dim`).
    pub const LAYERS_27B: usize = 46;
}

/// SmolLM3's hyper-parameters that its GGUF files need not carry.
pub mod smollm3 {
    /// Layer `l` applies no RoPE iff `(l + 1) % NO_ROPE_EVERY == 0`: llama.cpp
    /// `hparams.n_no_rope_layer_step = 4` (`LLM_ARCH_SMOLLM3`), transformers
    /// `no_rope_layer_interval = 4` behind `no_rope_layers`. Key preferred:
    /// `smollm3.no_rope_layer_step`.
    pub const NO_ROPE_EVERY: usize = 4;
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
