//! HeadKV (`docs/papers/headkv.md` §3, App. E–F): per-head budgets from head importance scores — a
//! shared pool handed out in proportion to each KV head's score (eq. 4, β; `alloc::headkv`), SnapKV
//! selection inside each head. One section type serves both table entries: `headkv` uses the
//! retrieval-reasoning scores (HeadKV-R2, eq. 2), `headkv-r` the retrieval scores (eq. 1).
//! Only the global layers' heads share the pool (windowed layers hold their window); with one KV
//! head per layer (Gemma 3) the per-head budgets are per-layer budgets.

use super::snapkv::{DEFAULT_KERNEL, DEFAULT_POOLING};
use super::{Method, MethodSection, Pooling};
use crate::alloc::headkv;
use crate::budgets::Budgets;
use crate::build::PlanOptions;
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::{validate, Error, Result};
use serde::{Deserialize, Serialize};

/// HeadKV β (the authors' scripts: 1.01).
pub const DEFAULT_HEADKV_BETA: f64 = 1.01;
/// Softmax temperature of the scores mapped onto KV heads.
pub const DEFAULT_HEADKV_TEMPERATURE: f64 = 1.0;

/// Options of the HeadKV sections.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadKvOptions {
    /// β of eq. 4 for `headkv` (retrieval-reasoning scores).
    pub beta: f64,
    /// β of eq. 4 for `headkv-r` (retrieval scores); `None`: [`HeadKvOptions::beta`]. The two
    /// score sets differ in how many heads score zero, so the best β can differ (HeadKV App. F
    /// sweeps β per method; `kvplan eval niah --methods headkv-r@beta2,…` measures it).
    pub beta_r: Option<f64>,
    /// Temperature of the scores mapped onto KV heads.
    pub temperature: f64,
}

impl Default for HeadKvOptions {
    fn default() -> Self {
        HeadKvOptions {
            beta: DEFAULT_HEADKV_BETA,
            beta_r: None,
            temperature: DEFAULT_HEADKV_TEMPERATURE,
        }
    }
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

impl MethodSection for HeadKvSection {
    fn build(method: Method, p: &Profile, opts: &PlanOptions) -> Result<Self> {
        let (source, scores) = if method == Method::HeadKvR {
            (ScoreSource::Retrieval, &p.retrieval)
        } else {
            (ScoreSource::RetrievalReasoning, &p.retrieval_reasoning)
        };
        Ok(HeadKvSection {
            source,
            window: opts.window,
            beta: match source {
                ScoreSource::Retrieval => opts.headkv.beta_r.unwrap_or(opts.headkv.beta),
                ScoreSource::RetrievalReasoning => opts.headkv.beta,
            },
            temperature: opts.headkv.temperature,
            kernel_size: DEFAULT_KERNEL,
            pooling: DEFAULT_POOLING,
            trials_kept: scores.trials_kept,
            trials_total: scores.trials_total,
            scores: scores.scores.clone(),
        })
    }

    fn validate(&self, p: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{p}.window"), self.window, 1)?;
        validate::in_range(&format!("{p}.beta"), self.beta, 1.0, f64::MAX)?;
        validate::above(&format!("{p}.temperature"), self.temperature, 0.0)?;
        validate::at_least(&format!("{p}.kernel_size"), self.kernel_size, 1)?;
        if self.trials_kept > self.trials_total {
            return Err(Error::invalid(
                format!("{p}.trials_kept"),
                format!("at most trials_total = {}", self.trials_total),
                self.trials_kept,
            ));
        }
        validate::matrix(
            &format!("{p}.scores"),
            &self.scores,
            (g.layers, "one per layer"),
            (g.q_heads, "one per query head"),
            0.0,
            1.0,
        )
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        // Only the global layers' heads share the pool; windowed layers hold their window.
        let global: Vec<Vec<f64>> = g
            .global_layers()
            .into_iter()
            .map(|l| self.scores[l].clone())
            .collect();
        let kv = headkv::kv_head_scores(&global, g, self.temperature);
        out.window = self.window.min(b);
        let grid = headkv::budgets(out.method, &kv, n, b, self.window, self.beta)?;
        out.per_layer_per_kv_head = g.scatter_global(grid, n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("β {}, α {}", self.beta, self.window)
    }
}
