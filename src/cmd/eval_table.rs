//! `kvplan eval table RECORDS…`: a run's table and results entries re-rendered from its records
//! alone (`kvplan_eval::render`), no model loaded: when the way tables are made changes
//! (intervals, tests, row order), committed tables follow their committed records.

use std::path::PathBuf;

use kvplan_app::eval::records::render_table;

/// Arguments of `kvplan eval table`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each file's table (<model>.<task>.md) is rewritten and its task's entries of <model>.results.json
replaced, next to it; kvpress's records beside it (<model>.<task>.kvpress.records.json) join the
table. Figures are not redrawn: `kvplan plot` draws them from the results file. The plan the
records were made under (their settings' plan_sha256: --plan, else the file under plans/ with that
hash) marks the rows whose budgets rest on retrieval-reasoning scores not above chance. A file
holding no records is refused, its table and results entries left as they are.

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
        let r = render_table(path, args.plan.as_deref())?;
        if let Some(why) = &r.left_out {
            eprintln!("kvplan: {why}");
        }
        eprintln!(
            "kvplan: {} records → {} and {}",
            r.records,
            r.table.display(),
            r.results.display()
        );
    }
    Ok(())
}
