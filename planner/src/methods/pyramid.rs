//! PyramidKV (`docs/papers/pyramidkv.md` §3–4): SnapKV selection under an arithmetic per-layer
//! schedule — wide budgets in the lower layers, narrow in the upper ones, where attention funnels
//! onto few tokens (eq. 1, β; `alloc::pyramid`). The schedule runs over the global layers, bottom
//! to top; windowed layers hold their window (`budgets`). The section keeps the profile's
//! funnelling per layer, the measurement that motivates the schedule, for readers and figures.

use super::snapkv::{DEFAULT_KERNEL, DEFAULT_POOLING};
use super::{Method, MethodSection, Pooling};
use crate::alloc::pyramid;
use crate::budgets::Budgets;
use crate::build::{evidence, PlanOptions};
use crate::geometry::Geometry;
use crate::profile::{LayerFunnel, Profile};
use crate::{validate, Result};
use serde::{Deserialize, Serialize};

/// PyramidKV β (§5: β = 20).
pub const DEFAULT_PYRAMID_BETA: f64 = 20.0;

/// Options of the PyramidKV section.
#[derive(Clone, Debug, PartialEq)]
pub struct PyramidOptions {
    /// β: the top layer keeps 1/β of the average budget.
    pub beta: f64,
}

impl Default for PyramidOptions {
    fn default() -> Self {
        PyramidOptions {
            beta: DEFAULT_PYRAMID_BETA,
        }
    }
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

impl MethodSection for PyramidSection {
    fn build(_: Method, p: &Profile, opts: &PlanOptions) -> Result<Self> {
        Ok(PyramidSection {
            window: opts.window,
            beta: opts.pyramid.beta,
            kernel_size: DEFAULT_KERNEL,
            pooling: DEFAULT_POOLING,
            funnel: p
                .funnel
                .iter()
                .map(|f| LayerFunnel {
                    entropy: evidence(f.entropy),
                    top_k_mass: evidence(f.top_k_mass),
                })
                .collect(),
        })
    }

    fn validate(&self, q: &str, g: &Geometry) -> Result<()> {
        validate::at_least(&format!("{q}.window"), self.window, 1)?;
        validate::in_range(&format!("{q}.beta"), self.beta, 1.0, f64::MAX)?;
        validate::at_least(&format!("{q}.kernel_size"), self.kernel_size, 1)?;
        validate::len(
            &format!("{q}.funnel"),
            self.funnel.len(),
            g.layers,
            "one per layer",
        )?;
        for (l, f) in self.funnel.iter().enumerate() {
            validate::non_negative(&format!("{q}.funnel[{l}].entropy"), f.entropy)?;
            validate::in_range(
                &format!("{q}.funnel[{l}].top_k_mass"),
                f.top_k_mass,
                0.0,
                1.0,
            )?;
        }
        Ok(())
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        out.window = self.window.min(b);
        let global = g.global_layers().len();
        let layers = pyramid::layer_budgets(global, n, b, self.window, self.beta)?;
        out.per_layer_per_kv_head = g.scatter_global(Budgets::per_layer(layers, g.kv_heads), n);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("β {}, α {}", self.beta, self.window)
    }
}
