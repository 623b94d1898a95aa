//! Model geometry, read from GGUF metadata (`<arch>.*` keys) — no model's numbers are written here.

use kvplan_planner::Geometry;

use super::rope::RopeSet;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// RoPE base when a file has no `<arch>.rope.freq_base` (llama.cpp's and transformers' default).
pub const DEFAULT_ROPE_BASE: f64 = 10_000.0;

/// Geometry and hyper-parameters of a Llama-family decoder.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelConfig {
    /// `general.architecture`, e.g. `llama`.
    pub architecture: String,
    /// `general.name`, or the architecture when absent.
    pub name: String,
    /// Number of transformer blocks.
    pub n_layers: usize,
    /// Query heads per layer.
    pub n_heads: usize,
    /// Key/value heads per layer (GQA: `n_heads` is a multiple of it).
    pub n_kv_heads: usize,
    /// Dimension of one head.
    pub head_dim: usize,
    /// Hidden size (`embedding_length`).
    pub hidden: usize,
    /// Inner size of the SwiGLU feed-forward.
    pub ffn: usize,
    /// Vocabulary size (rows of the token embedding).
    pub vocab: usize,
    /// RoPE base θ.
    pub rope_theta: f64,
    /// RMSNorm ε.
    pub rms_eps: f64,
    /// Training context length.
    pub context_len: usize,
    /// The attention geometry as plans record it: the numbers above and the query→KV head map
    /// every consumer of GQA reads ([`Geometry::kv_of`], [`Geometry::q_heads_of`]).
    pub geometry: Geometry,
}

impl ModelConfig {
    /// Reads the geometry of a Llama-family model from GGUF metadata.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let arch = gguf.meta_str("general.architecture")?.to_string();
        let key = |k: &str| format!("{arch}.{k}");
        let get = |k: &str| -> Result<usize> { Ok(gguf.meta_u64(&key(k))? as usize) };
        let n_heads = get("attention.head_count")?;
        let hidden = get("embedding_length")?;
        let n_kv_heads = gguf
            .meta_u64(&key("attention.head_count_kv"))
            .map(|v| v as usize)
            .unwrap_or(n_heads);
        let head_dim = match gguf.meta_u64(&key("attention.key_length")) {
            Ok(v) => v as usize,
            Err(_) if n_heads > 0 => hidden / n_heads,
            Err(e) => return Err(e),
        };
        let vocab = gguf
            .tensor_info("token_embd.weight")
            .map(|t| t.shape()[0])
            .ok_or_else(|| Error::Model("no tensor token_embd.weight".into()))?;
        let n_layers = get("block_count")?;
        let geometry = Geometry::new(n_layers, n_heads, n_kv_heads, head_dim)
            .map_err(|e| Error::Model(format!("{arch} attention geometry: {e}")))?;
        let config = Self {
            name: gguf
                .meta_str("general.name")
                .map(str::to_string)
                .unwrap_or_else(|_| arch.clone()),
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            hidden,
            ffn: get("feed_forward_length")?,
            vocab,
            rope_theta: gguf
                .meta_f64(&key("rope.freq_base"))
                .unwrap_or(DEFAULT_ROPE_BASE),
            rms_eps: gguf.meta_f64(&key("attention.layer_norm_rms_epsilon"))?,
            context_len: get("context_length")?,
            architecture: arch,
            geometry,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the geometry is one this runtime can execute.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Model(m));
        if self.architecture != "llama" {
            return bad(format!(
                "general.architecture = {:?}: kvplan runs Llama-family models only",
                self.architecture
            ));
        }
        if self.n_layers == 0 || self.n_heads == 0 || self.n_kv_heads == 0 || self.head_dim == 0 {
            return bad(format!("degenerate geometry: {self:?}"));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return bad(format!(
                "head_count {} is not a multiple of head_count_kv {}",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_dim.is_multiple_of(2) {
            return bad(format!("head_dim {} must be even for RoPE", self.head_dim));
        }
        Ok(())
    }

    /// The RoPE frequencies of every layer (one base for all layers of a Llama model).
    pub fn rope(&self) -> RopeSet {
        RopeSet::uniform(self.head_dim, self.rope_theta, self.n_layers)
    }

    /// Query heads sharing one KV head.
    pub fn group(&self) -> usize {
        self.geometry.group_size()
    }

    /// The KV head that query head `h` reads, from the geometry's query→KV map.
    pub fn kv_head_of(&self, h: usize) -> usize {
        self.geometry.kv_of(h)
    }
}
