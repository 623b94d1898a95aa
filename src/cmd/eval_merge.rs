//! `kvplan eval merge RECORDS… --out DIR`: the records files of a run's shards (`--shard i/n`)
//! joined by cell key into the whole run's records file (`kvplan_eval::shard::merge`), no model
//! loaded. Files made under different settings are refused, as are two copies of a cell that
//! differ. The merged file takes the whole run's name (`.shard-i-of-n` dropped); an existing file
//! of that name is merged into only when listed among the inputs. A shard not started yet (no
//! records) merges with the others; files that hold no record between them are refused.

use std::path::PathBuf;

use kvplan_app::eval::records::merge_shards;

/// Arguments of `kvplan eval merge`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Example (a RULER run split in two, then its table):
  kvplan eval ruler --ratios 0.25,0.5,0.75 --mode question-agnostic --shard 1/2 --out runs/a
  kvplan eval ruler --ratios 0.25,0.5,0.75 --mode question-agnostic --shard 2/2 --out runs/b
  kvplan eval merge runs/a/M.ruler.shard-1-of-2.records.json \\
      runs/b/M.ruler.shard-2-of-2.records.json --out results/lb
  kvplan eval table results/lb/M.ruler.records.json")]
pub struct MergeArgs {
    /// Records files of one run's shards (NIAH or RULER), or earlier merges of them.
    #[arg(required = true, value_name = "RECORDS")]
    pub records: Vec<PathBuf>,
    /// Folder of the merged records file.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Runs `kvplan eval merge`.
pub fn run(args: MergeArgs) -> anyhow::Result<()> {
    let m = merge_shards(&args.records, &args.out)?;
    eprintln!(
        "kvplan: {} records from {} files → {}; its table: kvplan eval table {}",
        m.records,
        m.files,
        m.out.display(),
        m.out.display()
    );
    Ok(())
}
