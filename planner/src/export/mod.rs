//! Formats other tools read (`kvplan export`, [`engines`]), and the readable summary of
//! `kvplan plan --summary`.

pub mod classes;
pub mod engines;
pub mod headkv_scores;
pub mod npy;
pub mod summary;
pub mod tsv;
