//! Which figures a file implies, and what kind of file it is.
//!
//! - profile → `heads` (both score sets side by side), `heads-retrieval`, `heads-r2`,
//!   `layer-similarity`, `wavelet`, `funnel`, `kv-redundancy`;
//! - plan → `plan-pyramid`, `plan-spindle`, `plan-headkv`, `plan-pod` (those it has sections
//!   for), at one context length;
//! - results → `niah-<method>-<budget>` (one per method and budget), `quality-vs-kv`,
//!   `ppl-vs-position` (those it has data for).

use crate::figures::funnel::Funnel;
use crate::figures::heads::Heads;
use crate::figures::niah::Niah;
use crate::figures::perplexity::Perplexity;
use crate::figures::plan_heads::HeadBudgets;
use crate::figures::plan_layers::LayerBudgets;
use crate::figures::plan_pod::PodBlocks;
use crate::figures::quality::{first_seen, Quality};
use crate::figures::redundancy::Redundancy;
use crate::figures::similarity::{Blocks, LayerSimilarity};
use crate::figures::wavelet::{ByPosition, Wavelet};
use crate::render::{render, Format, Rendered};
use crate::results::EvalResults;
use crate::{Error, Result};
use kvplan_planner::methods::pod;
use kvplan_planner::methods::pod::DEFAULT_POD_DELTA;
use kvplan_planner::{Method, Plan, PodSection, Profile};

/// What a JSON file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Profile,
    Plan,
    Results,
}

/// Tells a profile, a plan and a results file apart by their top-level fields.
pub fn detect(text: &str) -> Result<FileKind> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Error::UnknownKind(format!(
            "not a JSON file ({e}); expected a profile, plan or results file"
        ))
    })?;
    let Some(obj) = value.as_object() else {
        return Err(Error::UnknownKind(String::from(
            "the JSON is not an object; expected a profile, plan or results file",
        )));
    };
    let has = |k: &str| obj.contains_key(k);
    if has("sections") {
        Ok(FileKind::Plan)
    } else if has("retrieval_reasoning") || has("layer_similarity") {
        Ok(FileKind::Profile)
    } else if has("niah") || has("quality") || has("perplexity") {
        Ok(FileKind::Results)
    } else {
        Err(Error::UnknownKind(String::from(
            "not a profile, plan or results file: expected a top-level `sections` (plan), \
             `retrieval_reasoning` (profile) or `niah` / `quality` / `perplexity` (results)",
        )))
    }
}

/// A plan figure not drawn at the context length asked for, and why; `drawn_at` is the shorter
/// context it was drawn at instead, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct Skipped {
    pub figure: String,
    pub reason: String,
    pub drawn_at: Option<usize>,
}

/// What a profile's figures can use besides the profile itself.
#[derive(Clone, Debug, Default)]
pub struct ProfileExtras<'a> {
    /// PoD section of a plan for the same model: its blocks are outlined on the
    /// layer-similarity matrices (without it, the greedy rule's blocks at the default δ).
    pub pod: Option<&'a PodSection>,
    /// Wavelet magnitudes by position ([`ByPosition::from_profile_json`]).
    pub wavelet_by_position: Option<ByPosition>,
}

/// The profile's figures.
pub fn profile_figures(
    p: &Profile,
    extras: &ProfileExtras,
    format: Format,
) -> Result<Vec<Rendered>> {
    let pod = extras.pod;
    let blocks = match pod {
        Some(s) => Blocks {
            blocks: s.blocks.clone(),
            source: format!("from the plan, δ = {}", s.delta),
        },
        None => Blocks {
            blocks: pod::blocks(
                &p.layer_similarity.per_head,
                DEFAULT_POD_DELTA,
                &p.model.geometry,
                pod::Grouping::QueryHead,
            ),
            source: format!("greedy rule at δ = {DEFAULT_POD_DELTA}"),
        },
    };
    Ok(vec![
        render(&Heads::side_by_side(p), format)?,
        render(&Heads::retrieval(p), format)?,
        render(&Heads::r2(p), format)?,
        render(&LayerSimilarity::new(p, Some(blocks)), format)?,
        render(&Wavelet::new(p, extras.wavelet_by_position.clone()), format)?,
        render(&Funnel::new(p), format)?,
        render(&Redundancy::new(p), format)?,
    ])
}

/// Context length plan figures use by default: the plan's preview length, else 8192.
pub fn default_context_len(plan: &Plan) -> usize {
    plan.preview.as_ref().map_or(8192, |p| p.context_len)
}

/// The plan's figures at `context_len`. A figure whose rule has no budgets there (SpindleKV when
/// the retain ratio is below β) is drawn at the longest halved context where it has some, or
/// skipped; either way it is listed with the planner's reason.
pub fn plan_figures(
    plan: &Plan,
    context_len: usize,
    format: Format,
) -> Result<(Vec<Rendered>, Vec<Skipped>)> {
    let methods = plan.methods();
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut skip = |figure: &str, e: Error, drawn_at: Option<usize>| -> Result<()> {
        match e {
            Error::Planner(e @ kvplan_planner::Error::Budget { .. }) => {
                skipped.push(Skipped {
                    figure: figure.to_string(),
                    reason: e.to_string(),
                    drawn_at,
                });
                Ok(())
            }
            other => Err(other),
        }
    };
    for (m, name) in [
        (Method::Pyramid, "plan-pyramid"),
        (Method::Spindle, "plan-spindle"),
    ] {
        if !methods.contains(&m) {
            continue;
        }
        match LayerBudgets::new(plan, m, context_len) {
            Ok(fig) => out.push(render(&fig, format)?),
            Err(e) => {
                let shorter = shorter_context(plan, m, context_len);
                if let Some(n) = shorter {
                    out.push(render(&LayerBudgets::new(plan, m, n)?, format)?);
                }
                skip(name, e, shorter)?
            }
        }
    }
    match HeadBudgets::new(plan, context_len) {
        Ok(Some(fig)) => out.push(render(&fig, format)?),
        Ok(None) => {}
        Err(e) => skip("plan-headkv", e, None)?,
    }
    if methods.contains(&Method::Pod) {
        out.push(render(&PodBlocks::new(plan)?, format)?);
    }
    Ok((out, skipped))
}

/// The longest of n/2, n/4, … (still above the per-head budget) where `method` has budgets.
fn shorter_context(plan: &Plan, method: Method, n: usize) -> Option<usize> {
    let mut m = n / 2;
    while m > plan.target.per_head(m) {
        if plan.budgets_at(method, m).is_ok() {
            return Some(m);
        }
        m /= 2;
    }
    None
}

/// The results' figures.
pub fn results_figures(r: &EvalResults, format: Format) -> Result<Vec<Rendered>> {
    let mut out = Vec::new();
    let runs = first_seen(r.niah.iter().map(|c| (c.method.clone(), c.budget)));
    for (method, budget) in runs {
        out.push(render(
            &Niah::new(&r.model, &method, budget, &r.niah),
            format,
        )?);
    }
    if !r.quality.is_empty() {
        out.push(render(&Quality::new(&r.model, &r.quality), format)?);
    }
    if !r.perplexity.is_empty() {
        out.push(render(&Perplexity::new(&r.model, &r.perplexity), format)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_kind_by_its_fields() {
        assert_eq!(detect(r#"{"sections": {}}"#).ok(), Some(FileKind::Plan));
        assert_eq!(
            detect(r#"{"retrieval_reasoning": {}}"#).ok(),
            Some(FileKind::Profile)
        );
        assert_eq!(detect(r#"{"niah": []}"#).ok(), Some(FileKind::Results));
        let err = |t: &str| detect(t).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err(r#"{"x": 1}"#).starts_with("not a profile, plan or results file"));
        assert!(err("[1]").contains("not an object"));
        assert!(err("{").starts_with("not a JSON file"));
    }
}
