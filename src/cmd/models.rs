//! `kvplan models`: the model catalog — each model's name (also its plan slug), architecture,
//! packages, size, where its file is or would be, and whether it is fetched. Nothing is hashed or
//! downloaded: "fetched" means a verified-hash record vouches for the file as it is now.

use std::path::PathBuf;

use kvplan_common::catalog::{CATALOG, DEFAULT_MODEL};
use kvplan_common::paths;

/// Arguments of `kvplan models`.
#[derive(clap::Args, Debug)]
pub struct ModelsArgs {
    /// Folder of fetched models [env: KVPLAN_MODELS; default: ~/.cache/kvplan/models].
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
}

/// Runs `kvplan models`.
pub fn run(args: ModelsArgs) -> anyhow::Result<()> {
    let dir = paths::models_dir(args.models_dir.as_deref());
    let mut out = format!("models folder: {}\n\n", dir.display());
    out += &format!(
        "{:<32} {:<7} {:>9}  {:<12} {:<40} file\n",
        "name", "arch", "size", "status", "packages"
    );
    for e in &CATALOG {
        let path = e.path(&dir);
        let status = if e.is_verified(&dir) {
            "fetched"
        } else if path.is_file() {
            "unverified"
        } else {
            "not fetched"
        };
        let name = if e.name == DEFAULT_MODEL {
            format!("{} (default)", e.name)
        } else {
            e.name.to_string()
        };
        out += &format!(
            "{name:<32} {:<7} {:>6} MB  {status:<12} {:<40} {}\n",
            e.architecture,
            e.size.div_ceil(1_000_000),
            e.packages_summary(),
            path.display()
        );
        out += &format!("    {}: {}\n", e.display_name, e.notes);
    }
    out += "\n`kvplan fetch --model NAME` downloads one (an unverified file is hashed and kept \
            when right); `--model NAME` works on every command that takes a model.\n";
    super::write_stdout(&out)
}
