//! `kvplan plan`: profile → plan, and reading a plan back (summary). Exports: `kvplan export`.
//!
//! Build: `kvplan plan --profile P.json (--budget N | --ratio R) --method pyramid,headkv --out
//! plan.json`. Read: `kvplan plan --summary plan.json`.

use anyhow::{bail, Context};
use kvplan_app::plan::PlanRequest;
use kvplan_planner::export::summary;
use kvplan_planner::methods::headkv::DEFAULT_HEADKV_BETA;
use kvplan_planner::methods::pod::{Grouping, DEFAULT_POD_DELTA};
use kvplan_planner::{Method, Plan};
use std::path::{Path, PathBuf};

/// Arguments of `kvplan plan`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  kvplan plan --profile plans/smollm2.profile.json --budget 128 --method all --out plans/smollm2.plan.json
  kvplan plan --profile P.json --ratio 0.125 --method pyramid,headkv,pod --out plan.json --summary
  kvplan plan --summary plans/smollm2.plan.json --context-len 4096
Exports for serving engines, kvpress, DuoAttention and HeadKV: kvplan export --help")]
pub struct PlanArgs {
    /// Profile to build a plan from (written by `kvplan profile`).
    #[arg(long, value_name = "FILE")]
    profile: Option<PathBuf>,
    /// Target: entries per (layer, KV head), observation window included.
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    budget: Option<usize>,
    /// Target: share of the prompt kept per head, 0 < R <= 1.
    #[arg(long, value_name = "R")]
    ratio: Option<f64>,
    /// Methods to plan, comma-separated, or all (the method table):
    #[arg(
        long,
        value_name = "M",
        value_delimiter = ',',
        default_value = "all",
        long_help = method_help()
    )]
    method: Vec<String>,
    /// Prompt length of the plan's preview and of the summary.
    #[arg(long, value_name = "L", default_value_t = 8192)]
    context_len: usize,
    /// Where to write the plan (atomically).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the per-layer, per-KV-head budgets and KV bytes vs FullKV: of the plan just built,
    /// or of the plan FILE.
    #[arg(long, value_name = "PLAN", num_args = 0..=1)]
    summary: Option<Option<PathBuf>>,
    /// PoD similarity threshold δ (1 − JS, base 2).
    #[arg(long, value_name = "D", default_value_t = DEFAULT_POD_DELTA)]
    pod_delta: f64,
    /// Choose PoD's δ for this saving (fraction of (layer, KV head) key slots) instead.
    #[arg(long, value_name = "S")]
    pod_saving: Option<f64>,
    /// PoD's blocks per query head (the paper's head-wise blocks) or per KV head (Algorithm 1 on
    /// the least similarity of its query heads, shared by them). On a GQA model a KV head drops
    /// distant keys only where none of its query heads starts a block, so query-head blocks save
    /// nothing on Qwen2.5 (7 query heads per KV head) or Gemma 3 (4): use kv-head there.
    #[arg(long, value_name = "G", default_value = "query-head")]
    pod_blocks: Grouping,
    /// HeadKV's β (eq. 4) for `headkv`: the pool is B = b/β per head, the rest of b fixed;
    /// smaller β, a larger pool (HeadKV §3.2; the authors' scripts use 1.01).
    #[arg(long, value_name = "X", default_value_t = DEFAULT_HEADKV_BETA)]
    headkv_beta: f64,
    /// β for `headkv-r` [default: --headkv-beta].
    #[arg(long, value_name = "X")]
    headkv_r_beta: Option<f64>,
    /// SpindleKV option: apply the codebook only in layers below K (default: every layer).
    #[arg(long, value_name = "K")]
    spindle_split: Option<usize>,
    /// Bytes per cached number in the summary (f32 = 4, f16 = 2).
    #[arg(long, value_name = "B", default_value_t = 4)]
    bytes_per_element: usize,
    /// Date written in the provenance, YYYY-MM-DD (default: today, UTC).
    #[arg(long, value_name = "DATE")]
    date: Option<String>,
}

/// Runs `kvplan plan`.
pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    let (plan, built) = match (&args.profile, &args.summary) {
        (Some(profile), _) => (build(&args, profile)?, true),
        (None, Some(Some(path))) => {
            let plan = Plan::load(path, None)
                .with_context(|| format!("cannot read plan {}", path.display()))?;
            (plan, false)
        }
        _ => bail!("give --profile FILE to build a plan, or --summary PLAN to read one"),
    };
    if built {
        for m in plan.methods() {
            if let Err(e) = plan.budgets_at(m, args.context_len) {
                eprintln!("warning: at context {}: {e}", args.context_len);
            }
        }
    }
    if args.summary.is_some() {
        let text = summary::summary(&plan, args.context_len, args.bytes_per_element)?;
        print!("{text}");
    }
    Ok(())
}

/// Builds and writes the plan (`kvplan_app::plan`), saying what it wrote.
fn build(args: &PlanArgs, profile: &Path) -> anyhow::Result<Plan> {
    let (plan, out) = kvplan_app::plan::build(&PlanRequest {
        profile: profile.to_path_buf(),
        budget: args.budget,
        ratio: args.ratio,
        methods: parse_methods(&args.method)?,
        out: args.out.clone(),
        context_len: args.context_len,
        pod_delta: args.pod_delta,
        pod_saving: args.pod_saving,
        pod_blocks: args.pod_blocks,
        headkv_beta: args.headkv_beta,
        headkv_r_beta: args.headkv_r_beta,
        spindle_split: args.spindle_split,
        date: args.date.clone(),
    })?;
    let names: Vec<&str> = plan.methods().iter().map(|m| m.name()).collect();
    eprintln!("wrote {} ({})", out.display(), names.join(", "));
    Ok(plan)
}

fn method_help() -> String {
    format!(
        "Methods to plan, comma-separated, or all:\n{}",
        kvplan_planner::methods::help_lines(false)
    )
}

fn parse_methods(names: &[String]) -> anyhow::Result<Vec<Method>> {
    super::parse_list(names, &Method::ALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_with_all_and_duplicates() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_methods(&names(&["all"])).ok(),
            Some(Method::ALL.to_vec())
        );
        assert_eq!(
            parse_methods(&names(&["pod", "headkv", "pod"])).ok(),
            Some(vec![Method::Pod, Method::HeadKv])
        );
        assert!(parse_methods(&names(&["pyramidkv"])).is_err());
    }
}
