//! `kvplan eval without IN OUT ROW…`: a copy of a records file without some rows' cells
//! (`kvplan_eval::without`), so that a run into the copy measures them again.

use std::path::PathBuf;

use kvplan_app::eval::records::records_without;

/// Arguments of `kvplan eval without`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Rows: METHOD (every cell of it: trtllm:headkv-r, headkv@perm1), METHOD@BUDGET, METHOD@RATIO.

Example:
  kvplan eval without R/M.niah.records.json rerun/M.niah.records.json vllm:pyramid@512 headkv@0.25")]
pub struct WithoutArgs {
    /// The records file to copy.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The copy (must not exist).
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// Rows whose cells the copy leaves out.
    #[arg(required = true, value_name = "ROW")]
    pub rows: Vec<String>,
}

/// Runs `kvplan eval without`.
pub fn run(args: WithoutArgs) -> anyhow::Result<()> {
    let (dropped, kept) = records_without(&args.input, &args.out, &args.rows)?;
    eprintln!(
        "kvplan: {}: {dropped} cells dropped, {kept} kept → {}",
        args.input.display(),
        args.out.display()
    );
    Ok(())
}
