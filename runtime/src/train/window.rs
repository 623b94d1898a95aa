//! The proximal window trained PoD weights were made for, in a sidecar beside the weights
//! (`pod-trained.bpk` → `pod-trained.bpk.json`): a burnpack file holds tensors only, and PoD's
//! `n_r` at evaluation is `budget − n_s`, so `kvplan eval --weights` reads this file to run the
//! weights only where `(n_s, n_r)` matches training.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// `n_s` and `n_r` of a PoD post-training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainedWindow {
    /// `n_s`: initial proximal tokens.
    pub sinks: usize,
    /// `n_r`: recent proximal tokens.
    pub recent: usize,
}

/// The sidecar of the weights at `weights`: the same name with `.json` appended.
pub fn window_file(weights: &Path) -> PathBuf {
    let mut name = weights.as_os_str().to_owned();
    name.push(".json");
    PathBuf::from(name)
}

/// Writes `window` beside the weights at `weights` (temporary file, then rename).
pub fn save_window(weights: &Path, window: &TrainedWindow) -> Result<()> {
    let path = window_file(weights);
    let text = serde_json::to_string_pretty(window)
        .map_err(|e| Error::Model(format!("{}: {e}", path.display())))?
        + "\n";
    let tmp = path.with_extension("json.tmp");
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    fs::write(&tmp, text).map_err(io(&tmp))?;
    fs::rename(&tmp, &path).map_err(io(&path))
}

/// The window the weights at `weights` were trained with, from their sidecar; a clear error
/// when it is missing or malformed.
pub fn load_window(weights: &Path) -> Result<TrainedWindow> {
    let path = window_file(weights);
    if !path.is_file() {
        return Err(Error::Request(format!(
            "--weights {}: no {} beside them saying the n_s and n_r PoD was trained with; \
             `kvplan train-pod` writes it (running the same command again resumes a finished \
             run at its last step and writes it)",
            weights.display(),
            path.display()
        )));
    }
    let text = fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Error::Request(format!(
            "{}: expected {{\"sinks\": n_s, \"recent\": n_r}}: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_round_trips_beside_the_weights_and_bad_files_are_named() {
        let dir = std::env::temp_dir().join(format!("kvplan-window-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("dir");
        let weights = dir.join("pod-trained.bpk");
        assert_eq!(window_file(&weights), dir.join("pod-trained.bpk.json"));
        let err = load_window(&weights).expect_err("missing").to_string();
        assert!(
            err.contains("pod-trained.bpk.json") && err.contains("train-pod"),
            "{err}"
        );
        let w = TrainedWindow {
            sinks: 16,
            recent: 112,
        };
        save_window(&weights, &w).expect("save");
        assert_eq!(load_window(&weights).expect("load"), w);
        fs::write(window_file(&weights), "{\"sinks\": 16}").expect("write");
        let err = load_window(&weights).expect_err("no recent").to_string();
        assert!(err.contains("recent"), "{err}");
        let _ = fs::remove_dir_all(&dir);
    }
}
