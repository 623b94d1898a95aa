//! Atomic file writes: a temp file in the destination's directory, synced, then renamed over the
//! destination, so a reader sees the old file or the new one, never a part.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temp file [`write_atomic`] uses for `path`: hidden, beside it (the rename stays on one
/// file system), and named for this process so concurrent writers do not collide.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| String::from("file"));
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `bytes` to `path` atomically. The parent directory must exist. On failure the temp
/// file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temp file is ours and useless after a failure.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomic`] after creating `path`'s parent directories.
pub fn write_atomic_creating_dirs(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir)?;
    }
    write_atomic(path, bytes)
}

/// `value` as pretty-printed JSON with a final newline: the layout of every file kvplan writes
/// (plans, profiles, results), so that they diff line by line.
pub fn pretty_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut s = serde_json::to_string_pretty(value)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kvplan-common-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let dir = scratch("replace");
        fs::create_dir_all(&dir).ok();
        let p = dir.join("x.json");
        write_atomic(&p, b"one").ok();
        write_atomic(&p, b"two").ok();
        assert_eq!(fs::read_to_string(&p).ok().as_deref(), Some("two"));
        assert_eq!(fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0), 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = scratch("fail");
        fs::create_dir_all(&dir).ok();
        // Renaming a file over a non-empty directory fails: the directory must survive untouched.
        let target = dir.join("occupied");
        fs::create_dir_all(target.join("inner")).ok();
        assert!(write_atomic(&target, b"x").is_err());
        assert!(target.join("inner").is_dir());
        assert_eq!(fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0), 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn missing_parent_is_an_error_unless_asked_to_create_it() {
        let dir = scratch("mkdir");
        let p = dir.join("a/b/c.txt");
        assert!(write_atomic(&p, b"x").is_err());
        write_atomic_creating_dirs(&p, b"x").ok();
        assert_eq!(fs::read(&p).ok(), Some(b"x".to_vec()));
        fs::remove_dir_all(&dir).ok();
    }
}
