//! Model geometry, read from GGUF metadata (`<arch>.*` keys) — no model's numbers are written
//! here; what an architecture fixes without a key is a named constant of [`super::arch`].
//!
//! Metadata the runtime would run wrongly is refused here with an error naming the key: RoPE
//! scaling, a rotary dimension other than the head's, keys and values of different lengths, a
//! sliding window on an architecture without windows, logit soft-capping.

use kvplan_planner::Geometry;

use super::arch::{gemma3, Architecture};
use super::rope::RopeSet;
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, MetaValue};

/// RoPE base when a file has no `<arch>.rope.freq_base` (llama.cpp's and transformers' default).
pub const DEFAULT_ROPE_BASE: f64 = 10_000.0;

/// Most layers a model may declare (`<arch>.block_count`), checked before per-layer tables are
/// allocated; far above any model kvplan can run.
pub const MAX_LAYERS: usize = 4096;

/// Geometry and hyper-parameters of a decoder of a supported architecture.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelConfig {
    /// `general.architecture`, e.g. `llama`.
    pub architecture: String,
    /// The same, as the runtime's table of architectures.
    pub arch: Architecture,
    /// `general.name`, or the architecture when absent.
    pub name: String,
    /// Hidden size (`embedding_length`).
    pub hidden: usize,
    /// Inner size of the SwiGLU feed-forward.
    pub ffn: usize,
    /// Vocabulary size (rows of the token embedding).
    pub vocab: usize,
    /// RoPE base θ of the file (`<arch>.rope.freq_base`); of the global layers when some
    /// layers have their own ([`Self::rope_bases`]).
    pub rope_theta: f64,
    /// RoPE base of each layer.
    pub rope_bases: Vec<f64>,
    /// Sliding window of each layer (`None`: the layer attends to every earlier position). A
    /// windowed layer's query at position `p` sees the keys at positions `k`, `p − window < k ≤ p`.
    pub layer_windows: Vec<Option<usize>>,
    /// Factor on `q·k` (folded into the queries): `1/√head_dim` unless the architecture says.
    pub query_scale: f64,
    /// Factor on the token embeddings (1, or √hidden for Gemma).
    pub embed_scale: f64,
    /// RMSNorm ε.
    pub rms_eps: f64,
    /// Training context length.
    pub context_len: usize,
    /// The attention geometry, as plans record it: layers, query heads, KV heads (query heads
    /// are a multiple of them), head_dim, the query→KV head map every consumer of GQA reads
    /// ([`Geometry::kv_of`], [`Geometry::q_heads_of`]) and each layer's window (as above).
    pub geometry: Geometry,
}

impl ModelConfig {
    /// Reads the geometry of a supported architecture from GGUF metadata.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        let arch = gguf.meta_str("general.architecture")?.to_string();
        let family = Architecture::from_name(&arch)?;
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
        if n_layers > MAX_LAYERS {
            return Err(Error::Metadata(format!(
                "{}: {n_layers} layers exceeds the limit of {MAX_LAYERS}",
                key("block_count")
            )));
        }
        let rope_theta = gguf
            .meta_f64(&key("rope.freq_base"))
            .unwrap_or(DEFAULT_ROPE_BASE);
        check_refusals(gguf, family, head_dim)?;
        let layer_windows = layer_windows(gguf, family, n_layers)?;
        let geometry = Geometry::new(n_layers, n_heads, n_kv_heads, head_dim)
            .and_then(|g| g.with_windows(layer_windows.clone()))
            .map_err(|e| Error::Model(format!("{arch} attention geometry: {e}")))?;
        let rope_bases = rope_bases(gguf, family, rope_theta, &layer_windows)?;
        let embed_scale = match family.scales_embeddings() {
            true => (hidden as f64).sqrt(),
            false => 1.0,
        };
        let config = Self {
            arch: family,
            query_scale: query_scale(family, n_layers, hidden, n_heads, head_dim),
            embed_scale,
            rope_bases,
            layer_windows,
            name: gguf
                .meta_str("general.name")
                .map(str::to_string)
                .unwrap_or_else(|_| arch.clone()),
            hidden,
            ffn: get("feed_forward_length")?,
            vocab,
            rope_theta,
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
        let g = &self.geometry;
        if g.layers == 0 || g.q_heads == 0 || g.kv_heads == 0 || g.head_dim == 0 {
            return bad(format!("degenerate geometry: {self:?}"));
        }
        if !g.q_heads.is_multiple_of(g.kv_heads) {
            return bad(format!(
                "head_count {} is not a multiple of head_count_kv {}",
                g.q_heads, g.kv_heads
            ));
        }
        if !g.head_dim.is_multiple_of(2) {
            return bad(format!("head_dim {} must be even for RoPE", g.head_dim));
        }
        Ok(())
    }

    /// The RoPE frequencies of every layer (Gemma 3: its own base on the sliding-window layers).
    pub fn rope(&self) -> RopeSet {
        RopeSet::per_layer(self.geometry.head_dim, &self.rope_bases)
    }

    /// The sliding window of `layer`, `None` for a layer that attends globally.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.layer_windows.get(layer).copied().flatten()
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

/// Refuses metadata whose effect the runtime does not implement, naming the key.
fn check_refusals(gguf: &GgufFile, arch: Architecture, head_dim: usize) -> Result<()> {
    let key = |k: &str| format!("{}.{k}", arch.name());
    let refuse = |k: String, why: String| Err(Error::Metadata(format!("{k}: {why}")));
    let k = key("rope.scaling.type");
    if let Ok(v) = gguf.meta(&k) {
        if v.as_str() != Some("none") {
            return refuse(
                k,
                format!("RoPE scaling {v:?} is not supported (only \"none\")"),
            );
        }
    }
    let k = key("rope.scale_linear");
    if let Ok(v) = gguf.meta(&k) {
        if v.as_f64() != Some(1.0) {
            return refuse(
                k,
                format!("linear RoPE scaling {v:?} is not supported (only 1)"),
            );
        }
    }
    let k = key("rope.dimension_count");
    if let Ok(v) = gguf.meta(&k) {
        if v.as_u64() != Some(head_dim as u64) {
            return refuse(k, format!(
                "RoPE over {v:?} dimensions, but heads have {head_dim}: partial rotation is not supported"
            ));
        }
    }
    let k = key("attention.value_length");
    if let Ok(v) = gguf.meta(&k) {
        if v.as_u64() != Some(head_dim as u64) {
            return refuse(
                k,
                format!(
                "values of {v:?} dimensions, but keys have {head_dim}: kvplan needs equal lengths"
            ),
            );
        }
    }
    let k = key("attention.sliding_window");
    if gguf.meta(&k).is_ok() && !arch.has_windows() {
        return refuse(
            k,
            format!(
                "a sliding window on architecture {}, which kvplan runs without windows",
                arch.name()
            ),
        );
    }
    for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
        let k = key(cap);
        if gguf.meta(&k).is_ok() {
            return refuse(k, "logit soft-capping is not supported".into());
        }
    }
    Ok(())
}

/// Each layer's window: none without windows; Gemma 3: `attention.sliding_window` on every
/// layer but each [`gemma3::GLOBAL_EVERY`]-th (or as `attention.sliding_window_pattern` says).
fn layer_windows(
    gguf: &GgufFile,
    arch: Architecture,
    n_layers: usize,
) -> Result<Vec<Option<usize>>> {
    if !arch.has_windows() {
        return Ok(vec![None; n_layers]);
    }
    let key = |k: &str| format!("{}.{k}", arch.name());
    let window = gguf.meta_u64(&key("attention.sliding_window"))? as usize;
    if window == 0 {
        return Err(Error::Metadata(format!(
            "{}: a window of 0 positions",
            key("attention.sliding_window")
        )));
    }
    let sliding = sliding_layers(gguf, &key("attention.sliding_window_pattern"), n_layers)?;
    Ok(sliding.into_iter().map(|s| s.then_some(window)).collect())
}

/// Which layers are windowed: from `pattern_key` (a period `p`: layer `l` global iff
/// `(l + 1) % p == 0`; or one bool per layer, true = windowed), else every
/// [`gemma3::GLOBAL_EVERY`]-th layer global.
fn sliding_layers(gguf: &GgufFile, pattern_key: &str, n_layers: usize) -> Result<Vec<bool>> {
    let by_period = |p: usize| (0..n_layers).map(|l| (l + 1) % p != 0).collect();
    let Ok(v) = gguf.meta(pattern_key) else {
        return Ok(by_period(gemma3::GLOBAL_EVERY));
    };
    let bad = || {
        Error::Metadata(format!(
            "{pattern_key}: expected a period ≥ 1 or {n_layers} bools, found {v:?}"
        ))
    };
    match v {
        MetaValue::Array(items) if items.len() == n_layers => items
            .iter()
            .map(|b| match b {
                MetaValue::Bool(b) => Ok(*b),
                _ => Err(bad()),
            })
            .collect(),
        _ => match v.as_u64() {
            Some(p) if p >= 1 => Ok(by_period(p as usize)),
            _ => Err(bad()),
        },
    }
}

/// Each layer's RoPE base: the file's everywhere, except windowed Gemma 3 layers, which rotate at
/// `rope.freq_base_swa` or [`gemma3::LOCAL_ROPE_BASE`].
fn rope_bases(
    gguf: &GgufFile,
    arch: Architecture,
    global: f64,
    windows: &[Option<usize>],
) -> Result<Vec<f64>> {
    let local = match arch {
        Architecture::Gemma3 => {
            let k = format!("{}.rope.freq_base_swa", arch.name());
            match gguf.meta(&k) {
                Ok(_) => gguf.meta_f64(&k)?,
                Err(_) => gemma3::LOCAL_ROPE_BASE,
            }
        }
        _ => global,
    };
    Ok(windows
        .iter()
        .map(|w| if w.is_some() { local } else { global })
        .collect())
}

/// `1/√head_dim`, except Gemma 3 27B (see [`gemma3::LAYERS_27B`]).
fn query_scale(
    arch: Architecture,
    n_layers: usize,
    hidden: usize,
    n_heads: usize,
    head_dim: usize,
) -> f64 {
    let scalar = match arch {
        Architecture::Gemma3 if n_layers == gemma3::LAYERS_27B && n_heads > 0 => hidden / n_heads,
        _ => head_dim,
    };
    1.0 / (scalar as f64).sqrt()
}
