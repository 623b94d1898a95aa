//! The registry: method name → press configured from the plan (as kvpress's
//! `evaluation/evaluate_registry.py`, NVIDIA/kvpress @ ee24521). The runtime never invents
//! budgets: every press but `full` asks the plan for `Budgets` at the prompt's length under the
//! plan's target or a re-target.
//!
//! Each method's press file implements [`MethodPress`] on the type that serves it: what the press
//! type can do ([`MethodPress::KIND`], known without a plan; with the method table's decode policy
//! it makes the method's [`Capabilities`]) and how it is configured from its plan section
//! ([`MethodPress::from_plan`]). A scorer with no parameter beyond its budget implements
//! [`PlainScorer`] instead and gets both by default. `registry!` below is the one table mapping each
//! planner [`Method`] to that type, one line per method; its matches are exhaustive over the
//! planner's method table, so the compiler names a method without a line.
//! [`PressOptions`] carries the switches that are not part of a plan (GQA aggregation,
//! SpindleKV's GQA handling and eq. 2 denominator, the position policy of evicting presses).

use burn::tensor::backend::Backend;
use kvplan_planner::controls;
use kvplan_planner::{Budgets, Method, MethodName, Plan, Target};

use super::from_plan::{FromPlan, MethodPress, PressRequest};
use super::full::FullPress;
use super::options::PressOptions;
use super::{Capabilities, Press};
use crate::error::{Error, Result};
use crate::model::ModelConfig;

/// Every name the registry serves: the planner's method table, in its order (FullKV first).
pub const PRESS_NAMES: &[&str] = kvplan_planner::methods::NAMES;

/// The registry: one line per method of the planner's table, `Variant => path::to::Type,`,
/// naming the type that implements [`MethodPress`] for it (no `use` line needed).
macro_rules! registry {
    ($($method:ident => $press:ty,)+) => {
        /// What `method`'s press can do: its type's kind, the table's decode policy.
        fn capabilities_of(method: Method) -> Capabilities {
            let kind = match method {
                $(Method::$method => <$press as MethodPress>::KIND,)+
            };
            kind.serving(Some(method))
        }

        /// `p.method`'s press, configured from the plan.
        pub fn press_from<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
            match p.method {
                $(Method::$method => <$press as MethodPress>::from_plan(p),)+
            }
        }
    };
}

registry! {
    Full => super::full::FullPress,
    SnapKv => super::snapkv::SnapKvScorer,
    H2o => super::h2o::H2oScorer,
    Streaming => super::streaming::StreamingScorer,
    Pyramid => super::snapkv::SnapKvScorer,
    HeadKv => super::snapkv::SnapKvScorer,
    HeadKvR => super::snapkv::SnapKvScorer,
    Spindle => super::spindle::SpindlePress,
    Pod => super::pod::PodPress,
    TreeKv => super::treekv::TreeKvPress,
    Tova => super::tova::TovaScorer,
    KNorm => super::knorm::KnormScorer,
}

/// A configured press and what it was configured from.
pub struct PressSpec<B: Backend> {
    /// The press.
    pub press: Box<dyn Press<B>>,
    /// The plan's method (`None` for `full`).
    pub method: Option<Method>,
    /// The budgets the press applies (`None` for `full`).
    pub budgets: Option<Budgets>,
}

/// What the press for `name` can do ([`Capabilities`]), read off its type without building it:
/// no plan needed, so callers can check a request before any model run.
pub fn capabilities(name: MethodName) -> Capabilities {
    match name {
        MethodName::Classes(..) => super::classes::KIND.serving(None),
        MethodName::Control(method, _) | MethodName::Method(method) => capabilities_of(method),
    }
}

/// The press called `name` (parsed as a [`MethodName`]), configured from `plan` for a prompt of
/// `context_len` tokens under `target` (the plan's own target when `None`), with default
/// [`PressOptions`].
pub fn build_press<B: Backend>(
    name: &str,
    plan: Option<&Plan>,
    context_len: usize,
    target: Option<Target>,
    config: &ModelConfig,
) -> Result<PressSpec<B>> {
    let request = PressRequest {
        plan,
        context_len,
        target,
        options: PressOptions::default(),
    };
    let name: MethodName = name.parse().map_err(|e| Error::Request(format!("{e}")))?;
    build_press_with(name, &request, config)
}

/// The press called `name` as `request` asks, for the model `config` describes.
pub fn build_press_with<B: Backend>(
    name: MethodName,
    request: &PressRequest<'_>,
    config: &ModelConfig,
) -> Result<PressSpec<B>> {
    let method = match name {
        MethodName::Classes(engine, method) => {
            return Ok(PressSpec {
                press: super::classes::build(engine, method, request, config)?,
                method: None,
                budgets: None,
            });
        }
        MethodName::Control(method, control) => {
            // A control (`headkv@perm3`, `headkv@beta1.2`): the method on a copy of the plan
            // with the control applied (kvplan_planner::controls).
            let plan = request.plan.ok_or_else(|| {
                Error::Request(format!("method `{name}` needs a plan (--plan FILE)"))
            })?;
            let controlled = controls::with_control(plan, method, control)?;
            let request = PressRequest {
                plan: Some(&controlled),
                ..*request
            };
            return build_press_with(MethodName::Method(method), &request, config);
        }
        MethodName::Method(method) => method,
    };
    if !method.has_section() {
        return Ok(PressSpec {
            press: Box::new(FullPress),
            method: None,
            budgets: None,
        });
    }
    let plan = request
        .plan
        .ok_or_else(|| Error::Request(format!("method `{name}` needs a plan (--plan FILE)")))?;
    let target = request.target.unwrap_or(plan.target);
    let budgets = plan.budgets(method, request.context_len, target)?;
    let held = decode_budgets(method, plan, &budgets, target)?;
    let from = FromPlan {
        method,
        plan,
        budgets: held.as_ref().unwrap_or(&budgets),
        config,
        options: request.options,
    };
    let mut press = press_from(&from)?;
    // The plan's decode-time interval (budget_semantics.methods.<m>.decode), read by the press.
    let every = plan
        .budget_semantics
        .methods
        .get(&method)
        .and_then(|s| s.decode.compress_every());
    if let Some(every) = every {
        press.set_compress_every(every)?;
    }
    Ok(PressSpec {
        press,
        method: Some(method),
        budgets: Some(budgets),
    })
}

/// The budgets a press that evicts while generating holds once the cache has grown: under an
/// absolute target `{"tokens": B}` and a prompt shorter than `B`, the plan's budgets at context
/// `B` (the prompt is kept whole, then the cache grows to the budget before anything is evicted);
/// `None` when they are the prompt's own (`budget_semantics.methods.<m>.decode`,
/// `held_at_budget`). A ratio target is a share of the prompt and stays the prompt's.
fn decode_budgets(
    method: Method,
    plan: &Plan,
    at_prompt: &Budgets,
    target: Target,
) -> Result<Option<Budgets>> {
    match target {
        Target::Tokens(b)
            if capabilities_of(method).evicts_while_decoding && at_prompt.context_len < b =>
        {
            Ok(Some(plan.budgets(method, b, target)?))
        }
        _ => Ok(None),
    }
}
