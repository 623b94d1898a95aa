//! The registry: method name → press configured from the plan (kvpress's
//! `evaluate_registry.py`). The runtime never invents budgets: every press but `full` asks the
//! plan for `Budgets` at the prompt's length under the plan's target or a re-target.
//! [`PressOptions`] carries the switches that are not part of a plan (SpindleKV's GQA repeat).

use burn::tensor::backend::Backend;
use kvplan_planner::{Budgets, Method, Plan, Section, Target};

use super::full::FullPress;
use super::h2o::H2oScorer;
use super::pod::PodPress;
use super::snapkv::SnapKvScorer;
use super::spindle::SpindlePress;
use super::streaming::StreamingScorer;
use super::treekv::TreeKvPress;
use super::{Allocation, Press, SelectionPress};
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
    let alloc = Allocation::from_grid(&budgets.per_layer_per_kv_head);
    let section = plan
        .sections
        .section(method)
        .ok_or_else(|| plan_err(kvplan_planner::Error::MissingSection(method)))?;
    let press: Box<dyn Press<B>> = match section {
        Section::Streaming(sec) => {
            selection(name, Box::new(StreamingScorer::new(sec.sinks)), alloc)
        }
        Section::H2o(sec) => selection(name, Box::new(H2oScorer::new(sec.heavy_fraction)), alloc),
        Section::SnapKv(sec) => {
            let sc = SnapKvScorer::new(name, sec.window, sec.kernel_size, sec.pooling);
            selection(name, Box::new(sc), alloc)
        }
        Section::Pyramid(sec) => {
            let sc = SnapKvScorer::new(name, sec.window, sec.kernel_size, sec.pooling);
            selection(name, Box::new(sc), alloc)
        }
        Section::HeadKv(sec) | Section::HeadKvR(sec) => {
            let sc = SnapKvScorer::new(name, sec.window, sec.kernel_size, sec.pooling);
            selection(name, Box::new(sc), alloc)
        }
        Section::TreeKv(sec) => Box::new(TreeKvPress::new(
            alloc,
            budgets.sinks,
            budgets.recent,
            sec.block_size,
            config.rope_theta,
        )),
        Section::Spindle(sec) => {
            let press = SpindlePress::new(
                alloc,
                budgets.window,
                budgets.codebook_layers.clone(),
                sec.theta_k,
                sec.theta_v,
                config.rope_theta,
            );
            Box::new(if options.spindle_repeat {
                press.with_repeat(config.n_heads / config.n_kv_heads)
            } else {
                press
            })
        }
        Section::Pod(sec) => Box::new(PodPress::new(
            sec.blocks.clone(),
            &plan.model.geometry,
            budgets.sinks,
            budgets.recent,
            sec.tau,
            config.rope_theta,
        )),
        Section::Tova(_) | Section::KNorm(_) => {
            return Err(Error::Request(format!(
                "method `{name}` has no runtime press yet"
            )))
        }
    };
    Ok(PressSpec {
        press,
        method: Some(method),
        budgets: Some(budgets),
    })
}

fn selection<B: Backend>(
    name: &str,
    scorer: Box<dyn super::Scorer>,
    alloc: Allocation,
) -> Box<dyn Press<B>> {
    Box::new(SelectionPress::new(name, scorer, alloc))
}
