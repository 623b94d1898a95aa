//! The registry: method name → press configured from the plan (as kvpress's
//! `evaluation/evaluate_registry.py`, NVIDIA/kvpress @ ee24521). The runtime never invents
//! budgets: every press but `full` asks the plan for `Budgets` at the prompt's length under the
//! plan's target or a re-target.
//! [`PressOptions`] carries the switches that are not part of a plan (SpindleKV's GQA repeat).

use burn::tensor::backend::Backend;
use kvplan_planner::{Budgets, Method, Plan, Pooling, Section, Target};

use super::full::FullPress;
use super::h2o::H2oScorer;
use super::knorm::KnormScorer;
use super::pod::PodPress;
use super::snapkv::SnapKvScorer;
use super::spindle::SpindlePress;
use super::streaming::StreamingScorer;
use super::tova::TovaScorer;
use super::treekv::TreeKvPress;
use super::{Allocation, Capabilities, Press, SelectionPress};
use crate::error::{Error, Result};
use crate::model::ModelConfig;

/// Every name the registry serves: the planner's method table, in its order (FullKV first).
pub const PRESS_NAMES: &[&str] = kvplan_planner::methods::NAMES;

/// A configured press and what it was configured from.
pub struct PressSpec<B: Backend> {
    /// The press.
    pub press: Box<dyn Press<B>>,
    /// The plan's method (`None` for `full`).
    pub method: Option<Method>,
    /// The budgets the press applies (`None` for `full`).
    pub budgets: Option<Budgets>,
}

fn unknown(name: &str) -> Error {
    Error::Request(format!(
        "unknown method `{name}`; the registry has: {}",
        PRESS_NAMES.join(", ")
    ))
}

fn plan_err(e: kvplan_planner::Error) -> Error {
    Error::Request(format!("plan: {e}"))
}

/// Press switches beyond the plan, all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressOptions {
    /// SpindleKV: the GQA repeat variant (`spindlekv.md` §3.3) — KV heads repeated per query
    /// head, eviction per query head, one codebook per layer. Off by default, the paper's
    /// default for MHA: the plan's budgets are per KV head, and the repeat has every query head
    /// keep that budget (×`h_n` references and magnitudes per token).
    pub spindle_repeat: bool,
}

/// What the press called `name` can do ([`Capabilities`]), read off its type without building
/// it: no plan needed, so callers can check a request before any model run.
pub fn capabilities(name: &str) -> Result<Capabilities> {
    let method: Method = name.parse().map_err(|_| unknown(name))?;
    Ok(match method {
        Method::Full => FullPress::CAPABILITIES,
        Method::Streaming => StreamingScorer::CAPABILITIES,
        Method::H2o => H2oScorer::CAPABILITIES,
        Method::SnapKv | Method::Pyramid | Method::HeadKv | Method::HeadKvR => {
            SnapKvScorer::CAPABILITIES
        }
        Method::TreeKv => TreeKvPress::CAPABILITIES,
        Method::Spindle => SpindlePress::CAPABILITIES,
        Method::Pod => PodPress::CAPABILITIES,
        Method::Tova => TovaScorer::CAPABILITIES,
        Method::KNorm => KnormScorer::CAPABILITIES,
    })
}

/// The press called `name`, configured from `plan` for a prompt of `context_len` tokens under
/// `target` (the plan's own target when `None`), with default [`PressOptions`].
pub fn build_press<B: Backend>(
    name: &str,
    plan: Option<&Plan>,
    context_len: usize,
    target: Option<Target>,
    config: &ModelConfig,
) -> Result<PressSpec<B>> {
    build_press_with(
        name,
        plan,
        context_len,
        target,
        config,
        PressOptions::default(),
    )
}

/// [`build_press`] with `options`.
pub fn build_press_with<B: Backend>(
    name: &str,
    plan: Option<&Plan>,
    context_len: usize,
    target: Option<Target>,
    config: &ModelConfig,
    options: PressOptions,
) -> Result<PressSpec<B>> {
    if !PRESS_NAMES.contains(&name) {
        return Err(unknown(name));
    }
    if name == "full" {
        return Ok(PressSpec {
            press: Box::new(FullPress),
            method: None,
            budgets: None,
        });
    }
    let method: Method = name.parse().map_err(|_| unknown(name))?;
    let plan =
        plan.ok_or_else(|| Error::Request(format!("method `{name}` needs a plan (--plan FILE)")))?;
    let target = target.unwrap_or(plan.target);
    let budgets = plan
        .budgets(method, context_len, target)
        .map_err(plan_err)?;
    let from = FromPlan {
        name,
        method,
        plan,
        budgets: &budgets,
        config,
        options,
    };
    let press = press_for(&from)?;
    Ok(PressSpec {
        press,
        method: Some(method),
        budgets: Some(budgets),
    })
}

/// What a press is configured from: the plan's section of its method and the budgets the plan
/// gives at the prompt's length.
struct FromPlan<'a> {
    name: &'a str,
    method: Method,
    plan: &'a Plan,
    budgets: &'a Budgets,
    config: &'a ModelConfig,
    options: PressOptions,
}

impl<'a> FromPlan<'a> {
    /// The budgets as an [`Allocation`].
    fn alloc(&self) -> Allocation {
        Allocation::from_grid(&self.budgets.per_layer_per_kv_head)
    }

    /// The method's section of the plan, or the error naming the missing one.
    fn section(&self) -> Result<&'a Section> {
        self.plan
            .sections
            .section(self.method)
            .ok_or_else(|| plan_err(kvplan_planner::Error::MissingSection(self.method)))
    }

    /// `scorer` under the plan's allocation.
    fn selection<B: Backend>(&self, scorer: Box<dyn super::Scorer>) -> Box<dyn Press<B>> {
        selection(self.name, scorer, self.alloc())
    }
}

/// One line per method: the press it runs, configured from its section.
fn press_for<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
    let (b, c) = (p.budgets, p.config);
    Ok(match p.section()? {
        Section::Streaming(x) => p.selection(Box::new(StreamingScorer::new(x.sinks))),
        Section::H2o(x) => p.selection(Box::new(H2oScorer::new(x.heavy_fraction))),
        Section::SnapKv(x) => snapkv(p, x.window, x.kernel_size, x.pooling),
        Section::Pyramid(x) => snapkv(p, x.window, x.kernel_size, x.pooling),
        Section::HeadKv(x) | Section::HeadKvR(x) => snapkv(p, x.window, x.kernel_size, x.pooling),
        Section::TreeKv(x) => {
            let tree = TreeKvPress::new(p.alloc(), b.sinks, b.recent, x.block_size, c.rope());
            Box::new(tree)
        }
        Section::Spindle(x) => {
            let layers = b.codebook_layers.clone();
            let press =
                SpindlePress::new(p.alloc(), b.window, layers, x.theta_k, x.theta_v, c.rope());
            Box::new(if p.options.spindle_repeat {
                press.with_repeat(c.geometry.group_size())
            } else {
                press
            })
        }
        Section::Pod(x) => {
            refuse_pod_on(&c.architecture)?;
            let g = &p.plan.model.geometry;
            let (blocks, tau) = (x.blocks.clone(), x.tau);
            Box::new(PodPress::new(blocks, g, b.sinks, b.recent, tau, c.rope()))
        }
        Section::Tova(_) => p.selection(Box::new(TovaScorer::new())),
        Section::KNorm(_) => p.selection(Box::new(KnormScorer::new())),
    })
}

/// PoD's press and its training run their own attention forward pass, written for the `llama`
/// block: no Q/K/V biases (qwen2), Q/K norms, post-norms or sliding windows (gemma3). Another
/// architecture would run wrongly, so it is refused.
pub fn refuse_pod_on(architecture: &str) -> Result<()> {
    if architecture == "llama" {
        return Ok(());
    }
    Err(Error::Request(format!(
        "pod: its shared-attention forward pass supports general.architecture = \"llama\" only, \
         not {architecture:?} (biases, Q/K norms and sliding windows are not applied there)"
    )))
}

/// SnapKV's scorer with a section's window and pooling (SnapKV, PyramidKV, HeadKV).
fn snapkv<B: Backend>(
    p: &FromPlan<'_>,
    window: usize,
    kernel: usize,
    pooling: Pooling,
) -> Box<dyn Press<B>> {
    p.selection(Box::new(SnapKvScorer::new(p.name, window, kernel, pooling)))
}

fn selection<B: Backend>(
    name: &str,
    scorer: Box<dyn super::Scorer>,
    alloc: Allocation,
) -> Box<dyn Press<B>> {
    Box::new(SelectionPress::new(name, scorer, alloc))
}
