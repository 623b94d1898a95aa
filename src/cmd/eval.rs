//! `kvplan eval`: which task to run. Each task's arguments live in its own file
//! (`eval_niah.rs`, `eval_ppl.rs`, `eval_ruler.rs`, `eval_table.rs`, `eval_merge.rs`,
//! `eval_leaderboard.rs`, `eval_paired.rs`, `eval_agree.rs`, `eval_without.rs`), the options and the terminal side they share in `eval_shared.rs`; the
//! grids, their defaults and the runs are the application layer's (`kvplan_app::eval`).

/// Arguments of `kvplan eval`.
#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub task: EvalTask,
}

/// What to evaluate.
#[derive(clap::Subcommand, Debug)]
pub enum EvalTask {
    /// Needle in a haystack (RULER's niah template, Paul Graham essays): lengths × depths.
    Niah(super::eval_niah::NiahArgs),
    /// Streaming perplexity on Gutenberg text (TreeKV §5.2): methods that evict while decoding.
    Ppl(super::eval_ppl::PplArgs),
    /// RULER's 13 tasks at one length: niah single/multikey/multivalue/multiquery, vt, cwe, fwe,
    /// qa_1, qa_2.
    Ruler(super::eval_ruler::RulerArgs),
    /// Re-render NIAH or RULER tables and results from their records alone (no model run).
    Table(super::eval_table::TableArgs),
    /// Merge the records of a run's shards (`--shard i/n`) by cell key into one records file.
    Merge(super::eval_merge::MergeArgs),
    /// RULER ratio records in the kvpress leaderboard's form: kvpress's result folders, the
    /// score against the effective compression ratio (table and figure).
    Leaderboard(super::eval_leaderboard::LeaderboardArgs),
    /// Two rows compared on what both scored: NIAH or RULER records (two methods, or one method
    /// in two runs on the same prompts) with the tables' statistics; a perplexity run's two rows
    /// as a perplexity ratio.
    Paired(super::eval_paired::PairedArgs),
    /// Two records files on the cells they share: per method, the same text, score and
    /// effective ratio (cross-checks: CPU against GPU, a re-run against committed records).
    Agree(super::eval_agree::AgreeArgs),
    /// A copy of a records file without some rows' cells, for a run that measures them again.
    Without(super::eval_without::WithoutArgs),
}

/// Runs `kvplan eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    match args.task {
        EvalTask::Niah(a) => super::eval_niah::run(a),
        EvalTask::Ppl(a) => super::eval_ppl::run(a),
        EvalTask::Ruler(a) => super::eval_ruler::run(a),
        EvalTask::Table(a) => super::eval_table::run(a),
        EvalTask::Merge(a) => super::eval_merge::run(a),
        EvalTask::Leaderboard(a) => super::eval_leaderboard::run(a),
        EvalTask::Paired(a) => super::eval_paired::run(a),
        EvalTask::Agree(a) => super::eval_agree::run(a),
        EvalTask::Without(a) => super::eval_without::run(a),
    }
}
