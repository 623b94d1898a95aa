//! Utilities every kvplan crate shares, with no heavy dependency (no burn, no serde): one atomic
//! file write ([`fs`]), one seeded random generator ([`rng`]), and the per-user cache folders
//! models and data are fetched into ([`paths`]).

pub mod fs;
pub mod needle;
pub mod paths;
pub mod rng;
pub mod score;

pub use rng::Rng;
