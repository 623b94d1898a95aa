//! Profile → plan: the sections of the methods asked for, each built by its method's module
//! (`methods/`) with the papers' defaults.
//! Pure: the same profile, methods, target and options always give the same plan (and bytes).

//! The measurements a section carries only for readers are rounded ([`evidence`]).

use crate::budgets::Target;
use crate::chance;
use crate::methods::Section;
use crate::plan::{Plan, Provenance, PLAN_SCHEMA_VERSION};
use crate::profile::Profile;
use crate::sections::Sections;
use crate::semantics::{self, BudgetSemantics};
use crate::{Error, Method, Result};

pub use crate::methods::rules::{evidence, EVIDENCE_DIGITS};
pub use crate::methods::PlanOptions;

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
            .chain(chance::plan_note(
                profile.settings.retrieval_reasoning_chance.as_ref(),
                &sections.methods(),
            ))
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
