//! kvplan runtime: executes a Llama-family GGUF model in burn.
//!
//! Modules: [`gguf`] (lazy reader, dequantisation), [`tokenizer`] (from GGUF metadata),
//! [`model`] (config, attention, feed-forward, block, transformer), [`cache`] (per-head variable
//! length KV storage), [`observe`] (attention capture), [`generate`] (prefill, decode, sampling),
//! [`identity`] (the model identity plans record), [`backend`] (the backend chosen by cargo
//! feature), [`precision`] (exact or fast float products), [`train`] (PoD post-training).
//! Fetching models is `kvplan_common`'s (its catalog).

pub mod backend;
pub mod cache;
pub mod error;
pub mod generate;
pub mod gguf;
pub mod identity;
pub mod model;
pub mod observe;
pub mod precision;
pub mod press;
#[cfg(test)]
mod test_model;
pub mod tokenizer;
pub mod train;

pub use error::{Error, Result};
