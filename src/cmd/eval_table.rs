//! `kvplan eval table RECORDS…`: a run's table and results entries re-rendered from its records
//! alone (`kvplan_eval::render`), no model loaded: when the way tables are made changes
//! (intervals, tests, row order), committed tables follow their committed records.

use std::path::{Path, PathBuf};

use anyhow::Context;
use kvplan_common::fetch::sha256_file;
use kvplan_eval::render::{plan_sha256, render};
use kvplan_planner::Plan;

/// Arguments of `kvplan eval table`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each file's table (<model>.<task>.md) is rewritten and its task's entries of <model>.results.json
replaced, next to it; kvpress's records beside it (<model>.<task>.kvpress.records.json) join the
table. Figures are not redrawn: `kvplan plot` draws them from the results file. The plan the
records were made under (their settings' plan_sha256: --plan, else the file under plans/ with that
hash) marks the rows whose budgets rest on retrieval-reasoning scores not above chance.

Example:
  kvplan eval table results/v2/question-end/SmolLM2-135M-Instruct.niah.records.json")]
pub struct TableArgs {
    /// Records files of NIAH or RULER runs (`<model>.niah.records.json`,
    /// `<model>.ruler.records.json`).
    #[arg(required = true, value_name = "RECORDS")]
    pub records: Vec<PathBuf>,
    /// The plan the records were made under [default: the file under `plans/` whose SHA-256 the
    /// records name].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
}

/// Runs `kvplan eval table`.
pub fn run(args: TableArgs) -> anyhow::Result<()> {
    for path in &args.records {
        let plan = plan_of(path, args.plan.as_deref())?;
        let r =
            render(path, plan.as_ref()).with_context(|| format!("rendering {}", path.display()))?;
        eprintln!(
            "kvplan: {} records → {} and {}",
            r.records,
            r.table.display(),
            r.results.display()
        );
    }
    Ok(())
}

/// The plan the records at `path` were made under: `explicit` (its hash must be theirs), else
/// the plan under `plans/` with their hash; `None`, with a note, when they name none or no file
/// has it.
fn plan_of(path: &Path, explicit: Option<&Path>) -> anyhow::Result<Option<Plan>> {
    let Some(want) = plan_sha256(path).with_context(|| format!("reading {}", path.display()))?
    else {
        return Ok(None);
    };
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_path_buf()],
        None => std::fs::read_dir("plans")
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.to_string_lossy().ends_with(".plan.json"))
                    .collect()
            })
            .unwrap_or_default(),
    };
    for file in &candidates {
        let have = sha256_file(file).with_context(|| format!("hashing {}", file.display()))?;
        if have == want {
            let plan =
                Plan::load(file, None).with_context(|| format!("reading {}", file.display()))?;
            return Ok(Some(plan));
        }
        if explicit.is_some() {
            anyhow::bail!(
                "{}: plan_sha256 {have}, but {} were made under plan_sha256 {want}",
                file.display(),
                path.display()
            );
        }
    }
    eprintln!(
        "kvplan: note: {} were made under a plan (sha256 {want}) not found under plans/; rows are \
         not checked for retrieval-reasoning scores at chance (give --plan)",
        path.display()
    );
    Ok(None)
}
