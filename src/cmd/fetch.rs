//! `kvplan fetch`: download the shipped model with pip, check its SHA-256, install it.

use super::model_args::fetch_shipped;

/// Arguments of `kvplan fetch`.
#[derive(clap::Args, Debug)]
pub struct FetchArgs {
    /// Folder of fetched models [env: KVPLAN_MODELS; default: models/].
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<std::path::PathBuf>,
}

/// Runs `kvplan fetch`; a no-op when the file is already there with the right hash.
pub fn run(args: FetchArgs) -> anyhow::Result<()> {
    let path = fetch_shipped(args.models_dir.as_deref())?;
    println!("{}", path.display());
    Ok(())
}
