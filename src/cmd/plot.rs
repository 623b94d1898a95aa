//! `kvplan plot FILE… --out DIR [--format png|svg|both]`: draws the figures each file implies.
//!
//! Files are told apart by content (a plan has `sections`, a profile `retrieval_reasoning`,
//! results `niah` / `quality` / `perplexity`); see `kvplan_plots::sets` for the figures of each.
//! A profile plotted with a plan for the same model outlines that plan's PoD blocks.

use anyhow::{bail, Context};
use kvplan_planner::{Method, Plan, PodSection, Profile};
use kvplan_plots::figures::wavelet::ByPosition;
use kvplan_plots::{
    default_context_len, detect, plan_figures, profile_figures, results_figures, write_figures,
    EvalResults, FileKind, Format, ProfileExtras, Rendered,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

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

/// The files read, by kind (with the profile's JSON text, which may carry optional details).
#[derive(Default)]
struct Inputs {
    profiles: Vec<(PathBuf, Profile, String)>,
    plans: Vec<(PathBuf, Plan)>,
    results: Vec<(PathBuf, EvalResults)>,
}

fn read_inputs(files: &[PathBuf]) -> anyhow::Result<Inputs> {
    let mut inputs = Inputs::default();
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let what = || format!("cannot read {}", path.display());
        match detect(&text).with_context(what)? {
            FileKind::Profile => {
                let p = Profile::from_json(&text).with_context(what)?;
                inputs.profiles.push((path.clone(), p, text));
            }
            FileKind::Plan => {
                let p = Plan::from_json(&text).with_context(what)?;
                inputs.plans.push((path.clone(), p));
            }
            FileKind::Results => {
                let r = EvalResults::from_json(&text).with_context(what)?;
                inputs.results.push((path.clone(), r));
            }
        }
    }
    Ok(inputs)
}

/// Runs `kvplan plot`.
pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    let written = plot_files(&args.files, &args.out, args.format.into(), args.context_len)?;
    let list: String = written
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    super::write_stdout(&list)
}

/// Writes the figures `files` imply into `out`; returns the paths written. `kvplan profile`
/// and `kvplan eval` call this for their default figures.
pub fn plot_files(
    files: &[PathBuf],
    out: &std::path::Path,
    format: Format,
    context_len: Option<usize>,
) -> anyhow::Result<Vec<PathBuf>> {
    let inputs = read_inputs(files)?;
    // Figure name → the file it came from, so two files never overwrite each other's figures.
    let mut sources: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut figures: Vec<Rendered> = Vec::new();
    let mut add = |from: &PathBuf, rendered: Vec<Rendered>| -> anyhow::Result<()> {
        for r in rendered {
            if let Some(first) = sources.insert(r.name.clone(), from.clone()) {
                bail!(
                    "{} and {} would both write the figure `{}`; plot them into separate --out \
                     directories",
                    first.display(),
                    from.display(),
                    r.name
                );
            }
            figures.push(r);
        }
        Ok(())
    };
    for (path, profile, text) in &inputs.profiles {
        let pod = inputs
            .plans
            .iter()
            .filter(|(_, plan)| plan.check_model(&profile.model).is_ok())
            .find_map(|(_, plan)| plan.sections.get::<PodSection>(Method::Pod));
        let extras = ProfileExtras {
            pod,
            wavelet_by_position: ByPosition::from_profile_json(text),
        };
        let rendered = profile_figures(profile, &extras, format)
            .with_context(|| format!("cannot plot {}", path.display()))?;
        add(path, rendered)?;
    }
    for (path, plan) in &inputs.plans {
        let n = context_len.unwrap_or_else(|| default_context_len(plan));
        let (rendered, skipped) = plan_figures(plan, n, format)
            .with_context(|| format!("cannot plot {}", path.display()))?;
        for s in skipped {
            let what = match s.drawn_at {
                Some(m) => format!("{} drawn at context {m}", s.figure),
                None => format!("no {} figure", s.figure),
            };
            eprintln!(
                "note: {}: {what}: at context {n}, {}",
                path.display(),
                s.reason
            );
        }
        add(path, rendered)?;
    }
    for (path, results) in &inputs.results {
        let rendered = results_figures(results, format)
            .with_context(|| format!("cannot plot {}", path.display()))?;
        add(path, rendered)?;
    }
    write_figures(out, &figures)
        .with_context(|| format!("cannot write figures into {}", out.display()))
}
