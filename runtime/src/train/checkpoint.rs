//! Checkpoints of PoD post-training, in a directory:
//! - `weights-NNNNNN.bpk`: the transformer's weights as burnpack (burn-store), which
//!   [`load_weights`] applies to a model loaded from the GGUF (what `generate --weights` needs);
//! - `optimizer-NNNNNN.mpk`: AdamW's moments (burn's named MessagePack bytes);
//! - `state.json`: step, losses, settings and which files hold that step.
//!
//! Every file is written to a temporary name and renamed, `state.json` last, so an interruption
//! leaves the previous checkpoint whole; files of earlier steps are removed afterwards.
//! Parameter ids are random per process, so the state lists the ids in module order and a resume
//! maps the optimiser's records onto the new process's ids by position.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::ParamId;
use burn::optim::Optimizer;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_store::{BurnpackStore, ModuleSnapshot};
use serde::{Deserialize, Serialize};

use super::config::{Optim, TrainConfig};
use crate::error::{Error, Result};
use crate::model::Transformer;

/// The state file's name inside a checkpoint directory.
pub const STATE_FILE: &str = "state.json";

/// Version of [`TrainState`]'s layout.
const STATE_VERSION: u32 = 1;

/// AdamW's per-parameter state.
pub type OptimRecord<B> = <Optim<B> as Optimizer<Transformer<B>, B>>::Record;

/// Progress of a run, saved with each checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainState {
    /// Layout version.
    pub version: u32,
    /// Optimiser steps done.
    pub step: usize,
    /// Mean loss of each step done.
    pub losses: Vec<f32>,
    /// Parameter ids in module order when saved.
    pub param_ids: Vec<u64>,
    /// The run's settings.
    pub config: TrainConfig,
    /// Weights file (relative to the directory).
    pub weights: String,
    /// Optimiser file (relative to the directory).
    pub optimizer: String,
}

impl TrainState {
    /// State before the first step.
    pub fn fresh(config: &TrainConfig, ids: &[ParamId]) -> Self {
        Self {
            version: STATE_VERSION,
            step: 0,
            losses: Vec::new(),
            param_ids: ids.iter().map(ParamId::val).collect(),
            config: config.clone(),
            weights: String::new(),
            optimizer: String::new(),
        }
    }

    /// Fails unless `config` continues this run (every setting equal but `checkpoint_every`).
    pub fn check_resumable(&self, config: &TrainConfig) -> Result<()> {
        let norm = |c: &TrainConfig| {
            let mut c = c.clone();
            c.checkpoint_every = 0;
            serde_json::to_value(c).unwrap_or_default()
        };
        if norm(&self.config) != norm(config) {
            return Err(Error::Request(format!(
                "checkpoint at step {} was made with other settings ({}); use a new directory",
                self.step,
                serde_json::to_string(&self.config).unwrap_or_default()
            )));
        }
        Ok(())
    }
}

/// A checkpoint found on disk.
pub struct Checkpoint<B: AutodiffBackend> {
    /// Its state.
    pub state: TrainState,
    /// Path of its weights.
    pub weights: PathBuf,
    /// The optimiser's records, keyed by the saving process's ids.
    pub optimizer: OptimRecord<B>,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    kvplan_common::fs::write_atomic(path, bytes).map_err(io(path))
}

/// Saves the weights of `tr` to `path` as burnpack, atomically.
pub fn save_weights<B: Backend>(tr: &Transformer<B>, path: &Path) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut store = BurnpackStore::from_file(&tmp)
        .auto_extension(false)
        .overwrite(true);
    tr.save_into(&mut store)
        .map_err(|e| Error::Model(format!("writing {}: {e}", tmp.display())))?;
    fs::rename(&tmp, path).map_err(io(path))
}

/// Applies burnpack weights from `path` to `tr` (a model of the same geometry, e.g. loaded from
/// the GGUF the run started from). Every tensor of the model must be in the file.
pub fn load_weights<B: Backend>(mut tr: Transformer<B>, path: &Path) -> Result<Transformer<B>> {
    if !path.is_file() {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such weights file"),
        });
    }
    if !tr.is_dense() {
        return Err(Error::Model(format!(
            "weights {}: the model holds quantised weights; load it with f32 weights \
             (WeightStorage::Dense) to apply trained weights",
            path.display()
        )));
    }
    let mut store = BurnpackStore::from_file(path).auto_extension(false);
    let applied = tr
        .load_from(&mut store)
        .map_err(|e| Error::Model(format!("weights {}: {e}", path.display())))?;
    if !applied.errors.is_empty() || !applied.missing.is_empty() || !applied.unused.is_empty() {
        return Err(Error::Model(format!(
            "weights {} do not fit the model: {} errors, missing {:?}, not in the model {:?}",
            path.display(),
            applied.errors.len(),
            applied.missing.iter().map(|m| &m.0).collect::<Vec<_>>(),
            applied.unused
        )));
    }
    Ok(tr)
}

/// Writes a checkpoint of step `state.step` into `dir`.
pub fn save<B: AutodiffBackend>(
    dir: &Path,
    tr: &Transformer<B>,
    optimizer: OptimRecord<B>,
    state: &TrainState,
) -> Result<()> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut state = state.clone();
    state.weights = format!("weights-{:06}.bpk", state.step);
    state.optimizer = format!("optimizer-{:06}.mpk", state.step);
    save_weights(tr, &dir.join(&state.weights))?;
    let bytes = Recorder::<B>::record(
        &NamedMpkBytesRecorder::<FullPrecisionSettings>::default(),
        optimizer,
        (),
    )
    .map_err(|e| Error::Model(format!("optimiser state: {e}")))?;
    write_atomic(&dir.join(&state.optimizer), &bytes)?;
    let json = serde_json::to_vec_pretty(&state)
        .map_err(|e| Error::Model(format!("training state: {e}")))?;
    write_atomic(&dir.join(STATE_FILE), &json)?;
    // Earlier steps' files: the new state no longer names them.
    for entry in fs::read_dir(dir).map_err(io(dir))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = (name.starts_with("weights-") || name.starts_with("optimizer-"))
            && name != state.weights
            && name != state.optimizer;
        if old {
            fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
        }
    }
    Ok(())
}

/// The checkpoint in `dir`, if there is one.
pub fn latest<B: AutodiffBackend>(dir: &Path, device: &B::Device) -> Result<Option<Checkpoint<B>>> {
    let path = dir.join(STATE_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = fs::read_to_string(&path).map_err(io(&path))?;
    let state: TrainState = serde_json::from_str(&text)
        .map_err(|e| Error::Request(format!("{}: {e}", path.display())))?;
    if state.version != STATE_VERSION {
        return Err(Error::Request(format!(
            "{}: state version {} (this build reads {STATE_VERSION})",
            path.display(),
            state.version
        )));
    }
    let opt_path = dir.join(&state.optimizer);
    let bytes = fs::read(&opt_path).map_err(io(&opt_path))?;
    let optimizer = Recorder::<B>::load(
        &NamedMpkBytesRecorder::<FullPrecisionSettings>::default(),
        bytes,
        device,
    )
    .map_err(|e| Error::Model(format!("{}: {e}", opt_path.display())))?;
    Ok(Some(Checkpoint {
        weights: dir.join(&state.weights),
        state,
        optimizer,
    }))
}

/// Re-keys optimiser records saved under ids `old` (module order) to the ids `new`.
pub fn remap_ids<T, M>(records: M, old: &[u64], new: &[ParamId]) -> Result<M>
where
    M: IntoIterator<Item = (ParamId, T)> + FromIterator<(ParamId, T)>,
{
    if old.len() != new.len() {
        return Err(Error::Request(format!(
            "checkpoint has {} parameters, the model {}",
            old.len(),
            new.len()
        )));
    }
    let by_old: std::collections::HashMap<u64, ParamId> =
        old.iter().copied().zip(new.iter().copied()).collect();
    Ok(records
        .into_iter()
        .filter_map(|(id, r)| by_old.get(&id.val()).map(|&n| (n, r)))
        .collect())
}
