//! Formats other tools read (`kvplan export`, [`engines`]): the capability table they follow
//! ([`capability`]), one writer per target ([`targets`]), the layer-class reductions
//! ([`classes`]) and the engines' blocks ([`blocks`]); and the readable summary of
//! `kvplan plan --summary`.

pub mod blocks;
pub mod capability;
pub mod classes;
pub mod deploy;
pub mod engines;
pub mod headkv_scores;
pub mod npy;
pub mod summary;
pub mod targets;
pub mod tsv;
