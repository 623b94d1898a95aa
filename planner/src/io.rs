//! File reading and atomic writing (temp file in the same directory, then rename).

use crate::{Error, Result};
use std::fs;
use std::path::Path;

/// Reads a UTF-8 file.
pub fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}

/// `value` as pretty JSON with a final newline ([`kvplan_common::fs::pretty_json`]); an error
/// names `what` (`plan`, `profile`).
pub fn to_json<T: serde::Serialize>(value: &T, what: &'static str) -> Result<String> {
    kvplan_common::fs::pretty_json(value).map_err(|e| Error::Parse {
        what,
        path: String::from("."),
        message: e.to_string(),
    })
}

/// Writes `text` to `path` atomically: a reader sees the old file or the new one, never a part.
/// The temp file lives in the same directory so that the rename stays on one file system.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    kvplan_common::fs::write_atomic(path, text.as_bytes()).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = std::env::temp_dir().join(format!("kvplan-io-{}", std::process::id()));
        fs::create_dir_all(&dir).ok();
        let p = dir.join("x.json");
        write_atomic(&p, "one").ok();
        write_atomic(&p, "two").ok();
        assert_eq!(read(&p).ok().as_deref(), Some("two"));
        let leftovers = fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(leftovers, 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn write_into_missing_directory_names_the_file() {
        let p = Path::new("/nonexistent-kvplan-dir/plan.json");
        let err = write_atomic(p, "x").err().map(|e| e.to_string());
        assert!(err.is_some_and(|m| m.contains("/nonexistent-kvplan-dir/plan.json")));
    }
}
