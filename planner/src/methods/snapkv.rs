//! SnapKV (Li et al. 2024, as run in PyramidKV §4.2.2): every KV head keeps the same budget `B`
//! — the last α prompt tokens (the observation window) plus `B − α` chosen by the window's
//! pooled attention. `B > α` is required, as the authors' code asserts. The window, kernel and
//! pooling defined here are shared by the SnapKV-style methods (PyramidKV, HeadKV).

use super::{rules, uniform};
use super::{MethodSection, NoOptions};
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::{validate, Result};
use serde::{Deserialize, Serialize};

/// Observation window α of the SnapKV-style methods (PyramidKV's experiments: α = 8).
pub const DEFAULT_WINDOW: usize = 8;
/// SnapKV pooling kernel (KVCache-Factory default).
pub const DEFAULT_KERNEL: usize = 7;
/// SnapKV pooling (KVCache-Factory default).
pub const DEFAULT_POOLING: Pooling = Pooling::Maxpool;

/// How SnapKV-style selection pools attention scores along the sequence.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    Avgpool,
    Maxpool,
}

/// SnapKV: uniform budgets, window α inside, pooled attention selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SnapKvSection {
    pub window: usize,
    pub kernel_size: usize,
    pub pooling: Pooling,
}

impl MethodSection for SnapKvSection {
    type Options = NoOptions;

    fn build(_: Method, _: &Profile, window: usize, _: &NoOptions) -> Result<Self> {
        Ok(SnapKvSection {
            window,
            kernel_size: DEFAULT_KERNEL,
            pooling: DEFAULT_POOLING,
        })
    }

    fn validate(&self, path: &str, _: &Geometry) -> Result<()> {
        validate::at_least(&format!("{path}.window"), self.window, 1)?;
        validate::at_least(&format!("{path}.kernel_size"), self.kernel_size, 1)
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        if !rules::prompt_fits(n, b) {
            rules::check_exceeds_window(out.method, b, self.window, "α")?;
        }
        out.window = self.window.min(b);
        out.per_layer_per_kv_head = uniform::budgets(g.layers, g.kv_heads, n, b);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("α {}", self.window)
    }
}
