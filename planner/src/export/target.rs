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
    /// The format's name, its files, what they hold and what reads them: the one place a
    /// target states them.
    fn about(&self) -> About;
    /// The format's name ([`About::name`]).
    fn name(&self) -> &'static str {
        self.about().name
    }
    /// The files it writes ([`About::files`]).
    fn files(&self) -> &'static [&'static str] {
        self.about().files
    }
    /// What the files hold ([`About::holds`]).
    fn holds(&self) -> &'static str {
        self.about().holds
    }
    /// What reads the files ([`About::reader`]).
    fn reader(&self) -> &'static str {
        self.about().reader
    }
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

/// What a format says about itself, for `--to`, `kvplan export --help` and the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct About {
    /// The format's name: `--to`, `kvplan-export.json`'s `format`, the folder of `--to all`.
    pub name: &'static str,
    /// The files it writes (`<m>`: one per serving length).
    pub files: &'static [&'static str],
    /// What the files hold, for `kvplan export --help`.
    pub holds: &'static str,
    /// What reads the files, and how (`kvplan-export.json`'s `read_by`).
    pub reader: &'static str,
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
