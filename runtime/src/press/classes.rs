//! A plan reduced to the layer windows a serving engine runs (`kvplan export --to vllm|trtllm`),
//! executed as that engine executes them for the model's architecture, so what the reduction
//! costs can be measured beside the full plan. What each engine honours comes from the planner's
//! capability table (`kvplan_planner::export::capability`, with the engine sources), looked up
//! through `kvplan_planner::export::targets::capability`.
//!
//! Named `<engine>:<method>` (`vllm:headkv-r`, `trtllm:pyramid`, `trtllm-engine:snapkv`):
//! `method`'s budgets at the prompt's length and target, averaged over each layer's KV heads,
//! become the windows the engine takes for this architecture — `vllm`: full layers and one
//! shared window on Llama, one window on every layer on Qwen2, refused on Gemma 3 (a windowed
//! global layer would take the local RoPE base); `trtllm` and `trtllm-engine`: one window per
//! layer ([`kvplan_planner::export::classes::reduce`]). Layers the model already windows keep
//! their own.
//!
//! **Attention.** vLLM and TensorRT-LLM's legacy engine give the kernel each layer's window: a
//! layer with window `W` attends as a sliding-window layer from the first token (each query
//! sees the last `W` keys, itself included) and holds its last `W` entries — no sinks, no
//! scores, original positions; this press. The window is recorded in the layer's cache
//! ([`LayerCache::slide`]); the model's attention reads a global layer's window from there, and
//! the session keeps sliding it after every forward call ([`super::windowed::slide`]).
//! TensorRT-LLM's PyTorch backend gives the kernel no window for Llama, Qwen2 or Gemma 3's
//! global layers, and its decode reads the blocks the window frees: `trtllm:` runs as
//! [`super::stale::StaleBlocksPress`] ([`build`]).
//!
//! [`LayerCache::slide`]: crate::cache::LayerCache::slide

use burn::tensor::backend::Backend;
use kvplan_planner::export::capability::{Arch, Engine};
use kvplan_planner::export::classes::{self, LayerBudgets, LayerClass};
use kvplan_planner::export::targets;
use kvplan_planner::{Method, MethodName};

use super::from_plan::PressRequest;
use super::{Capabilities, Press, PressKind};
use crate::cache::KvCache;
use crate::error::{Error, Result};
use crate::model::{Model, ModelConfig};

/// What a [`LayerClassesPress`] can do: its own windowed prefill; it serves no method of the
/// table, and its windows slide while decoding without a score.
pub(super) const KIND: PressKind = PressKind::OWN_PREFILL;

/// The press `<engine>:<method>` as `request` asks, for the model `config` describes: the
/// method's budgets at the request's length and target, reduced to the engine's layer classes,
/// run as the engine's kernel runs them (module header).
pub fn build<B: Backend>(
    engine: Engine,
    method: Method,
    request: &PressRequest<'_>,
    config: &ModelConfig,
) -> Result<Box<dyn Press<B>>> {
    let name = MethodName::Classes(engine, method);
    let plan = request
        .plan
        .ok_or_else(|| Error::Request(format!("method `{name}` needs a plan (--plan FILE)")))?;
    let arch = Arch::of(&plan.model.architecture)?;
    let cap =
        targets::capability(engine, arch).map_err(|r| Error::Request(format!("`{name}`: {r}")))?;
    let layers = cap.layers.ok_or_else(|| {
        Error::Request(format!(
            "`{name}`: {} writes no layer windows",
            engine.name()
        ))
    })?;
    let n = request.context_len;
    let target = request.target.unwrap_or(plan.target);
    let budgets = LayerBudgets::of(plan, method, n, target)?;
    let reduction = classes::reduce(layers, &budgets)?;
    // A model's own sliding layers run at their own window here (the model's mask): they take
    // no press window, and a reduction that shrinks one (vLLM's Gemma 3 file) is not what this
    // press would run.
    let windows = reduction
        .layers
        .iter()
        .zip(&config.layer_windows)
        .map(|(c, own)| match (c, own) {
            (LayerClass::Window(w), Some(own)) if w < own => Err(Error::Request(format!(
                "`{name}`: {} shrinks the model's own sliding window from {own} to {w} at {n} \
                 tokens; the runtime runs a model's sliding layers at their own window, so this \
                 reduction is not simulated (`kvplan export --to {}` writes it)",
                engine.name(),
                engine.name()
            ))),
            (_, Some(_)) | (LayerClass::Full, None) => Ok(None),
            (LayerClass::Window(w), None) => Ok(Some(*w)),
        })
        .collect::<Result<Vec<Option<usize>>>>()?;
    if super::stale::applies(cap.prefill) {
        Ok(Box::new(super::stale::StaleBlocksPress::new(
            name.to_string(),
            &windows,
            cap.block_size,
        )))
    } else {
        Ok(Box::new(LayerClassesPress::new(name.to_string(), windows)))
    }
}

/// Runs every layer with a window as a sliding-window layer (module header).
#[derive(Debug, Clone)]
pub struct LayerClassesPress {
    name: String,
    /// The window of each layer; `None`: full attention (or the model's own window).
    windows: Vec<Option<usize>>,
}

impl LayerClassesPress {
    /// The press called `name` running `windows` (one per layer, `None`: full), windowed from
    /// the first token.
    pub fn new(name: impl Into<String>, windows: Vec<Option<usize>>) -> Self {
        Self {
            name: name.into(),
            windows,
        }
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
        KIND.serving(None)
    }

    /// Slides each windowed layer to its window before the step.
    fn prepare(&mut self, _model: &Model<B>, _ids: &[u32], cache: &mut KvCache<B>) -> Result<()> {
        for (layer, w) in cache.layers.iter_mut().zip(&self.windows) {
            if w.is_some() && layer.window() != *w {
                layer.slide(*w);
            }
        }
        Ok(())
    }
}
