//! H2O (Zhang et al. 2024): every KV head keeps the same budget `B`, split into heavy hitters
//! (highest accumulated attention) and a recent window; the paper's default splits it in halves:
//! heavy = ⌊B·heavy_fraction⌋, recent = `B − heavy` (`methods::uniform::h2o_split`).

use super::uniform;
use super::{MethodSection, NoOptions};
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::{validate, Result};
use serde::{Deserialize, Serialize};

/// Share of the budget given to heavy hitters (the paper's halves).
pub const DEFAULT_HEAVY_FRACTION: f64 = 0.5;

/// H2O: uniform budgets split into heavy hitters and a recent window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct H2oSection {
    pub heavy_fraction: f64,
}

impl MethodSection for H2oSection {
    type Options = NoOptions;

    fn build(_: Method, _: &Profile, _: usize, _: &NoOptions) -> Result<Self> {
        Ok(H2oSection {
            heavy_fraction: DEFAULT_HEAVY_FRACTION,
        })
    }

    fn validate(&self, path: &str, _: &Geometry) -> Result<()> {
        validate::in_range(
            &format!("{path}.heavy_fraction"),
            self.heavy_fraction,
            0.0,
            1.0,
        )
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        out.recent = uniform::h2o_split(b, self.heavy_fraction).1;
        out.per_layer_per_kv_head = uniform::budgets(g.layers, g.kv_heads, n, b);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("heavy {}", self.heavy_fraction)
    }
}
