//! The planner's one error type: every schema or validation error names the JSON path it is
//! about.

use crate::method::{Method, UnknownMethod};
use std::path::PathBuf;

/// Errors of the planner. Every schema or validation error names the JSON path it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value breaks the schema: `path` is a JSON path such as `sections.pyramid.beta`.
    #[error("{path}: expected {expected}, found {found}")]
    Invalid {
        path: String,
        expected: String,
        found: String,
    },
    /// The JSON text does not parse into the schema (missing or unknown field, wrong type).
    #[error("{what}: at `{path}`: {message}")]
    Parse {
        what: &'static str,
        path: String,
        message: String,
    },
    /// Reading or writing a file failed. (The I/O error is part of the message, not a source,
    /// so that error chains do not print it twice.)
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The plan has no section for the method asked for.
    #[error("the plan has no `{0}` section (build it with --method {0})")]
    MissingSection(Method),
    /// A budget asked of an allocator that its rule cannot produce.
    #[error("{method}: {message}")]
    Budget { method: Method, message: String },
    /// A method with no plan section (FullKV) was asked to be planned.
    #[error("`{0}` keeps every entry and has no plan section")]
    NoSection(Method),
    /// A file of an older schema version: `kvplan migrate` upgrades it.
    #[error(
        "schema_version: expected {expected}, found {found} (a version-{found} {what}: upgrade \
         it with `kvplan migrate FILE`)"
    )]
    OldSchema {
        what: &'static str,
        found: u64,
        expected: u32,
    },
    /// A target that cannot honour a plan for this architecture
    /// ([`crate::export::capability::Refusal`]): why, and what it can do instead.
    #[error("{0}")]
    Refused(String),
    /// An unknown method name.
    #[error(transparent)]
    UnknownMethod(#[from] UnknownMethod),
    /// A method name that does not parse ([`crate::MethodName`]).
    #[error(transparent)]
    MethodName(#[from] crate::BadMethodName),
}

/// Result alias of the planner.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Invalid`] from displayable parts.
    pub fn invalid(
        path: impl Into<String>,
        expected: impl std::fmt::Display,
        found: impl std::fmt::Display,
    ) -> Self {
        Error::Invalid {
            path: path.into(),
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    /// An [`Error::Budget`] for `method`.
    pub fn budget(method: Method, message: impl Into<String>) -> Self {
        Error::Budget {
            method,
            message: message.into(),
        }
    }
}
