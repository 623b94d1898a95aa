//! One plan section per method: its parameters and per-layer / per-head numbers. Together with
//! the rules in `alloc/` they give budgets for any context length and target (see `budgets.rs`).

use crate::alloc::pod;
use crate::geometry::Geometry;
use crate::profile::{LayerFunnel, LayerRedundancy};
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// Observation window α of the SnapKV-style methods (PyramidKV's experiments: α = 8).
pub const DEFAULT_WINDOW: usize = 8;
/// SnapKV pooling kernel (KVCache-Factory default).
pub const DEFAULT_KERNEL: usize = 7;
/// PyramidKV β (§5: β = 20).
pub const DEFAULT_PYRAMID_BETA: f64 = 20.0;
/// HeadKV β (the authors' scripts: 1.01).
pub const DEFAULT_HEADKV_BETA: f64 = 1.01;
/// SpindleKV β (Table 3).
pub const DEFAULT_SPINDLE_BETA: f64 = 0.05;
/// SpindleKV θ_K and θ_V (Table 3).
pub const DEFAULT_THETA_K: f64 = 0.98;
/// See [`DEFAULT_THETA_K`].
pub const DEFAULT_THETA_V: f64 = 0.95;
/// PoD δ, n_s and τ (§3).
pub const DEFAULT_POD_DELTA: f64 = 0.5;
/// See [`DEFAULT_POD_DELTA`].
pub const DEFAULT_POD_SINKS: usize = 16;
/// See [`DEFAULT_POD_DELTA`].
pub const DEFAULT_POD_TAU: f64 = 0.7;
/// Attention sinks of StreamingLLM and TreeKV.
pub const DEFAULT_SINKS: usize = 4;

/// How SnapKV-style selection pools attention scores along the sequence.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    Avgpool,
    Maxpool,
}

/// Which HeadKV score set a section uses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ScoreSource {
    /// Retrieval heads (HeadKV-R, eq. 1).
    Retrieval,
    /// Retrieval-reasoning heads (HeadKV-R2, eq. 2).
    RetrievalReasoning,
}

/// All sections; absent ones are not serialised.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Sections {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapkv: Option<SnapKvSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2o: Option<H2oSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<StreamingSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pyramid: Option<PyramidSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headkv: Option<HeadKvSection>,
    #[serde(default, rename = "headkv-r", skip_serializing_if = "Option::is_none")]
    pub headkv_r: Option<HeadKvSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spindle: Option<SpindleSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub treekv: Option<TreeKvSection>,
}

/// SnapKV: uniform budgets, window α inside, pooled attention selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SnapKvSection {
    pub window: usize,
    pub kernel_size: usize,
    pub pooling: Pooling,
}

/// H2O: uniform budgets split into heavy hitters and a recent window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct H2oSection {
    pub heavy_fraction: f64,
}

/// StreamingLLM: uniform budgets of sinks plus recent tokens.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StreamingSection {
    pub sinks: usize,
}

/// PyramidKV: arithmetic layer schedule (`alloc::pyramid`), SnapKV selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PyramidSection {
    pub window: usize,
    pub beta: f64,
    pub kernel_size: usize,
    pub pooling: Pooling,
    /// The profile's funnelling per layer (what motivates the schedule; not used by the rule).
    pub funnel: Vec<LayerFunnel>,
}

/// HeadKV (`headkv`: retrieval-reasoning scores; `headkv-r`: retrieval scores).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeadKvSection {
    pub source: ScoreSource,
    pub window: usize,
    pub beta: f64,
    pub temperature: f64,
    pub kernel_size: usize,
    pub pooling: Pooling,
    pub trials_kept: usize,
    pub trials_total: usize,
    /// Raw scores per query head `[layer][q_head]`; `alloc::headkv` maps them onto KV heads.
    pub scores: Vec<Vec<f64>>,
}

/// SpindleKV: eviction schedule (`alloc::spindle`) and codebook thresholds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpindleSection {
    pub window: usize,
    pub beta: f64,
    /// Always (1 + β)/2; stored so the file reads like Table 3.
    pub alpha: f64,
    pub theta_k: f64,
    pub theta_v: f64,
    /// kvplan option: the codebook only in layers below `split` (null: every layer, the paper).
    pub split: Option<usize>,
    /// The profile's KV redundancy per layer.
    pub redundancy: Vec<LayerRedundancy>,
}

/// PoD: head-wise layer blocks (`alloc::pod`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PodSection {
    /// Similarity threshold used for the blocks.
    pub delta: f64,
    /// The saving δ was chosen for, if it was (null: δ given).
    pub target_saving: Option<f64>,
    /// Saving of these blocks: fraction of (layer, KV head) slots sharing distant keys.
    pub saving: f64,
    /// n_s, initial tokens in the proximal window (n_r is the budget minus n_s).
    pub sinks: usize,
    /// Gate threshold τ for layers that are not the lowest of their block.
    pub tau: f64,
    /// `[q_head][block] = [first_layer, last_layer]`, bottom-up.
    pub blocks: Vec<Vec<[usize; 2]>>,
}

/// TreeKV: cache split and prefill block size (`alloc::treekv`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TreeKvSection {
    pub sinks: usize,
    pub selected_fraction: f64,
    pub block_size: usize,
    /// The profile's wavelet magnitudes `[layer][level]`.
    pub wavelet: Vec<Vec<f64>>,
}

impl Sections {
    /// Validates every present section against the geometry.
    pub fn validate(&self, g: &Geometry) -> Result<()> {
        let p = "sections";
        if let Some(s) = &self.snapkv {
            validate::at_least(&format!("{p}.snapkv.kernel_size"), s.kernel_size, 1)?;
        }
        if let Some(s) = &self.h2o {
            validate::in_range(
                &format!("{p}.h2o.heavy_fraction"),
                s.heavy_fraction,
                0.0,
                1.0,
            )?;
        }
        if let Some(s) = &self.pyramid {
            let q = format!("{p}.pyramid");
            validate::in_range(&format!("{q}.beta"), s.beta, 1.0, f64::MAX)?;
            validate::at_least(&format!("{q}.kernel_size"), s.kernel_size, 1)?;
            validate::len(
                &format!("{q}.funnel"),
                s.funnel.len(),
                g.layers,
                "one per layer",
            )?;
            for (l, f) in s.funnel.iter().enumerate() {
                validate::non_negative(&format!("{q}.funnel[{l}].entropy"), f.entropy)?;
                validate::in_range(
                    &format!("{q}.funnel[{l}].top_k_mass"),
                    f.top_k_mass,
                    0.0,
                    1.0,
                )?;
            }
        }
        for (name, s) in [("headkv", &self.headkv), ("headkv-r", &self.headkv_r)] {
            if let Some(s) = s {
                validate_headkv(&format!("{p}.{name}"), s, g)?;
            }
        }
        if let Some(s) = &self.spindle {
            validate_spindle(&format!("{p}.spindle"), s, g)?;
        }
        if let Some(s) = &self.pod {
            validate_pod(&format!("{p}.pod"), s, g)?;
        }
        if let Some(s) = &self.treekv {
            let q = format!("{p}.treekv");
            validate::in_range(
                &format!("{q}.selected_fraction"),
                s.selected_fraction,
                0.0,
                1.0,
            )?;
            validate::at_least(&format!("{q}.block_size"), s.block_size, 1)?;
            let levels = s.wavelet.first().map_or(0, Vec::len);
            validate::matrix(
                &format!("{q}.wavelet"),
                &s.wavelet,
                (g.layers, "one per layer"),
                (levels, "one per level, as in layer 0"),
                0.0,
                f64::MAX,
            )?;
        }
        Ok(())
    }
}

fn validate_headkv(p: &str, s: &HeadKvSection, g: &Geometry) -> Result<()> {
    validate::in_range(&format!("{p}.beta"), s.beta, 1.0, f64::MAX)?;
    validate::above(&format!("{p}.temperature"), s.temperature, 0.0)?;
    validate::at_least(&format!("{p}.kernel_size"), s.kernel_size, 1)?;
    if s.trials_kept > s.trials_total {
        return Err(Error::invalid(
            format!("{p}.trials_kept"),
            format!("at most trials_total = {}", s.trials_total),
            s.trials_kept,
        ));
    }
    validate::matrix(
        &format!("{p}.scores"),
        &s.scores,
        (g.layers, "one per layer"),
        (g.q_heads, "one per query head"),
        0.0,
        1.0,
    )
}

fn validate_spindle(p: &str, s: &SpindleSection, g: &Geometry) -> Result<()> {
    validate::in_range(&format!("{p}.beta"), s.beta, 0.0, 1.0)?;
    let alpha = (1.0 + s.beta) / 2.0;
    if !s.alpha.is_finite() || (s.alpha - alpha).abs() > 1e-9 {
        return Err(Error::invalid(
            format!("{p}.alpha"),
            format!("(1 + β)/2 = {alpha}"),
            s.alpha,
        ));
    }
    validate::in_range(&format!("{p}.theta_k"), s.theta_k, 0.0, 1.0)?;
    validate::in_range(&format!("{p}.theta_v"), s.theta_v, 0.0, 1.0)?;
    if let Some(k) = s.split {
        if k == 0 || k >= g.layers {
            return Err(Error::invalid(
                format!("{p}.split"),
                format!("a layer in 1..{} or null", g.layers),
                k,
            ));
        }
    }
    validate::len(
        &format!("{p}.redundancy"),
        s.redundancy.len(),
        g.layers,
        "one per layer",
    )?;
    for (l, r) in s.redundancy.iter().enumerate() {
        let q = format!("{p}.redundancy[{l}]");
        validate::in_range(&format!("{q}.k_cos_fraction"), r.k_cos_fraction, 0.0, 1.0)?;
        validate::in_range(&format!("{q}.v_cos_fraction"), r.v_cos_fraction, 0.0, 1.0)?;
        validate::in_range(
            &format!("{q}.attention_sparsity"),
            r.attention_sparsity,
            0.0,
            1.0,
        )?;
    }
    Ok(())
}

fn validate_pod(p: &str, s: &PodSection, g: &Geometry) -> Result<()> {
    validate::in_range(&format!("{p}.delta"), s.delta, 0.0, 1.0)?;
    validate::in_range(&format!("{p}.tau"), s.tau, 0.0, 1.0)?;
    if let Some(t) = s.target_saving {
        validate::in_range(&format!("{p}.target_saving"), t, 0.0, 1.0)?;
    }
    validate::len(
        &format!("{p}.blocks"),
        s.blocks.len(),
        g.q_heads,
        "one per query head",
    )?;
    for (h, blocks) in s.blocks.iter().enumerate() {
        let mut next = 0;
        for (i, b) in blocks.iter().enumerate() {
            let q = format!("{p}.blocks[{h}][{i}]");
            if b[0] != next || b[1] < b[0] || b[1] >= g.layers {
                return Err(Error::invalid(
                    q,
                    format!("a block [{next}, l] with {next} <= l < {}", g.layers),
                    format!("[{}, {}]", b[0], b[1]),
                ));
            }
            next = b[1] + 1;
        }
        if next != g.layers {
            return Err(Error::invalid(
                format!("{p}.blocks[{h}]"),
                format!("blocks covering layers 0..{}", g.layers),
                format!("blocks ending at layer {}", next as i64 - 1),
            ));
        }
    }
    let saving = pod::saving(&s.blocks, g);
    if !s.saving.is_finite() || (s.saving - saving).abs() > 1e-9 {
        return Err(Error::invalid(
            format!("{p}.saving"),
            format!("{saving} (from the blocks)"),
            s.saving,
        ));
    }
    Ok(())
}
