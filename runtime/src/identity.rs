//! The identity of a model file as plans and profiles record it (`kvplan_planner::ModelIdentity`):
//! name, architecture, SHA-256 of the GGUF file and attention geometry. The profiler and the
//! runtime build it the same way, so a plan made from a profile loads for the same file.

use std::path::Path;

use kvplan_planner::{Geometry, ModelIdentity};

use crate::error::{Error, Result};
use crate::fetch::sha256_file;
use crate::model::ModelConfig;

/// The model's name from its file name: everything before the first `.`
/// (`SmolLM2-135M-Instruct.Q4_1.gguf` → `SmolLM2-135M-Instruct`), as `kvplan profile` names it.
pub fn model_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match file.split('.').next() {
        Some(stem) if !stem.is_empty() => stem.to_string(),
        _ => String::from("model"),
    }
}

/// The identity of the GGUF file at `path` whose geometry is `config` (hashes the whole file).
pub fn model_identity(path: &Path, config: &ModelConfig) -> Result<ModelIdentity> {
    let geometry = Geometry::new(
        config.n_layers,
        config.n_heads,
        config.n_kv_heads,
        config.head_dim,
    )
    .map_err(|e| Error::Model(format!("geometry: {e}")))?;
    Ok(ModelIdentity {
        name: model_name(path),
        architecture: config.architecture.clone(),
        gguf_sha256: sha256_file(path)?,
        geometry,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_drops_quantisation_and_extension() {
        let p = Path::new("models/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(model_name(p), "SmolLM2-135M-Instruct");
        assert_eq!(model_name(Path::new(".gguf")), "model");
    }
}
