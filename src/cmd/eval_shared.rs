//! The options every `kvplan eval` task takes and the terminal side they share: progress bar,
//! notes on stderr, the table on stdout.

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use kvplan_app::eval::{EvalSettings, PromptSettings};
use kvplan_eval::equal_bytes::SpindleBytes;
use kvplan_eval::shard::Shard;
use kvplan_eval::task::{Progress, ReportError, Reporter};

use super::model_args::{ModelArgs, PressArgs, WeightsArg};

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
    /// HeadKV's and HeadKV-R's budget: budget (the row's budget as given: their per-head
    /// rounding holds 5–9% more than SnapKV at the same budget) or equal (re-targeted, as
    /// SpindleKV's, until their measured bytes are the most not above SnapKV's at the row's
    /// budget on each prompt).
    #[arg(long, value_name = "MODE", default_value = "budget")]
    pub per_head_bytes: SpindleBytes,
    /// Run shard i of n (1 ≤ i ≤ n): the run's prompts in run order, every n-th from the i-th,
    /// each with all its cells, into `<model>.<task>.shard-i-of-n.records.json` (table and
    /// results named alike); `kvplan eval merge` joins the shards' records. `auto`: i/n from a
    /// SLURM job array (SLURM_ARRAY_TASK_ID, _MIN, _COUNT); `auto/N`: from a Kubernetes Indexed
    /// Job (JOB_COMPLETION_INDEX, 0-based) of N completions, or a SLURM array of N tasks.
    #[arg(long, value_name = "I/N", default_value = "1/1")]
    pub shard: Shard,
}

impl EvalCommon {
    /// The application layer's settings.
    pub fn settings(&self) -> EvalSettings {
        self.model
            .use_kernels(kvplan_runtime::model::quant::Kernels::F32);
        EvalSettings {
            plan: self.plan.clone(),
            out: self.out.clone(),
            data: self.data.clone(),
            figures: !self.no_figures,
            model: self.model.source(),
            weights: self.weights.weights.clone(),
            press: self.press.options(),
            spindle_bytes: self.spindle_bytes,
            per_head_bytes: self.per_head_bytes,
            shard: self.shard,
        }
    }
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
    /// The application layer's prompt settings.
    pub fn settings(&self) -> PromptSettings {
        PromptSettings {
            window: self.window.clone(),
            mode: self.mode.clone(),
            export_prompts: self.export_prompts.clone(),
        }
    }
}

/// What the driver reports, on the terminal: lines and a progress bar (or plain progress lines
/// when stderr is not a terminal) on stderr, the table on stdout. The figures are drawn by the
/// application layer (`kvplan_app::eval`), not here.
#[derive(Default)]
pub struct Terminal {
    bar: Option<Bar>,
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

    fn figures(&mut self, _results: &Path, _dir: &Path) -> Result<(), ReportError> {
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
