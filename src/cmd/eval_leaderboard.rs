//! `kvplan eval leaderboard RECORDS… --out DIR`: RULER records of ratio runs (`kvplan eval ruler
//! --ratios …`) in the kvpress leaderboard's form (`kvplan_eval::leaderboard`), no model loaded:
//! a folder per (model, length, method, target ratio) with kvpress's `config.yaml`,
//! `metrics.json` and `predictions.csv`; `leaderboard.md`, the score against the effective ratio
//! with intervals, one section per records file; and per model the leaderboard's figure
//! (`kvplan_plots::figures::leaderboard`) into `DIR/figures/`.

use std::path::PathBuf;

use kvplan_app::eval::records::leaderboard;
use kvplan_eval::leaderboard::Selection;

/// Arguments of `kvplan eval leaderboard`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Example (after `kvplan eval ruler --ratios 0.25,0.5,0.75 --mode question-agnostic`):
  kvplan eval leaderboard results/SmolLM2-135M-Instruct.ruler.records.json --out results/lb")]
pub struct LeaderboardArgs {
    /// RULER records files (`<model>.ruler.records.json`, merged shards), one per model.
    #[arg(required = true, value_name = "RECORDS")]
    pub records: Vec<PathBuf>,
    /// Folder of the result folders, the table and the figures.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only these methods' rows, comma-separated (kvplan's names, kvpress's `kvpress-…`);
    /// FullKV is always kept [default: every method in the records].
    #[arg(long, value_delimiter = ',', value_name = "METHODS")]
    pub methods: Option<Vec<String>>,
    /// Only the prompts every row holds, so each row's average is over the same prompts (while
    /// one side of a comparison still covers fewer prompts than the other).
    #[arg(long)]
    pub common_prompts: bool,
    /// The method the second Δ column pairs every row with at the same target (kvplan's name or
    /// kvpress's `kvpress-…`, e.g. the strongest press of the other side) [default: snapkv].
    #[arg(long, value_name = "METHOD")]
    pub versus: Option<String>,
    /// Only the rows at these target ratios, comma-separated (e.g. 0.25,0.5,0.75 while a fourth
    /// ratio still covers fewer prompts) [default: every target in the records].
    #[arg(long, value_delimiter = ',', value_name = "RATIOS")]
    pub ratios: Option<Vec<f64>>,
    /// The plan a records file was made under, when it is not where kvplan keeps plans (a plan
    /// of your own, or a variant's); given once per such file, each matched to the records that
    /// name its SHA-256. It decides the rows' marks († / §) [default: the plan with the records'
    /// hash under `plans/`, the per-user plans folder or those shipped with kvplan].
    #[arg(long, value_name = "FILE")]
    pub plan: Vec<PathBuf>,
}

/// Runs `kvplan eval leaderboard`.
pub fn run(args: LeaderboardArgs) -> anyhow::Result<()> {
    let selection = Selection {
        methods: args.methods,
        common_prompts: args.common_prompts,
        versus: args.versus,
        ratios: args.ratios,
    };
    let lb = leaderboard(&args.records, &args.plan, &args.out, &selection)?;
    super::write_stdout(&lb.markdown)?;
    eprintln!(
        "kvplan: {} result folders, table {}, {} figure files in {}",
        lb.folders,
        lb.table.display(),
        lb.figures,
        lb.figures_dir.display()
    );
    Ok(())
}
