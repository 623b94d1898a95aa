//! StreamingLLM (Xiao et al. 2024): every KV head keeps the same budget `B`: `sinks` initial
//! tokens (attention sinks, 4) plus `B − sinks` recent ones (`methods::uniform::streaming_split`).

use super::uniform;
use super::{MethodSection, NoOptions};
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::Result;
use serde::{Deserialize, Serialize};

/// Attention sinks of StreamingLLM (and TreeKV).
pub const DEFAULT_SINKS: usize = 4;

/// StreamingLLM: uniform budgets of sinks plus recent tokens.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StreamingSection {
    pub sinks: usize,
}

impl MethodSection for StreamingSection {
    type Options = NoOptions;

    fn build(_: Method, _: &Profile, _: usize, _: &NoOptions) -> Result<Self> {
        Ok(StreamingSection {
            sinks: DEFAULT_SINKS,
        })
    }

    fn validate(&self, _: &str, _: &Geometry) -> Result<()> {
        Ok(())
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        let (n, b) = (out.context_len, out.per_head);
        (out.sinks, out.recent) = uniform::streaming_split(b, self.sinks);
        out.per_layer_per_kv_head = uniform::budgets(g.layers, g.kv_heads, n, b);
        Ok(())
    }

    fn parameters(&self) -> String {
        format!("sinks {}", self.sinks)
    }
}
