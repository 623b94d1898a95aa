//! `kvplan eval merge RECORDS… --out DIR`: the records files of a run's shards (`--shard i/n`)
//! joined by cell key into the whole run's records file (`kvplan_eval::shard::merge`), no model
//! loaded. Files made under different settings are refused, as are two copies of a cell that
//! differ. The merged file takes the whole run's name (`.shard-i-of-n` dropped); an existing file
//! of that name is merged into only when listed among the inputs.

use std::path::PathBuf;

use anyhow::{bail, Context};
use kvplan_eval::records::{Record, RecordsFile};
use kvplan_eval::shard::{merge, merged_name};

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
    let mut names = Vec::new();
    let mut files = Vec::new();
    for path in &args.records {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: RecordsFile<Record> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a NIAH or RULER records file", path.display()))?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        names.push(merged_name(name));
        files.push((path.display().to_string(), file));
    }
    names.dedup();
    if names.len() != 1 {
        bail!(
            "the files are of different runs (merged names {}); merge one run's shards at a time",
            names.join(", ")
        );
    }
    let out = args.out.join(&names[0]);
    let listed = args
        .records
        .iter()
        .any(|p| p.canonicalize().ok() == out.canonicalize().ok() && out.exists());
    if out.exists() && !listed {
        bail!(
            "{} exists: list it among the files to merge into it, or give another --out",
            out.display()
        );
    }
    let merged = merge(&files)?;
    merged.save(&out)?;
    eprintln!(
        "kvplan: {} records from {} files → {}; its table: kvplan eval table {}",
        merged.records.len(),
        files.len(),
        out.display(),
        out.display()
    );
    Ok(())
}
