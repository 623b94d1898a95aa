//! One writer per long-lived output: a lock file `<file>.lock` beside the file it guards, created
//! exclusively (`O_CREAT | O_EXCL`, atomic on local file systems), holding the holder's pid,
//! host, start time and command line, and removed when the holder drops it.
//!
//! A second `kvplan profile` on the same profile partial, or a second `kvplan eval` on the same
//! records file, is refused with an error that names the holder, instead of both rewriting the
//! file from their own copy in memory (each would silently drop the other's cells). A lock left
//! by a process that was killed (kill -9 skips the removal) is stale: when its pid names no
//! running process on this host (Linux: no `/proc/<pid>`), the next run removes it, says so, and
//! takes the lock. Elsewhere a stale lock has to be removed by hand; the error says which file.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Why a lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds it.
    #[error(
        "{} is in use by another kvplan process ({holder}); wait for it to finish, or remove {} \
         if that process is gone",
        target.display(),
        lock.display()
    )]
    Held {
        /// The file the lock guards.
        target: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// Who holds it, as the lock file says.
        holder: String,
    },
    /// The lock file could not be created or read.
    #[error("{}: {source}", lock.display())]
    Io {
        /// The lock file.
        lock: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
}

/// A held lock; dropping it removes the lock file.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

/// The lock file guarding `target`: `<target>.lock`.
pub fn lock_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    target.with_file_name(name)
}

/// Who this process is, as a lock file records it.
fn holder_line() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| String::from("this host"));
    let command: Vec<String> = std::env::args().collect();
    format!(
        "pid {} on {host}, since unix time {since}: {}",
        std::process::id(),
        command.join(" ")
    )
}

/// The pid a holder line names.
fn holder_pid(line: &str) -> Option<u32> {
    line.strip_prefix("pid ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Whether the process `pid` is gone (known only where `/proc` lists processes; elsewhere every
/// process counts as alive). Also what decides which leftovers of killed writers are swept.
pub(crate) fn is_gone(pid: u32) -> bool {
    Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists()
}

impl Lock {
    /// Takes the lock on `target`, or fails at once naming the holder. A stale lock (its holder
    /// is gone) is removed first, and `log` told.
    pub fn acquire(target: &Path, log: &mut dyn FnMut(&str)) -> Result<Lock, LockError> {
        let lock = lock_path(target);
        let io_err = |source| LockError::Io {
            lock: lock.clone(),
            source,
        };
        if let Some(dir) = lock.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(io_err)?;
        }
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&lock) {
                Ok(mut f) => {
                    let written = f
                        .write_all(format!("{}\n", holder_line()).as_bytes())
                        .and_then(|()| f.sync_all());
                    if let Err(e) = written {
                        let _ = fs::remove_file(&lock);
                        return Err(io_err(e));
                    }
                    return Ok(Lock { path: lock });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(&lock).unwrap_or_default();
                    let holder = holder.trim().to_string();
                    match holder_pid(&holder) {
                        Some(pid) if is_gone(pid) => {
                            log(&format!(
                                "removed the stale lock {} (its holder, pid {pid}, is gone)",
                                lock.display()
                            ));
                            fs::remove_file(&lock).map_err(io_err)?;
                        }
                        _ => {
                            return Err(LockError::Held {
                                target: target.to_path_buf(),
                                lock,
                                holder: if holder.is_empty() {
                                    String::from("holder unknown")
                                } else {
                                    holder
                                },
                            })
                        }
                    }
                }
                Err(e) => return Err(io_err(e)),
            }
        }
        Err(LockError::Held {
            target: target.to_path_buf(),
            holder: fs::read_to_string(&lock)
                .unwrap_or_default()
                .trim()
                .to_string(),
            lock,
        })
    }

    /// [`Lock::acquire`], retried every 50 ms for up to `patience` while another process holds
    /// it: for short sections (merging into a results file several tasks share).
    pub fn acquire_within(
        target: &Path,
        patience: Duration,
        log: &mut dyn FnMut(&str),
    ) -> Result<Lock, LockError> {
        let start = Instant::now();
        loop {
            match Lock::acquire(target, log) {
                Err(LockError::Held { .. }) if start.elapsed() < patience => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Best effort: a lock that cannot be removed is stale once this process ends.
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        crate::test_dir("lock", tag).join("m.records.json")
    }

    fn quiet(_: &str) {}

    #[test]
    fn a_second_holder_is_refused_with_the_first_named() {
        let target = scratch("second");
        let first = Lock::acquire(&target, &mut quiet).unwrap_or_else(|e| panic!("{e}"));
        let err = Lock::acquire(&target, &mut quiet).expect_err("second holder");
        let msg = err.to_string();
        assert!(
            msg.contains("m.records.json is in use by another kvplan process"),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("pid {} on ", std::process::id())),
            "{msg}"
        );
        assert!(msg.contains("m.records.json.lock"), "{msg}");
        drop(first);
        assert!(!lock_path(&target).exists());
        assert!(Lock::acquire(&target, &mut quiet).is_ok());
    }

    #[test]
    fn a_lock_of_a_dead_process_is_taken_over_and_said() {
        let target = scratch("stale");
        // Pids on Linux stay below 2^22; this one names no process.
        fs::write(
            lock_path(&target),
            "pid 4194999 on h, since unix time 0: kvplan eval\n",
        )
        .ok();
        let mut lines = Vec::new();
        let lock = Lock::acquire(&target, &mut |l| lines.push(l.to_string()));
        assert!(lock.is_ok(), "{lock:?}");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("stale lock") && lines[0].contains("pid 4194999"));
        let now = fs::read_to_string(lock_path(&target)).unwrap_or_default();
        assert!(
            now.starts_with(&format!("pid {} ", std::process::id())),
            "{now}"
        );
    }

    #[test]
    fn a_lock_without_a_pid_is_never_taken_over() {
        let target = scratch("unknown");
        fs::write(lock_path(&target), "").ok();
        let err = Lock::acquire(&target, &mut quiet).expect_err("held");
        assert!(err.to_string().contains("holder unknown"), "{err}");
    }

    #[test]
    fn waiting_gets_the_lock_once_the_holder_lets_go() {
        let target = scratch("wait");
        let first = Lock::acquire(&target, &mut quiet).unwrap_or_else(|e| panic!("{e}"));
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(first);
        });
        let second = Lock::acquire_within(&target, Duration::from_secs(10), &mut quiet);
        assert!(second.is_ok(), "{second:?}");
        releaser.join().ok();
        let third = Lock::acquire_within(&target, Duration::from_millis(100), &mut quiet);
        assert!(matches!(third, Err(LockError::Held { .. })), "{third:?}");
    }
}
