//! `kvplan eval agree A B [--as A_METHOD=B_METHOD]… [--show N]`: two records files on the cells
//! they share (`kvplan_eval::agree`), no model loaded; exits 1 when a shared cell's text differs.

use std::path::PathBuf;

use kvplan_app::eval::records::records_agree;

/// Arguments of `kvplan eval agree`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  kvplan eval agree kvpress-h100/M.ruler.kvpress.records.json M.ruler.kvpress.records.json
  kvplan eval agree M.ruler.records.json M.ruler.kvpress.records.json --as snapkv=kvpress-snapkv")]
pub struct AgreeArgs {
    /// Records file A.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// Records file B.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Pair A's method with B's of another name (the same method under two names).
    #[arg(long = "as", value_name = "A_METHOD=B_METHOD")]
    pub renames: Vec<String>,
    /// Differing cells listed per method.
    #[arg(long, default_value_t = 5)]
    pub show: usize,
}

/// Runs `kvplan eval agree`.
pub fn run(args: AgreeArgs) -> anyhow::Result<()> {
    let (table, differ) = records_agree(&args.a, &args.b, &args.renames, args.show)?;
    super::write_stdout(&table)?;
    if differ {
        anyhow::bail!("shared cells differ in their answer text (listed above)");
    }
    Ok(())
}
