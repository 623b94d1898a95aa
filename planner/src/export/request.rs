//! `kvplan export`: a plan in the files serving engines and the KV-compression packages read, at
//! one context length, as the capability table says each honours it for the plan's architecture
//! ([`super::capability`]). What to export is a [`Request`]; the format's target
//! ([`super::targets`], one file per format, listed in its table) writes the files, and
//! [`export`] adds the manifest ([`super::manifest`]) that goes beside them.
//!
//! Budgets come from one method of the plan (`method`; default the first of `headkv-r`,
//! `pyramid`, `headkv`, `snapkv` the plan holds); `duo` and `headkv` use the score set's method
//! ([`super::target::BudgetsOf`]). PoD is refused: it keeps every token and shares distant
//! keys, which no format expresses. With `memory` ([`super::deploy`]) the target is the largest
//! budget whose cache fits.

use super::capability::Arch;
use super::deploy::{self, Memory};
use super::manifest::{Export, Honours, Manifest};
use super::score_set::ScoreSet;
use super::target::{BudgetsOf, Context};
use super::targets::Format;
use crate::{Error, Method, Plan, Result, Target};

/// What to export.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub format: Format,
    /// The method whose budgets are exported; `None`: the default (module header).
    pub method: Option<Method>,
    /// Context length the budgets are for.
    pub context_len: usize,
    /// Budget target; `None`: the plan's.
    pub target: Option<Target>,
    /// Score set of the `headkv` and `duo` exports.
    pub scores: ScoreSet,
    /// Tokens per cache block; `None`: the engine's default (16 vLLM, 32 TensorRT-LLM).
    pub block_size: Option<usize>,
    /// A deployment to fit: the target becomes the largest budget whose cache fits.
    pub memory: Option<Memory>,
}

/// The method whose budgets an export uses when none is named.
pub fn default_method(plan: &Plan) -> Result<Method> {
    let methods = plan.methods();
    [
        Method::HeadKvR,
        Method::Pyramid,
        Method::HeadKv,
        Method::SnapKv,
    ]
    .into_iter()
    .find(|m| methods.contains(m))
    .ok_or_else(|| {
        Error::invalid(
            "sections",
            "a headkv-r, pyramid, headkv or snapkv section to export budgets from",
            "none of them",
        )
    })
}

/// The method whose budgets (or scores) `req` exports, refused where no budget travels.
fn method_of(plan: &Plan, req: &Request) -> Result<Method> {
    let method = match (req.format.target().budgets_of(), req.method) {
        (BudgetsOf::ScoreSet, _) => return Ok(req.scores.method()),
        (BudgetsOf::Method, Some(m)) => m,
        (BudgetsOf::Method, None) => default_method(plan)?,
    };
    if method == Method::Pod || method == Method::Full {
        return Err(Error::invalid(
            "--method",
            "a method that keeps fewer entries per head (not pod or full)",
            method,
        ));
    }
    if !plan.methods().contains(&method) {
        return Err(Error::invalid(
            format!("sections.{method}"),
            "a section for the exported method",
            "none",
        ));
    }
    Ok(method)
}

/// The export `req` asks of `plan` (module header): the format's target writes its files under
/// the capability entry for the plan's architecture, at the request's target or the one
/// `memory` fits.
pub fn export(plan: &Plan, req: &Request) -> Result<Export> {
    if req.context_len == 0 {
        return Err(Error::invalid("--context-len", "at least 1 token", 0));
    }
    let arch = Arch::of(&plan.model.architecture)?;
    let target = req.format.target();
    let cap = target.capability(arch)?;
    let mut cx = Context {
        plan,
        arch,
        method: method_of(plan, req)?,
        n: req.context_len,
        target: req.target.unwrap_or(plan.target),
        scores: req.scores,
        block_size: req.block_size,
    };
    let mut notes = Vec::new();
    if let Some(memory) = &req.memory {
        let (fitted, note) = deploy::fit(&cx, &cap, memory)?;
        cx.target = fitted;
        notes.push(note);
    }
    cx.target.validate("target")?;
    let written = target.write(&cx, &cap)?;
    notes.extend(written.notes);
    Ok(Export {
        files: written.files,
        manifest: Manifest {
            format: target.name(),
            read_by: target.reader(),
            model: plan.model.name.clone(),
            architecture: plan.model.architecture.clone(),
            honours: Honours::of(&cap),
            model_gguf_sha256: plan.model.gguf_sha256.clone(),
            method: cx.method.to_string(),
            context_len: cx.n,
            target: cx.target,
            scores: written.scores,
            reduction: written.reduction,
            notes,
        },
    })
}
