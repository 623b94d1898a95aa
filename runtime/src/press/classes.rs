//! A plan reduced to the layer classes a serving engine runs (`kvplan export --to vllm|trtllm`;
//! the reductions are the planner's `export::classes`), executed as the engine executes them, so
//! what the reduction costs can be measured beside the full plan.
//!
//! Named `<engine>:<method>` (`vllm:headkv-r`, `trtllm:pyramid`): `method`'s budgets at the
//! prompt's length and target, averaged over each layer's KV heads, become layer classes —
//! `vllm`: full layers and one shared window ([`kvplan_planner::export::classes::two_classes`]);
//! `trtllm`: one window per layer ([`kvplan_planner::export::classes::per_layer`]). A layer with
//! a window `W` then attends as a sliding-window layer from the first token: in prefill each
//! query sees the last `W` keys (itself included), and the layer holds its last `W` entries — no
//! sinks, no scores, original positions, as vLLM's and TensorRT-LLM's sliding-window attention
//! do. The window is recorded in the layer's cache ([`LayerCache::slide`]); the model's attention
//! reads a global layer's window from there, and the session keeps sliding it after every
//! forward call ([`super::windowed::slide`]). Layers the model already windows keep their own.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use kvplan_planner::export::classes::{self, LayerBudgets, LayerClass};
use kvplan_planner::Method;

use super::registry::PressRequest;
use super::{Capabilities, Press};
use crate::cache::KvCache;
use crate::error::{Error, Result};
use crate::model::{Logits, Model, ModelConfig};
use crate::observe::{ObserveConfig, Observer};

/// The engines whose layer classes this press runs.
pub const ENGINES: [&str; 2] = ["vllm", "trtllm"];

/// Whether `name` is `<engine>:<method>` for an engine of [`ENGINES`] and a method of the
/// planner's table that keeps fewer entries per head (not `full`, not `pod`).
pub fn is_classes_name(name: &str) -> bool {
    parse(name).is_ok()
}

fn parse(name: &str) -> Result<(&str, Method)> {
    let bad = || {
        Error::Request(format!(
            "`{name}`: expected <engine>:<method> with an engine of {} and a method of the \
             plan other than full and pod",
            ENGINES.join(", ")
        ))
    };
    let (engine, method) = name.split_once(':').ok_or_else(bad)?;
    let method: Method = method.parse().map_err(|_| bad())?;
    if !ENGINES.contains(&engine) || matches!(method, Method::Full | Method::Pod) {
        return Err(bad());
    }
    Ok((engine, method))
}

/// Runs every layer with a window as a sliding-window layer (module header).
#[derive(Debug, Clone)]
pub struct LayerClassesPress {
    name: String,
    /// The window of each layer; `None`: full attention (or the model's own window).
    windows: Vec<Option<usize>>,
}

impl LayerClassesPress {
    /// The press called `name` running `windows` (one per layer, `None`: full).
    pub fn new(name: impl Into<String>, windows: Vec<Option<usize>>) -> Self {
        Self {
            name: name.into(),
            windows,
        }
    }

    /// The press `name` (`<engine>:<method>`) as `request` asks, for the model `config`
    /// describes: the method's budgets at the request's length and target, reduced to the
    /// engine's layer classes.
    pub fn from_request(
        name: &str,
        request: &PressRequest<'_>,
        config: &ModelConfig,
    ) -> Result<Self> {
        let (engine, method) = parse(name)?;
        let plan = request
            .plan
            .ok_or_else(|| Error::Request(format!("method `{name}` needs a plan (--plan FILE)")))?;
        let n = request.context_len;
        let target = request.target.unwrap_or(plan.target);
        let budgets = LayerBudgets::of(plan, method, n, target)?;
        let reduction = match engine {
            "vllm" => classes::two_classes(&budgets)?,
            _ => classes::per_layer(&budgets)?,
        };
        let windows = reduction
            .layers
            .iter()
            .zip(&config.layer_windows)
            .map(|(c, own)| match (c, own) {
                // The model's own window is its attention's already.
                (_, Some(_)) | (LayerClass::Full, None) => None,
                (LayerClass::Window(w), None) => Some(*w),
            })
            .collect();
        Ok(Self::new(name, windows))
    }

    /// The window of each layer (`None`: full attention or the model's own window).
    pub fn windows(&self) -> &[Option<usize>] {
        &self.windows
    }
}

impl<B: Backend> Press<B> for LayerClassesPress {
    fn name(&self) -> &str {
        &self.name
    }

    /// Its attention differs from the first token (windowed prefill), so it runs its own
    /// prefill; the windows slide while decoding without scoring anything.
    fn capabilities(&self) -> Capabilities {
        super::registry::CLASSES_CAPABILITIES
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        None
    }

    fn after_prefill(&mut self, _cache: &mut KvCache<B>, _obs: Option<&Observer>) -> Result<()> {
        Ok(())
    }

    fn forward(
        &mut self,
        model: &Model<B>,
        ids: &[u32],
        cache: &mut KvCache<B>,
        obs: Option<&mut Observer>,
    ) -> Result<Tensor<B, 2>> {
        for (layer, w) in cache.layers.iter_mut().zip(&self.windows) {
            if w.is_some() && layer.window() != *w {
                layer.slide(*w);
            }
        }
        model.forward(ids, cache, obs, Logits::Last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_an_engine_and_a_method_that_evicts() {
        assert!(is_classes_name("vllm:headkv-r"));
        assert!(is_classes_name("trtllm:pyramid"));
        for bad in [
            "vllm",
            "vllm:pod",
            "trtllm:full",
            "sglang:snapkv",
            "vllm:pyramidkv",
        ] {
            assert!(!is_classes_name(bad), "{bad}");
        }
        let e = parse("sglang:snapkv").unwrap_err().to_string();
        assert!(e.contains("vllm, trtllm"), "{e}");
    }
}
