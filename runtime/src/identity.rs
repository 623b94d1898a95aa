//! The identity of a model file as plans and profiles record it (`kvplan_planner::ModelIdentity`):
//! name, architecture, SHA-256 of the GGUF file and attention geometry. The profiler and the
//! runtime build it the same way, so a plan made from a profile loads for the same file.
//!
//! The name is never cut from the file name: a file whose hash is a catalog model's gets that
//! entry's display name (`SmolLM2-135M-Instruct`, whatever the file is called); any other file
//! gets its GGUF's `general.name` (the architecture when absent). The plan slug is
//! `kvplan_common::catalog::slug` of the name, which for a catalog model is its catalog name.

use std::path::Path;

use kvplan_common::catalog::{self, CatalogEntry};
use kvplan_common::fetch::sha256_known;
use kvplan_planner::ModelIdentity;

use crate::error::Result;
use crate::model::ModelConfig;

/// The model's display name: the catalog entry's when `sha256` is a catalog model's, else
/// `general_name` (the GGUF's `general.name`, as `ModelConfig::name` holds it).
pub fn display_name(sha256: &str, general_name: &str) -> String {
    match catalog::by_sha256(sha256) {
        Some(CatalogEntry { display_name, .. }) => (*display_name).to_string(),
        None => general_name.to_string(),
    }
}

/// The identity of the GGUF file at `path` whose geometry is `config`. The file's hash comes from
/// its verified-hash sidecar when one vouches for it, else from reading the whole file.
pub fn model_identity(path: &Path, config: &ModelConfig) -> Result<ModelIdentity> {
    let gguf_sha256 = sha256_known(path)?;
    Ok(ModelIdentity {
        name: display_name(&gguf_sha256, &config.name),
        architecture: config.architecture.clone(),
        gguf_sha256,
        geometry: config.geometry.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_hash_gives_the_catalog_name_whatever_general_name_says() {
        // SmolLM2's GGUF says general.name = "Smollm2 135M 8k Lc100K Mix1 Ep2".
        let general = "Smollm2 135M 8k Lc100K Mix1 Ep2";
        let sha = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
        assert_eq!(display_name(sha, general), "SmolLM2-135M-Instruct");
    }

    #[test]
    fn another_file_is_named_by_its_general_name() {
        let general = "Qwen2.5 Coder 0.5B Instruct AWQ";
        assert_eq!(display_name("00", general), general);
        assert_eq!(
            catalog::slug(&display_name("00", general)),
            "qwen2.5-coder-0.5b-instruct-awq"
        );
    }
}
