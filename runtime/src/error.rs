//! The runtime's error type: one enum, every message names the file, field or limit involved.

use std::path::PathBuf;

/// Errors raised by the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O failure while reading `path`.
    #[error("reading {path}: {source}")]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bytes are not a well-formed GGUF file; the message says where and why.
    #[error("GGUF {context}: {message}")]
    Gguf {
        /// Which file (or "<memory>") and which section.
        context: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A metadata key the model needs is absent or has the wrong type.
    #[error("GGUF metadata: {0}")]
    Metadata(String),
    /// The tokenizer could not be built or failed to encode/decode.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The model cannot be built from this file (missing tensor, wrong shape, unsupported geometry).
    #[error("model: {0}")]
    Model(String),
    /// Reading or hashing a model file failed.
    #[error(transparent)]
    Fetch(#[from] kvplan_common::fetch::FetchError),
    /// The plan cannot serve the request (no section for the method, no budgets at this length).
    #[error("plan: {0}")]
    Plan(#[from] kvplan_planner::Error),
    /// A request the runtime cannot serve (empty prompt, context too long, bad sampling settings).
    #[error("invalid request: {0}")]
    Request(String),
}

/// Result alias of the runtime.
pub type Result<T> = std::result::Result<T, Error>;
