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

/// Writes `bytes` to `path` atomically. The parent directory must exist. On failure (a full
/// disk included) the temp file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, |tmp| fs::File::create(tmp))
}

/// Where [`write_atomic`] writes the temp file: a file, synced before the rename. Tests put a
/// writer in its place that fails like a full disk.
pub trait TempSink: Write {
    /// Flushes the bytes to the device (`fsync`).
    fn sync(&mut self) -> io::Result<()>;
}

impl TempSink for fs::File {
    fn sync(&mut self) -> io::Result<()> {
        self.sync_all()
    }
}

/// [`write_atomic`] with the temp file opened by `create`.
pub fn write_atomic_with<W: TempSink>(
    path: &Path,
    bytes: &[u8],
    create: impl FnOnce(&Path) -> io::Result<W>,
) -> io::Result<()> {
    let tmp = temp_path(path);
    sweep_stale_temps(path);
    let result = (|| {
        let mut f = create(&tmp)?;
        f.write_all(bytes)?;
        f.sync()?;
        drop(f);
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temp file is ours and useless after a failure.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes the temp files of `path` that a killed writer left (kill -9 skips the clean-up):
/// `.<name>.<pid>.tmp` whose pid names no running process (known where `/proc` lists
/// processes; elsewhere nothing is removed). Best effort.
fn sweep_stale_temps(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let prefix = format!(".{}.", name.to_string_lossy());
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let pid = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".tmp"))
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(crate::lock::is_gone) {
            let _ = fs::remove_file(entry.path());
        }
    }
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

    /// An empty folder for the test `tag`, this process's own.
    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kvplan-common-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).ok();
        dir
    }

    /// Entries in `dir` (0 when it cannot be read).
    fn entries(dir: &Path) -> usize {
        fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temp() {
        let dir = scratch("replace");
        let p = dir.join("x.json");
        write_atomic(&p, b"one").ok();
        write_atomic(&p, b"two").ok();
        assert_eq!(fs::read_to_string(&p).ok().as_deref(), Some("two"));
        assert_eq!(entries(&dir), 1);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let dir = scratch("fail");
        // Renaming a file over a non-empty directory fails: the directory must survive untouched.
        let target = dir.join("occupied");
        fs::create_dir_all(target.join("inner")).ok();
        assert!(write_atomic(&target, b"x").is_err());
        assert!(target.join("inner").is_dir());
        assert_eq!(entries(&dir), 1);
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

    /// A file that takes `room` bytes, then fails as a full disk does (ENOSPC).
    struct FullDisk {
        file: fs::File,
        room: usize,
    }

    impl Write for FullDisk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::from_raw_os_error(28));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> io::Result<()> {
            self.file.flush()
        }
    }

    impl TempSink for FullDisk {
        fn sync(&mut self) -> io::Result<()> {
            self.file.sync_all()
        }
    }

    #[test]
    fn a_disk_that_fills_at_any_byte_keeps_the_old_file_and_no_temp() {
        let dir = scratch("full");
        let p = dir.join("records.json");
        write_atomic(&p, b"{\"old\": true}\n").ok();
        let new = b"{\"new\": [1, 2, 3], \"longer\": \"than the old file\"}\n";
        for room in 0..new.len() {
            let create = |tmp: &Path| fs::File::create(tmp).map(|file| FullDisk { file, room });
            let err = write_atomic_with(&p, new, create).expect_err("the disk is full");
            assert_eq!(err.raw_os_error(), Some(28), "room {room}: {err}");
            assert_eq!(
                fs::read(&p).ok().as_deref(),
                Some(&b"{\"old\": true}\n"[..]),
                "room {room}"
            );
            assert_eq!(entries(&dir), 1, "room {room}");
        }
        let create = |tmp: &Path| {
            let room = new.len();
            fs::File::create(tmp).map(|file| FullDisk { file, room })
        };
        assert!(write_atomic_with(&p, new, create).is_ok());
        assert_eq!(fs::read(&p).ok().as_deref(), Some(&new[..]));
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_killed_writers_temp_file_is_swept_and_a_live_ones_kept() {
        let dir = scratch("sweep");
        let p = dir.join("records.json");
        // Pids on Linux stay below 2^22: 4194999 names no process; this test's own pid is live.
        let dead = dir.join(".records.json.4194999.tmp");
        let live = dir.join(format!(".records.json.{}.tmp", std::process::id()));
        let other = dir.join(".other.json.4194999.tmp");
        for f in [&dead, &live, &other] {
            fs::write(f, b"part").ok();
        }
        write_atomic(&p, b"x").ok();
        assert!(!dead.exists());
        assert!(
            other.exists(),
            "another file's temp is not this write's business"
        );
        assert!(!live.exists(), "this process's own temp became the file");
        fs::remove_dir_all(&dir).ok();
    }
}
