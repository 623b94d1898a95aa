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
use kvplan_planner::{controls, Budgets, Geometry, Method, MethodSection, Plan, Section, Target};

use super::full::FullPress;
use super::spindle::{Denominator, SpindleGqa};
use super::{Allocation, Capabilities, GqaAggregation, Press, PressKind, Scorer, SelectionPress};
use crate::error::{Error, Result};
use crate::model::ModelConfig;

/// Every name the registry serves: the planner's method table, in its order (FullKV first).
pub const PRESS_NAMES: &[&str] = kvplan_planner::methods::NAMES;

/// What a method's press file gives the registry.
pub trait MethodPress {
    /// What the press type can do, read off its type without building it (no plan needed).
    const KIND: PressKind;

    /// The press of `p.method`, configured from its plan section and budgets.
    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>>;
}

/// A scorer with no parameter beyond its budget (its plan section is empty): its press is a
/// [`SelectionPress`] over `Self::default()` under the plan's allocation, built by the blanket
/// [`MethodPress`] below. `impl PlainScorer for MyScorer {}` is all a new plain method's file
/// adds beside its [`Scorer`].
pub trait PlainScorer: Scorer + Default + 'static {}

impl<S: PlainScorer> MethodPress for S {
    const KIND: PressKind = PressKind::SELECTION;

    fn from_plan<B: Backend>(p: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        Ok(p.selection(S::default()))
    }
}

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

fn unknown(name: &str) -> Error {
    Error::Request(format!(
        "unknown method `{name}`; the registry has: {}, <engine>:<method> for an engine's \
         layer classes ({}), and the controls headkv@perm<seed>, headkv@beta<β> (also on \
         headkv-r)",
        PRESS_NAMES.join(", "),
        super::classes::ENGINES.join(", ")
    ))
}

/// What a [`super::classes::LayerClassesPress`] can do (its own windowed prefill; it serves no
/// method of the table, and its windows slide while decoding without a score).
pub(super) const CLASSES_KIND: PressKind = PressKind {
    changes_forward: true,
    streams_past_context: false,
    adopts_shared_prefill: false,
};

/// Whether the registry builds a press called `name`: a method of the table, or
/// `<engine>:<method>` ([`super::classes`]).
pub fn is_press_name(name: &str) -> bool {
    PRESS_NAMES.contains(&name)
        || super::classes::is_classes_name(name)
        || matches!(controls::parse(name), Some(Ok(_)))
}

/// Press switches beyond the plan; the defaults are each method's own setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressOptions {
    /// How window-based selections (SnapKV, PyramidKV, HeadKV, HeadKV-R; SpindleKV without
    /// the repeat) combine a KV head's query heads ([`super::gqa`]).
    pub gqa: GqaAggregation,
    /// SpindleKV on a GQA model: the repeat variant (`docs/papers/spindlekv.md` §3.3, the default)
    /// or one decision per KV head (eq. 3).
    pub spindle_gqa: SpindleGqa,
    /// SpindleKV's eq. 2 denominator (the window's mean by default; `l − a` as printed).
    pub spindle_denominator: Denominator,
    /// Positions of evicting presses; `None`: each method's own (TreeKV re-assigns after every
    /// eviction, the others when the stream reaches the trained context).
    pub positions: Option<PositionPolicy>,
}

/// Where an evicting press's entries sit after an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionPolicy {
    /// Positions `0..len` after every eviction, keys re-rotated (TreeKV §4.1, StreamingLLM §3.2).
    Reassign,
    /// Original positions, re-assigned only when the stream reaches the trained context.
    Keep,
}

impl PositionPolicy {
    /// The names the command line and the results' settings use.
    pub const NAMES: [&'static str; 2] = ["reassign", "keep"];

    /// This policy's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Reassign => Self::NAMES[0],
            Self::Keep => Self::NAMES[1],
        }
    }
}

impl std::str::FromStr for PositionPolicy {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "reassign" => Ok(Self::Reassign),
            "keep" => Ok(Self::Keep),
            _ => Err(format!(
                "unknown position policy `{s}`; expected one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// What the press called `name` can do ([`Capabilities`]), read off its type without building
/// it: no plan needed, so callers can check a request before any model run.
pub fn capabilities(name: &str) -> Result<Capabilities> {
    if super::classes::is_classes_name(name) {
        return Ok(CLASSES_KIND.serving(None));
    }
    if let Some(parsed) = controls::parse(name) {
        return Ok(capabilities_of(parsed?.0));
    }
    let method: Method = name.parse().map_err(|_| unknown(name))?;
    Ok(capabilities_of(method))
}

/// What a press is asked for: the plan its budgets come from, the prompt's length and the
/// target (the plan's own when `None`), and the switches beyond the plan.
#[derive(Clone, Copy, Default)]
pub struct PressRequest<'a> {
    /// The plan (needed by every method but `full`).
    pub plan: Option<&'a Plan>,
    /// Prompt length the budgets are planned for.
    pub context_len: usize,
    /// Re-target (`--budget`, `--ratio`); `None`: the plan's own target.
    pub target: Option<Target>,
    /// Switches beyond the plan.
    pub options: PressOptions,
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
    let request = PressRequest {
        plan,
        context_len,
        target,
        options: PressOptions::default(),
    };
    build_press_with(name, &request, config)
}

/// The press called `name` as `request` asks, for the model `config` describes.
pub fn build_press_with<B: Backend>(
    name: &str,
    request: &PressRequest<'_>,
    config: &ModelConfig,
) -> Result<PressSpec<B>> {
    if super::classes::is_classes_name(name) {
        let press = super::classes::LayerClassesPress::from_request(name, request, config)?;
        return Ok(PressSpec {
            press: Box::new(press),
            method: None,
            budgets: None,
        });
    }
    if let Some(parsed) = controls::parse(name) {
        // A control (`headkv@perm3`, `headkv@beta1.2`): the method on a copy of the plan with
        // the control applied (kvplan_planner::controls).
        let (method, control) = parsed?;
        let plan = request
            .plan
            .ok_or_else(|| Error::Request(format!("method `{name}` needs a plan (--plan FILE)")))?;
        let controlled = controls::with_control(plan, method, control)?;
        let request = PressRequest {
            plan: Some(&controlled),
            ..*request
        };
        return build_press_with(method.name(), &request, config);
    }
    let method: Method = name.parse().map_err(|_| unknown(name))?;
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

/// What a press is configured from: the plan (its method's section, the model's geometry), the
/// budgets the plan gives at the prompt's length, the model run and the switches beyond the plan.
pub struct FromPlan<'a> {
    /// The method, whose name the press reports.
    pub method: Method,
    /// The plan.
    pub plan: &'a Plan,
    /// The budgets the press holds: the prompt's length's, or for a press that evicts while
    /// generating a prompt shorter than the target, the target's ([`decode_budgets`]).
    pub budgets: &'a Budgets,
    /// The model the press runs on.
    pub config: &'a ModelConfig,
    /// Switches beyond the plan.
    pub options: PressOptions,
}

impl<'a> FromPlan<'a> {
    /// The budgets as an [`Allocation`].
    pub fn allocation(&self) -> Allocation {
        Allocation::from_grid(&self.budgets.per_layer_per_kv_head)
    }

    /// The method's section of the plan, or the error naming the missing one.
    pub fn section(&self) -> Result<&'a Section> {
        self.plan.sections.section(self.method).ok_or(Error::Plan(
            kvplan_planner::Error::MissingSection(self.method),
        ))
    }

    /// The method's section as its type `T`.
    pub fn section_as<T: MethodSection>(&self) -> Result<&'a T> {
        let section = self.section()?;
        self.plan
            .sections
            .get::<T>(self.method)
            .ok_or_else(|| self.wrong_section(section))
    }

    /// The plan's model geometry (with its query→KV head map).
    pub fn geometry(&self) -> &'a Geometry {
        &self.plan.model.geometry
    }

    /// The error of a press handed a section of another method (a registry line naming the
    /// wrong type).
    pub fn wrong_section(&self, section: &Section) -> Error {
        Error::Request(format!(
            "method `{}`: its press cannot read the `{}` section",
            self.method,
            section.method()
        ))
    }

    /// `scorer` under the plan's allocation, reported under the method's name; re-assigning
    /// positions after every eviction when the request's position policy says so.
    pub fn selection<B: Backend>(&self, scorer: impl Scorer + 'static) -> Box<dyn Press<B>> {
        let press = SelectionPress::new(self.method, Box::new(scorer), self.allocation());
        Box::new(match self.options.positions {
            Some(PositionPolicy::Reassign) => press.reassigning(self.config.rope()),
            _ => press,
        })
    }
}

/// PoD's press and its training run their own attention forward pass over the model's own
/// projection (`Attention::project`: Q/K/V biases and Q/K norms included) and a pre-norm block:
/// `llama` and `qwen2`. Gemma 3's post-norms, embedding scale and sliding-window layers are not
/// applied there, so that architecture (and any other) is refused.
pub fn refuse_pod_on(architecture: &str) -> Result<()> {
    if matches!(architecture, "llama" | "qwen2") {
        return Ok(());
    }
    Err(Error::Request(format!(
        "pod: its shared-attention forward pass supports general.architecture = \"llama\" or \
         \"qwen2\", not {architecture:?} (post-norms, embedding scale and sliding-window layers \
         are not applied there)"
    )))
}
