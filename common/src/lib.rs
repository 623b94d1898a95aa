//! Utilities every kvplan crate shares, with no heavy dependency (no burn, no serde): one atomic
//! file write ([`fs`]), committed files as tests read them ([`committed`]), one writer per output
//! ([`lock`]), one seeded random generator ([`rng`]), the per-user cache folders models and data
//! are fetched into ([`paths`]), the one pip fetch machinery ([`fetch`], reading wheels and sdists
//! with [`archive`]), the model catalog ([`catalog`]) and the evaluation text ([`data`]).

pub mod archive;
pub mod catalog;
pub mod committed;
pub mod data;
pub mod fetch;
pub mod fs;
pub mod lock;
pub mod needle;
pub mod paths;
pub mod rng;
pub mod score;

pub use rng::Rng;

/// A fresh, empty folder `kvplan-<what>-<tag>-<pid>` under the temp folder, for one test (removed
/// first if a previous run left it).
#[cfg(test)]
pub(crate) fn test_dir(what: &str, tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("kvplan-{what}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}
