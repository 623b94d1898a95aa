//! SpindleKV (`docs/papers/spindlekv.md` §3): eviction under a per-layer ratio schedule (eq. 5–7,
//! corrected; `alloc::spindle`) followed by codebook replacement of redundant kept entries (θ_K,
//! θ_V; Algorithm 1). The section keeps the profile's KV redundancy per layer (§3.2) for readers.
//! The schedule runs over the global layers and the codebook applies there only: windowed layers
//! hold their window untouched (`budgets`).

use super::{Method, MethodSection};
use crate::alloc::spindle;
use crate::budgets::Budgets;
use crate::build::{evidence, PlanOptions};
use crate::geometry::Geometry;
use crate::profile::{LayerRedundancy, Profile};
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// SpindleKV β (Table 3).
pub const DEFAULT_SPINDLE_BETA: f64 = 0.05;
/// SpindleKV θ_K and θ_V (Table 3).
pub const DEFAULT_THETA_K: f64 = 0.98;
/// See [`DEFAULT_THETA_K`].
pub const DEFAULT_THETA_V: f64 = 0.95;

/// Options of the SpindleKV section.
#[derive(Clone, Debug, PartialEq)]
pub struct SpindleOptions {
    /// β (α follows as (1 + β)/2).
    pub beta: f64,
    /// Shallow/deep split: codebook only below this layer (`None`: every layer, the paper).
    pub split: Option<usize>,
}

impl Default for SpindleOptions {
    fn default() -> Self {
        SpindleOptions {
            beta: DEFAULT_SPINDLE_BETA,
            split: None,
        }
    }
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

impl MethodSection for SpindleSection {
    fn build(_: Method, p: &Profile, opts: &PlanOptions) -> Result<Self> {
        let o = &opts.spindle;
        Ok(SpindleSection {
            window: opts.window,
            beta: o.beta,
            alpha: (1.0 + o.beta) / 2.0,
            theta_k: p.settings.theta_k,
            theta_v: p.settings.theta_v,
            split: o.split,
            redundancy: p
                .kv_redundancy
                .iter()
                .map(|r| LayerRedundancy {
                    k_cos_fraction: evidence(r.k_cos_fraction),
                    v_cos_fraction: evidence(r.v_cos_fraction),
                    attention_sparsity: evidence(r.attention_sparsity),
                })
                .collect(),
        })
    }

    fn validate(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{p}.window"), self.window, 1)?;
        validate::in_range(&format!("{p}.beta"), self.beta, 0.0, 1.0)?;
        let alpha = (1.0 + self.beta) / 2.0;
        if !self.alpha.is_finite() || (self.alpha - alpha).abs() > 1e-9 {
            return Err(Error::invalid(
                format!("{p}.alpha"),
                format!("(1 + β)/2 = {alpha}"),
                self.alpha,
            ));
        }
        validate::in_range(&format!("{p}.theta_k"), self.theta_k, 0.0, 1.0)?;
        validate::in_range(&format!("{p}.theta_v"), self.theta_v, 0.0, 1.0)?;
        if let Some(k) = self.split {
            if k == 0 || k >= g.layers {
                return Err(Error::invalid(
                    format!("{p}.split"),
                    format!("a layer in 1..{} or null", g.layers),
                    k,
                ));
            }
        }
        self.validate_redundancy(p, g)
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        out.window = self.window.min(b);
        // A prompt that fits the budget is kept whole: nothing to compress, so no codebook (its
        // centroids would only add bytes to a cache holding every entry).
        let fits = crate::alloc::prompt_fits(n, b);
        out.codebook_layers = spindle::codebook_layers(g.layers, self.split)
            .into_iter()
            .enumerate()
            .map(|(l, c)| c && !g.is_windowed(l) && !fits)
            .collect();
        let global = g.global_layers().len();
        let layers = spindle::layer_budgets(global, n, b, self.window, self.beta, self.alpha)?;
        out.per_layer_per_kv_head = g.scatter_global(Budgets::per_layer(layers, g.kv_heads), n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!(
            "β {}, α {}, θ_K {}, θ_V {}",
            self.beta, self.alpha, self.theta_k, self.theta_v
        )
    }
}

impl SpindleSection {
    fn validate_redundancy(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::len(
            &format!("{p}.redundancy"),
            self.redundancy.len(),
            g.layers,
            "one per layer",
        )?;
        for (l, r) in self.redundancy.iter().enumerate() {
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
}
