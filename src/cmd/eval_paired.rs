//! `kvplan eval paired RECORDS_A ROW_A RECORDS_B ROW_B`: two rows of NIAH or RULER records
//! compared on the prompts both scored, with the tables' statistics, or two rows of a perplexity
//! run as a perplexity ratio (`kvplan_eval::paired`), no model loaded.

use std::path::PathBuf;

use kvplan_app::eval::records::paired_rows;

/// Arguments of `kvplan eval paired`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Rows: METHOD (full), METHOD@BUDGET, METHOD@RATIO; a method may hold '@' itself (headkv@perm1,
headkv-r@beta2@128: the part after the last '@' is a budget or ratio only when it is a number).

Examples:
  kvplan eval paired R.ruler.records.json headkv-r@512 R.ruler.records.json headkv@512
  kvplan eval paired aware/M.ruler.records.json snapkv@0.5 agnostic/M.ruler.records.json snapkv@0.5
  kvplan eval paired P/M.ppl.records.json treekv@256 P/M.ppl.records.json streaming@256")]
pub struct PairedArgs {
    /// Records file of row A.
    #[arg(value_name = "RECORDS_A")]
    pub records_a: PathBuf,
    /// Row A.
    #[arg(value_name = "ROW_A")]
    pub a: String,
    /// Records file of row B (the same file for two rows of one run).
    #[arg(value_name = "RECORDS_B")]
    pub records_b: PathBuf,
    /// Row B.
    #[arg(value_name = "ROW_B")]
    pub b: String,
    /// A perplexity run's text (its file name) to compare on alone [default: every text both
    /// rows streamed].
    #[arg(long, value_name = "NAME")]
    pub text: Option<String>,
}

/// Runs `kvplan eval paired`.
pub fn run(args: PairedArgs) -> anyhow::Result<()> {
    let line = paired_rows(
        (&args.records_a, &args.a),
        (&args.records_b, &args.b),
        args.text.as_deref(),
    )?;
    super::write_stdout(&format!("{line}\n"))
}
