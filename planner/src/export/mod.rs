//! Formats other tools read (`kvplan export`, [`export`]): one target per format, listed in one
//! table ([`targets`]), each following its engine's entries of the capability table
//! ([`capability`]); the request and its method ([`request`]), the manifest beside the files
//! ([`manifest`]), the layer-class reductions ([`classes`]), the engines' blocks ([`blocks`]) and
//! the `--memory` fit ([`deploy`]); and the readable summary of `kvplan plan --summary`.

pub mod blocks;
pub mod capability;
pub mod classes;
pub mod deploy;
pub mod headkv_scores;
pub mod help;
pub mod manifest;
pub mod npy;
pub mod request;
pub mod score_set;
pub mod summary;
pub mod target;
pub mod targets;
pub mod tsv;

pub use manifest::{manifest_json, Export, ExportFile, Manifest};
pub use request::{default_method, export, Request};
pub use score_set::ScoreSet;
pub use target::ExportTarget;
pub use targets::Format;
