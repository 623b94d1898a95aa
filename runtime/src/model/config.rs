//! Model geometry, read from GGUF metadata (`<arch>.*` keys) — no model's numbers are written
//! here; what an architecture fixes without a key is a named constant of [`super::arch`].
//!
//! Metadata the runtime would run wrongly is refused here with an error naming the key: a RoPE
//! scaling type it does not compute (or any on the Gemma models), a rotary dimension other than
//! the head's, keys and values of different lengths, a sliding window on an architecture without
//! windows, logit soft-capping outside Gemma 2.
//!
//! RoPE scaling is read as llama.cpp's `load_hparams` reads it (`rope.scaling.type`, `.factor`,
//! `.original_context_length`, `.yarn_beta_fast`, `.yarn_beta_slow`, `.yarn_attn_factor`; the
//! older `rope.scale_linear`; the `rope_freqs.weight` tensor of Llama 3.x files) into
//! [`RopeScaling`], which [`super::rope::Frequencies::scaled`] turns into frequencies.

use kvplan_planner::Geometry;

use super::arch::{gemma2, gemma3, Architecture, WindowRule};
use super::rope::{Frequencies, RopeScaling, RopeSet};
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
    /// How the RoPE frequencies are scaled (every layer that rotates; not Gemma's).
    #[serde(default)]
    pub rope_scaling: RopeScaling,
    /// Whether each layer applies RoPE (false: SmolLM3's NoPE layers); empty: every layer.
    #[serde(default)]
    pub rope_layers: Vec<bool>,
    /// `c` of `tanh(s / c)·c` on the scaled attention scores (Gemma 2), `None`: no cap.
    #[serde(default)]
    pub attn_softcap: Option<f64>,
    /// `c` of `tanh(z / c)·c` on the final logits (Gemma 2), `None`: no cap.
    #[serde(default)]
    pub final_softcap: Option<f64>,
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
        let rope_scaling = rope_scaling(gguf, family, head_dim)?;
        let rope_layers = rope_layers(gguf, family, n_layers)?;
        let (attn_softcap, final_softcap) = soft_caps(gguf, family)?;
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
            rope_scaling,
            rope_layers,
            attn_softcap,
            final_softcap,
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

    /// The RoPE frequencies of every layer (Gemma 3: its own base on the sliding-window layers;
    /// scaled as the file says; the identity on a layer without RoPE), for sequences within the
    /// original context ([`Self::rope_for`]).
    pub fn rope(&self) -> RopeSet {
        self.rope_for(0)
    }

    /// [`Self::rope`] for a forward call, or a sequence, ending at position `end` (exclusive):
    /// LongRoPE's long factors past its original context (transformers chooses them per call by
    /// the call's last position; a press takes the set of its prompt's length).
    pub fn rope_for(&self, end: usize) -> RopeSet {
        let d = self.geometry.head_dim;
        RopeSet::new(
            self.rope_bases
                .iter()
                .enumerate()
                .map(|(l, &base)| match self.rope_layers.get(l) {
                    Some(false) => Frequencies::none(d, base),
                    _ => Frequencies::scaled_at(d, base, &self.rope_scaling, end),
                })
                .collect(),
        )
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
    if !arch.soft_caps() {
        for cap in ["attn_logit_softcapping", "final_logit_softcapping"] {
            let k = key(cap);
            if gguf.meta(&k).is_ok() {
                return refuse(
                    k,
                    format!(
                        "logit soft-capping on architecture {} (kvplan caps gemma2's only)",
                        arch.name()
                    ),
                );
            }
        }
    }
    Ok(())
}

/// The file's RoPE scaling, or an error naming the key of one kvplan does not compute.
fn rope_scaling(gguf: &GgufFile, arch: Architecture, head_dim: usize) -> Result<RopeScaling> {
    let keys = RopeKeys { gguf, arch };
    let tk = keys.key("rope.scaling.type");
    let kind = keys.kind()?;
    let linear_legacy = keys.linear_legacy()?;
    if arch.global_tensors().contains(&"rope_factors_long.weight") {
        if let Some(long_rope) = long_rope(gguf, arch, head_dim)? {
            return Ok(long_rope);
        }
    }
    let freqs = gguf.tensor_info("rope_freqs.weight").is_some();
    let scaled = kind != "none" || linear_legacy.is_some() || freqs;
    if scaled && !arch.rope_scaling() {
        let what = if freqs {
            "tensor rope_freqs.weight".to_string()
        } else {
            tk
        };
        return Err(Error::Metadata(format!(
            "{what}: RoPE scaling on architecture {}, whose local and global layers kvplan \
             rotates unscaled",
            arch.name()
        )));
    }
    let scaling = keys.scaling(&kind, linear_legacy)?;
    if !freqs {
        return Ok(scaling);
    }
    if scaling != RopeScaling::None {
        return Err(Error::Metadata(format!(
            "tensor rope_freqs.weight with {tk} = {kind:?}: kvplan applies one scaling, not both"
        )));
    }
    Ok(RopeScaling::FreqFactors {
        factors: factor_tensor(gguf, "rope_freqs.weight", head_dim)?,
    })
}

/// The RoPE-scaling keys of one architecture's metadata in a file.
struct RopeKeys<'a> {
    gguf: &'a GgufFile,
    arch: Architecture,
}

impl RopeKeys<'_> {
    /// The full key of `k` (`<arch>.k`).
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch.name())
    }

    /// Key `k` as a float, `default` when the file lacks it.
    fn f64_or(&self, k: &str, default: f64) -> Result<f64> {
        match self.gguf.meta(&self.key(k)) {
            Ok(_) => self.gguf.meta_f64(&self.key(k)),
            Err(_) => Ok(default),
        }
    }

    /// Key `k` as a factor: positive and finite.
    fn factor(&self, k: &str) -> Result<f64> {
        let f = self.gguf.meta_f64(&self.key(k))?;
        if !(f.is_finite() && f > 0.0) {
            return Err(Error::Metadata(format!(
                "{}: expected a positive factor, found {f}",
                self.key(k)
            )));
        }
        Ok(f)
    }

    /// `rope.scaling.type`; `none` when the file lacks it.
    fn kind(&self) -> Result<String> {
        let tk = self.key("rope.scaling.type");
        match self.gguf.meta(&tk) {
            Ok(v) => match v.as_str() {
                Some(s) => Ok(s.to_string()),
                None => Err(Error::Metadata(format!(
                    "{tk}: expected a string, found {v:?}"
                ))),
            },
            Err(_) => Ok("none".to_string()),
        }
    }

    /// The older converters' `rope.scale_linear` factor (`None` when absent or 1).
    fn linear_legacy(&self) -> Result<Option<f64>> {
        match self.gguf.meta(&self.key("rope.scale_linear")) {
            Ok(v) if v.as_f64() == Some(1.0) => Ok(None),
            Ok(_) => Ok(Some(self.factor("rope.scale_linear")?)),
            Err(_) => Ok(None),
        }
    }

    /// The scaling of type `kind` with its keys' values (under `none`, the legacy linear
    /// factor when there is one).
    fn scaling(&self, kind: &str, linear_legacy: Option<f64>) -> Result<RopeScaling> {
        Ok(match kind {
            "none" => match linear_legacy {
                Some(factor) => RopeScaling::Linear { factor },
                None => RopeScaling::None,
            },
            "linear" => RopeScaling::Linear {
                factor: self.factor("rope.scaling.factor")?,
            },
            "yarn" => RopeScaling::Yarn {
                factor: self.factor("rope.scaling.factor")?,
                original_context: original_context(self.gguf, self.arch)?,
                beta_fast: self.f64_or("rope.scaling.yarn_beta_fast", 32.0)?,
                beta_slow: self.f64_or("rope.scaling.yarn_beta_slow", 1.0)?,
                attn_factor: self.f64_or("rope.scaling.yarn_attn_factor", 1.0)?,
            },
            other => {
                return Err(Error::Metadata(format!(
                    "{}: RoPE scaling {other:?} is not supported (none, linear, yarn)",
                    self.key("rope.scaling.type")
                )))
            }
        })
    }
}

/// Tensor `name` of per-pair RoPE factors: `[head_dim / 2]`, each positive and finite.
fn factor_tensor(gguf: &GgufFile, name: &str, head_dim: usize) -> Result<Vec<f32>> {
    let info = gguf
        .tensor_info(name)
        .ok_or_else(|| Error::Model(format!("missing tensor {name}")))?;
    if info.shape() != [head_dim / 2] {
        return Err(Error::Model(format!(
            "tensor {name}: expected shape [{}], found {:?}",
            head_dim / 2,
            info.shape()
        )));
    }
    let factors = gguf.tensor_f32(name)?.0;
    match factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
        Some(bad) => Err(Error::Model(format!(
            "tensor {name}: expected positive factors, found {bad}"
        ))),
        None => Ok(factors),
    }
}

/// `rope.scaling.original_context_length` (YaRN, LongRoPE), at least one token.
fn original_context(gguf: &GgufFile, arch: Architecture) -> Result<usize> {
    let k = format!("{}.rope.scaling.original_context_length", arch.name());
    match gguf.meta_u64(&k)? as usize {
        0 => Err(Error::Metadata(format!(
            "{k}: expected the original context in tokens, found 0"
        ))),
        n => Ok(n),
    }
}

/// Phi-3's LongRoPE from `rope_factors_short.weight` / `rope_factors_long.weight` (both or
/// neither), `rope.scaling.original_context_length` and `rope.scaling.attn_factor` (else
/// transformers' `√(1 + ln(context / original) / ln(original))`); `None` without the tensors.
fn long_rope(gguf: &GgufFile, arch: Architecture, head_dim: usize) -> Result<Option<RopeScaling>> {
    let key = |k: &str| format!("{}.{k}", arch.name());
    let names = ["rope_factors_short.weight", "rope_factors_long.weight"];
    let present: Vec<bool> = names
        .iter()
        .map(|n| gguf.tensor_info(n).is_some())
        .collect();
    match present[..] {
        [false, false] => return Ok(None),
        [true, true] => {}
        _ => {
            let missing = names[present.iter().position(|p| !p).unwrap_or(0)];
            return Err(Error::Model(format!(
                "tensor {missing} is missing: LongRoPE needs both rope_factors_short.weight and \
                 rope_factors_long.weight"
            )));
        }
    }
    let original = original_context(gguf, arch)?;
    let context = gguf.meta_u64(&key("context_length"))? as f64;
    let attn_factor = match gguf.meta(&key("rope.scaling.attn_factor")) {
        Ok(_) => gguf.meta_f64(&key("rope.scaling.attn_factor"))?,
        Err(_) if context > original as f64 && original > 1 => {
            (1.0 + (context / original as f64).ln() / (original as f64).ln()).sqrt()
        }
        Err(_) => 1.0,
    };
    Ok(Some(RopeScaling::LongRope {
        short: factor_tensor(gguf, names[0], head_dim)?,
        long: factor_tensor(gguf, names[1], head_dim)?,
        original_context: original,
        attn_factor,
    }))
}

/// Whether each layer applies RoPE: all, but every `no_rope_layer_step`-th on SmolLM3.
fn rope_layers(gguf: &GgufFile, arch: Architecture, n_layers: usize) -> Result<Vec<bool>> {
    let Some(default) = arch.no_rope_every() else {
        return Ok(vec![true; n_layers]);
    };
    let k = format!("{}.no_rope_layer_step", arch.name());
    let step = match gguf.meta(&k) {
        Ok(_) => gguf.meta_u64(&k)? as usize,
        Err(_) => default,
    };
    if step == 0 {
        return Err(Error::Metadata(format!(
            "{k}: expected a step ≥ 1, found 0"
        )));
    }
    Ok((0..n_layers).map(|l| (l + 1) % step != 0).collect())
}

/// Gemma 2's attention and final-logit soft-caps (`None` where the file has no such key).
fn soft_caps(gguf: &GgufFile, arch: Architecture) -> Result<(Option<f64>, Option<f64>)> {
    if !arch.soft_caps() {
        return Ok((None, None));
    }
    let cap = |name: &str| -> Result<Option<f64>> {
        let k = format!("{}.{name}", arch.name());
        if gguf.meta(&k).is_err() {
            return Ok(None);
        }
        let c = gguf.meta_f64(&k)?;
        match c {
            c if c.is_finite() && c > 0.0 => Ok(Some(c)),
            0.0 => Ok(None),
            c => Err(Error::Metadata(format!(
                "{k}: expected a positive cap, found {c}"
            ))),
        }
    };
    Ok((
        cap("attn_logit_softcapping")?,
        cap("final_logit_softcapping")?,
    ))
}

/// Each layer's window: none without windows; every layer where the file sets one (Mistral,
/// Phi-3); Gemma: `attention.sliding_window` on every layer but each period-th (or as
/// `attention.sliding_window_pattern` says).
fn layer_windows(
    gguf: &GgufFile,
    arch: Architecture,
    n_layers: usize,
) -> Result<Vec<Option<usize>>> {
    let key = |k: &str| format!("{}.{k}", arch.name());
    let window = || -> Result<usize> {
        let window = gguf.meta_u64(&key("attention.sliding_window"))? as usize;
        if window == 0 {
            return Err(Error::Metadata(format!(
                "{}: a window of 0 positions",
                key("attention.sliding_window")
            )));
        }
        Ok(window)
    };
    match arch.windows() {
        WindowRule::Never => Ok(vec![None; n_layers]),
        WindowRule::EveryLayerWhenSet => match gguf.meta(&key("attention.sliding_window")) {
            // llama.cpp's converter writes 0 for "no window" on some families.
            Ok(v) if v.as_u64() == Some(0) => Ok(vec![None; n_layers]),
            Ok(_) => Ok(vec![Some(window()?); n_layers]),
            Err(_) => Ok(vec![None; n_layers]),
        },
        WindowRule::Periodic(period) => {
            let window = window()?;
            let pattern = key("attention.sliding_window_pattern");
            let sliding = sliding_layers(gguf, &pattern, n_layers, period)?;
            Ok(sliding.into_iter().map(|s| s.then_some(window)).collect())
        }
    }
}

/// Which layers are windowed: from `pattern_key` (a period `p`: layer `l` global iff
/// `(l + 1) % p == 0`; or one bool per layer, true = windowed), else every `period`-th layer
/// global.
fn sliding_layers(
    gguf: &GgufFile,
    pattern_key: &str,
    n_layers: usize,
    period: usize,
) -> Result<Vec<bool>> {
    let by_period = |p: usize| (0..n_layers).map(|l| (l + 1) % p != 0).collect();
    let Ok(v) = gguf.meta(pattern_key) else {
        return Ok(by_period(period));
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

/// `1/√head_dim`, except Gemma 2 and 3 27B (see [`gemma2::LAYERS_27B`], [`gemma3::LAYERS_27B`]).
fn query_scale(
    arch: Architecture,
    n_layers: usize,
    hidden: usize,
    n_heads: usize,
    head_dim: usize,
) -> f64 {
    let scalar = match arch {
        Architecture::Gemma3 if n_layers == gemma3::LAYERS_27B && n_heads > 0 => hidden / n_heads,
        Architecture::Gemma2 if n_layers == gemma2::LAYERS_27B && n_heads > 0 => hidden / n_heads,
        _ => head_dim,
    };
    1.0 / (scalar as f64).sqrt()
}
