//! What a method's press file implements and is given: the [`MethodPress`] trait (or, for a
//! scorer with no parameter beyond its budget, [`PlainScorer`]), the [`PressRequest`] a caller
//! makes and the [`FromPlan`] a press is configured from. The registry ([`super::registry`])
//! maps each method of the table to the type implementing these.

use burn::tensor::backend::Backend;
use kvplan_planner::{Budgets, Geometry, Method, MethodSection, Plan, Section, Target};

use super::options::{PositionPolicy, PressOptions};
use super::{Allocation, Press, PressKind, Scorer, SelectionPress};
use crate::error::{Error, Result};
use crate::model::ModelConfig;

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
            Some(PositionPolicy::Reassign) => {
                press.reassigning(self.config.rope_for(self.budgets.context_len))
            }
            _ => press,
        })
    }
}

/// PoD's press and its training run their own attention pass inside the model's own block
/// ([`crate::model::block::Block::around`]: pre- and post-norms, the embedding scale and the
/// final soft-cap as the model has them) over the model's own projection
/// (`Attention::project`: Q/K/V biases and Q/K norms included) and RoPE tables (scaling and
/// NoPE layers included). Their attention has no sliding window and no score soft-cap, so the
/// architectures with windowed layers or capped scores (Gemma 2 and 3) are refused, and so is a
/// file of another architecture that sets a window ([`refuse_pod_on_windows`]).
pub fn refuse_pod_on(architecture: &str) -> Result<()> {
    if !matches!(architecture, "gemma2" | "gemma3") {
        return Ok(());
    }
    Err(Error::Request(format!(
        "pod: its shared-attention forward pass has no sliding-window layers or score soft-cap, \
         which general.architecture = {architecture:?} needs; it runs llama, qwen2, qwen3, \
         olmo2, phi3 and smollm3 files without a sliding window"
    )))
}

/// [`refuse_pod_on`] for a model whose file windows some layers (a Mistral or Phi-3 file).
pub fn refuse_pod_on_windows(config: &ModelConfig) -> Result<()> {
    refuse_pod_on(&config.architecture)?;
    match config.layer_windows.iter().flatten().next() {
        Some(w) => Err(Error::Request(format!(
            "pod: {} sets a sliding window of {w} positions ({}.attention.sliding_window), which \
             its shared-attention forward pass does not apply",
            config.name, config.architecture
        ))),
        None => Ok(()),
    }
}
