//! `kvplan plot FILE… --out DIR [--format png|svg|both]`: draws the figures each file implies
//! (`kvplan_app::figures`), and lists the files written on stdout.
//!
//! Files are told apart by content (a plan has `sections`, a profile `retrieval_reasoning`,
//! results `niah` / `quality` / `perplexity`); see `kvplan_plots::sets` for the figures of each.
//! A profile plotted with a plan for the same model outlines that plan's PoD blocks.

use std::path::PathBuf;

use kvplan_plots::Format;

/// Arguments of `kvplan plot`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Examples:
  kvplan plot plans/smollm2-135m-instruct.profile.json plans/smollm2-135m-instruct.plan.json --out plans/figures/smollm2-135m-instruct
  kvplan plot results/smollm2.results.json --out results/figures --format svg
  kvplan plot plan.json --out /tmp/figs --context-len 2048")]
pub struct PlotArgs {
    /// Profile, plan or results files (JSON; the kind is read from the content).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Directory to write the figures into (created if missing; each file written atomically).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Image format.
    #[arg(long, value_enum, default_value_t = FormatArg::Both)]
    format: FormatArg,
    /// Prompt length of the plan figures (default: the plan's preview length, else 8192).
    #[arg(long, value_name = "L")]
    context_len: Option<usize>,
}

/// `--format` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum FormatArg {
    Png,
    Svg,
    Both,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Png => Format::Png,
            FormatArg::Svg => Format::Svg,
            FormatArg::Both => Format::Both,
        }
    }
}

/// Runs `kvplan plot`.
pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    let written = kvplan_app::figures::plot_files(
        &args.files,
        &args.out,
        args.format.into(),
        args.context_len,
    )?;
    let list: String = written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    super::write_stdout(&list)
}
