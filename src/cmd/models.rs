//! `kvplan models`: the model catalog — each model's name (also its plan slug), architecture,
//! packages, size, where its file is or would be, whether it is fetched, and which plan a command
//! would use for it (and what it would shadow). Nothing is hashed or downloaded: "fetched" means a
//! verified-hash record vouches for the file as it is now.

use std::path::PathBuf;

use kvplan_app::model::{catalog_rows, CatalogRow, Fetched};
use kvplan_app::plans::Places;
use kvplan_common::catalog::DEFAULT_MODEL;
use kvplan_common::paths;

/// Arguments of `kvplan models`.
#[derive(clap::Args, Debug)]
pub struct ModelsArgs {
    /// Folder of fetched models [env: KVPLAN_MODELS; default: ~/.cache/kvplan/models].
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
}

/// Runs `kvplan models`.
pub fn run(args: ModelsArgs) -> anyhow::Result<()> {
    let dir = paths::models_dir(args.models_dir.as_deref());
    let places = Places::here();
    let mut out = format!(
        "models folder: {}\nplans: ./plans/, then {} (per-user), then the plans shipped with \
         kvplan; --plan FILE overrides\n\n",
        dir.display(),
        places.user.display()
    );
    out += &format!(
        "{:<32} {:<7} {:>9}  {:<12} {:<40} file\n",
        "name", "arch", "size", "status", "packages"
    );
    for row in catalog_rows(&dir, &places) {
        out += &rows_of(&row);
    }
    out += "\n`kvplan fetch --model NAME` downloads one (an unverified file is hashed and kept \
            when right); `--model NAME` works on every command that takes a model.\n";
    super::write_stdout(&out)
}

/// The lines of one catalog model: name, architecture, size, status, packages, file; its notes;
/// its plan.
fn rows_of(row: &CatalogRow) -> String {
    let e = row.entry;
    let status = match row.fetched {
        Fetched::Verified => "fetched",
        Fetched::Unverified => "unverified",
        Fetched::Missing => "not fetched",
    };
    let name = if e.name == DEFAULT_MODEL {
        format!("{} (default)", e.name)
    } else {
        e.name.to_string()
    };
    let mut out = format!(
        "{name:<32} {:<7} {:>6} MB  {status:<12} {:<40} {}\n",
        e.architecture,
        e.size.div_ceil(1_000_000),
        e.packages_summary(),
        row.path.display()
    );
    out += &format!("    {}: {}\n", e.display_name, e.notes);
    out + &plan_line(&row.plans)
}

/// `    plan: <the one used> (also: <the ones it shadows>)`.
fn plan_line(found: &[String]) -> String {
    match found.split_first() {
        None => String::from("    plan: none (make one with `kvplan profile --model NAME`)\n"),
        Some((used, [])) => format!("    plan: {used}\n"),
        Some((used, rest)) => format!("    plan: {used} (shadows: {})\n", rest.join("; ")),
    }
}
