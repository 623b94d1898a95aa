//! Formats other tools read, and the readable summary of `kvplan plan --summary`.

pub mod headkv_scores;
pub mod summary;
pub mod tsv;
