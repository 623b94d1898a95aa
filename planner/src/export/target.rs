//! What every export target is given and gives back: the [`ExportTarget`] trait (one file per
//! format in [`super::targets`] implements it), the [`Context`] a target writes from and the
//! files and notes it [`Written`] returns.

use super::capability::{Arch, Capability, Refusal};
use super::classes::LayerBudgets;
use super::manifest::{ExportFile, ReductionSummary};
use super::score_set::ScoreSet;
use crate::{Method, Plan, Result, Target};

/// One export format (the module header of [`super::targets`]).
pub trait ExportTarget: Sync {
    /// The format's name: `--to`, `kvplan-export.json`'s `format`, the folder of `--to all`.
    fn name(&self) -> &'static str;
    /// The files it writes (`<m>`: one per serving length).
    fn files(&self) -> &'static [&'static str];
    /// What the files hold, for `kvplan export --help`.
    fn holds(&self) -> &'static str;
    /// What reads the files, and how (`kvplan-export.json`'s `read_by`).
    fn reader(&self) -> &'static str;
    /// What the target's engine honours for `arch` — its entry of the capability table — or
    /// why it refuses the architecture.
    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal>;
    /// Which method's budgets the files carry.
    fn budgets_of(&self) -> BudgetsOf {
        BudgetsOf::Method
    }
    /// The files of `cx` under the capability `cap`.
    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written>;
}

/// Which method's budgets (or scores) an export carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetsOf {
    /// The requested method, or [`super::request::default_method`]: any method that keeps
    /// fewer entries per head than the context.
    Method,
    /// The score set's method (`headkv-r` or `headkv`, [`ScoreSet`]): the files carry its
    /// scores.
    ScoreSet,
}

/// What a target is given: the plan, the method whose budgets travel, the length and target.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub plan: &'a Plan,
    pub arch: Arch,
    pub method: Method,
    pub n: usize,
    pub target: Target,
    pub scores: ScoreSet,
    /// Tokens per cache block; `None`: the engine's default.
    pub block_size: Option<usize>,
}

impl Context<'_> {
    /// The method's layer budgets at this length and target.
    pub fn layer_budgets(&self) -> Result<LayerBudgets> {
        LayerBudgets::of(self.plan, self.method, self.n, self.target)
    }
}

/// What a target wrote: its files, the notes for `kvplan-export.json`, and the layer-class
/// reduction when it writes windows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written {
    pub files: Vec<ExportFile>,
    pub notes: Vec<String>,
    pub reduction: Option<ReductionSummary>,
    pub scores: Option<&'static str>,
}
