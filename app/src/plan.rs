//! `kvplan plan`'s building half: a profile, the methods and the target in, a validated plan
//! written atomically out, with the papers' defaults for every option not given
//! (`kvplan_planner::build_plan` does the planning; this module checks the request and names the
//! files in its errors).

use std::path::PathBuf;

use anyhow::{bail, Context};
use kvplan_planner::methods::headkv::HeadKvOptions;
use kvplan_planner::methods::pod::{Grouping, PodOptions};
use kvplan_planner::methods::spindle::SpindleOptions;
use kvplan_planner::{build_plan, Method, Plan, PlanOptions, Profile, Target};

/// What to plan.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// The profile to plan from.
    pub profile: PathBuf,
    /// `--budget N`: entries per (layer, KV head).
    pub budget: Option<usize>,
    /// `--ratio R`: share of the prompt kept per head.
    pub ratio: Option<f64>,
    /// The methods, in any order (the plan lists them in table order).
    pub methods: Vec<Method>,
    /// Where to write the plan; `None` is an error naming `--out`.
    pub out: Option<PathBuf>,
    /// Prompt length of the plan's preview.
    pub context_len: usize,
    /// PoD's δ, or the saving that chooses it, and its grouping.
    pub pod_delta: f64,
    pub pod_saving: Option<f64>,
    pub pod_blocks: Grouping,
    /// HeadKV's β for `headkv`, and for `headkv-r` when given.
    pub headkv_beta: f64,
    pub headkv_r_beta: Option<f64>,
    /// SpindleKV's codebook split.
    pub spindle_split: Option<usize>,
    /// Provenance date; `None`: today (UTC).
    pub date: Option<String>,
}

/// Builds the plan the request asks for and writes it to `out` (atomically); returns it with the
/// path it was written to.
pub fn build(req: &PlanRequest) -> anyhow::Result<(Plan, PathBuf)> {
    let target = match (req.budget, req.ratio) {
        (Some(n), None) => Target::Tokens(n),
        (None, Some(r)) => Target::Ratio(r),
        _ => bail!("give the budget target: --budget N (entries per head) or --ratio R"),
    };
    let Some(out) = &req.out else {
        bail!("give --out FILE: where to write the plan");
    };
    for (flag, beta) in [
        ("--headkv-beta", Some(req.headkv_beta)),
        ("--headkv-r-beta", req.headkv_r_beta),
    ] {
        if let Some(b) = beta.filter(|b| !(b.is_finite() && *b >= 1.0)) {
            bail!("{flag}: expected a number >= 1 (HeadKV eq. 4: the pool is b/β), found {b}");
        }
    }
    let profile = Profile::load(&req.profile)
        .with_context(|| format!("cannot read profile {}", req.profile.display()))?;
    let plan = build_plan(&profile, &req.methods, target, &options(req))
        .with_context(|| format!("cannot plan from profile {}", req.profile.display()))?;
    plan.save(out)
        .with_context(|| format!("cannot write plan {}", out.display()))?;
    Ok((plan, out.clone()))
}

/// The planner's options: the request's, the papers' defaults for the rest.
fn options(req: &PlanRequest) -> PlanOptions {
    PlanOptions {
        kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
        date: req.date.clone().unwrap_or_else(crate::dates::today),
        preview_context_len: Some(req.context_len),
        pod: PodOptions {
            delta: req.pod_delta,
            target_saving: req.pod_saving,
            grouping: req.pod_blocks,
            ..PodOptions::default()
        },
        spindle: SpindleOptions {
            split: req.spindle_split,
            ..SpindleOptions::default()
        },
        headkv: HeadKvOptions {
            beta: req.headkv_beta,
            beta_r: req.headkv_r_beta,
            ..HeadKvOptions::default()
        },
        ..PlanOptions::default()
    }
}
