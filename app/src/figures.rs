//! The figures a set of profile, plan and results files imply, drawn into one folder
//! (`kvplan plot`, and the figures `kvplan profile` draws after planning).
//!
//! Files are told apart by content (a plan has `sections`, a profile `retrieval_reasoning`,
//! results `niah` / `quality` / `perplexity`); see `kvplan_plots::sets` for the figures of each.
//! A profile plotted with a plan for the same model outlines that plan's PoD blocks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kvplan_planner::{Method, Plan, PodSection, Profile};
use kvplan_plots::figures::wavelet::ByPosition;
use kvplan_plots::{
    default_context_len, detect, plan_figures, profile_figures, results_figures, write_figures,
    EvalResults, FileKind, Format, ProfileExtras, Rendered,
};

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

/// Writes the figures `files` imply into `out`; returns the paths written. Plan figures are
/// drawn at `context_len`, else each plan's preview length, else 8192.
pub fn plot_files(
    files: &[PathBuf],
    out: &Path,
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
