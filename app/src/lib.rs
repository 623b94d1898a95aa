//! kvplan's application layer, between the libraries and the CLI.
//!
//! The libraries (`kvplan-runtime`, `-planner`, `-profiler`, `-plots`, `-eval`) each do one
//! thing; this crate puts them together into what a command does: which model and which plan a
//! run uses ([`model`], [`plans`]), generation ([`generate`]), the benchmark as typed rows
//! ([`bench`]), PoD post-training ([`train_pod`]), the evaluation grids with their defaults
//! ([`eval`]) and the profile → plan → figures pipeline ([`profile`]), with the figures of any
//! set of files ([`figures`]) and the dates recorded ([`dates`]). Every entry point takes a
//! plain request struct (no clap); the binary's `src/cmd/*.rs` fill one in from their arguments,
//! call one function and print what comes back. Errors are `anyhow` (application code, as the
//! binary's): every message the CLI prints is made here, with its context chain.
//!
//! Progress notes (`kvplan: …` lines: a model fetched or loaded, the plan used) go to stderr
//! from here, as before the split; what a command's output is (its text, tables, rows) comes
//! back to the caller.

pub mod bench;
pub mod dates;
pub mod error_text;
pub mod eval;
pub mod figures;
pub mod generate;
pub mod methods;
pub mod model;
pub mod plan;
pub mod plans;
pub mod profile;
pub mod train_pod;
