//! Profile → plan: the sections of the methods asked for, each built by its method's module
//! (`methods/`) with the papers' defaults.
//! Pure: the same profile, methods, target and options always give the same plan (and bytes).
//!
//! The measurements a section carries only for readers and figures — PyramidKV's funnel
//! (`docs/papers/pyramidkv.md` §3), SpindleKV's redundancy (`docs/papers/spindlekv.md` §3.2),
//! TreeKV's wavelet magnitudes (`docs/papers/treekv.md` §3.3) — are written with
//! [`EVIDENCE_DIGITS`] significant digits. They come from float sums over thousands of attention
//! rows, whose last digits move with the summation order of a rebuilt runtime (seen: ~1e-9
//! relative); rounded, that noise rarely reaches the plan's bytes (a value at a rounding boundary,
//! or a count crossing a threshold, still can). Inputs of the budget rules (head scores, layer
//! similarities through PoD's blocks) are kept as measured.

use crate::budgets::Target;
use crate::chance;
use crate::methods::headkv::HeadKvOptions;
use crate::methods::pod::PodOptions;
use crate::methods::pyramid::PyramidOptions;
use crate::methods::snapkv::DEFAULT_WINDOW;
use crate::methods::spindle::SpindleOptions;
use crate::methods::treekv::TreeKvOptions;
use crate::methods::Section;
use crate::plan::{Plan, Provenance, PLAN_SCHEMA_VERSION};
use crate::profile::Profile;
use crate::sections::Sections;
use crate::semantics::{self, BudgetSemantics};
use crate::{Error, Method, Result};

/// Significant digits of the measurements a plan carries for readers (see the module header).
pub const EVIDENCE_DIGITS: usize = 6;

/// `x` to [`EVIDENCE_DIGITS`] significant digits: the decimal rounding of its exact value, read
/// back as the nearest `f64`, so it prints as at most that many digits.
pub fn evidence(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{:.*e}", EVIDENCE_DIGITS - 1, x)
        .parse()
        .unwrap_or(x)
}

/// Options of [`build_plan`]; `Default` gives the papers' settings. Options that belong to one
/// method are in that method's option struct (`methods/<name>.rs`).
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOptions {
    /// kvplan version recorded in the provenance.
    pub kvplan_version: String,
    /// Date recorded in the provenance, `YYYY-MM-DD` (an input, so output is reproducible).
    pub date: String,
    /// Context length of the preview; `None` writes no preview.
    pub preview_context_len: Option<usize>,
    /// Observation window α of every SnapKV-style method (equal for all, docs/design.md).
    pub window: usize,
    /// PyramidKV's options.
    pub pyramid: PyramidOptions,
    /// HeadKV's options (both score sources).
    pub headkv: HeadKvOptions,
    /// SpindleKV's options.
    pub spindle: SpindleOptions,
    /// PoD's options.
    pub pod: PodOptions,
    /// TreeKV's options.
    pub treekv: TreeKvOptions,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
            date: String::from("1970-01-01"),
            preview_context_len: None,
            window: DEFAULT_WINDOW,
            pyramid: PyramidOptions::default(),
            headkv: HeadKvOptions::default(),
            spindle: SpindleOptions::default(),
            pod: PodOptions::default(),
            treekv: TreeKvOptions::default(),
        }
    }
}

/// Builds and validates a plan holding a section for each of `methods` (built by each method's
/// module, `methods/`). FullKV has no section: asking for it is an error.
pub fn build_plan(
    profile: &Profile,
    methods: &[Method],
    target: Target,
    opts: &PlanOptions,
) -> Result<Plan> {
    profile.validate()?;
    let mut sections = Sections::default();
    for &m in methods {
        let section = Section::build(m, profile, opts)?.ok_or(Error::NoSection(m))?;
        sections.insert(section);
    }
    let mut plan = Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        model: profile.model.clone(),
        provenance: Provenance {
            kvplan_version: opts.kvplan_version.clone(),
            date: opts.date.clone(),
            profile: profile.settings.clone(),
        },
        target,
        budget_semantics: BudgetSemantics::of(&sections.methods()),
        notes: semantics::notes(&profile.model.geometry, &sections.methods())
            .into_iter()
            .chain(chance::plan_note(&profile.settings, &sections.methods()))
            .collect(),
        sections,
        preview: None,
    };
    plan.validate()?;
    if let Some(n) = opts.preview_context_len {
        plan.preview = Some(plan.make_preview(n));
    }
    Ok(plan)
}
