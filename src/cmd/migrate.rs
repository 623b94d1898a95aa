//! `kvplan migrate FILE…`: upgrades plan and profile files to the current schema version, in
//! place. Every file is read, upgraded and validated first; only if all succeed are the changed
//! ones written, each atomically (temp file + rename), so a failed run changes nothing.

use anyhow::Context;
use kvplan_planner::io;
use kvplan_planner::migrate::{migrate, Kind, Migrated};
use std::path::PathBuf;

/// Arguments of `kvplan migrate`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Example:
  kvplan migrate plans/smollm2-135m-instruct.profile.json plans/smollm2-135m-instruct.plan.json")]
pub struct MigrateArgs {
    /// Plan or profile files to upgrade in place (each told apart by its contents).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Runs `kvplan migrate`.
pub fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let mut upgraded: Vec<(PathBuf, Migrated)> = Vec::new();
    for path in &args.files {
        let text = io::read(path)?;
        let m = migrate(&text).with_context(|| format!("cannot migrate {}", path.display()))?;
        upgraded.push((path.clone(), m));
    }
    for (path, m) in &upgraded {
        let what = match m.kind {
            Kind::Plan => "plan",
            Kind::Profile => "profile",
        };
        if m.changed() {
            io::write_atomic(path, &m.text)?;
            eprintln!("{}: {what} version {} → {}", path.display(), m.from, m.to);
        } else {
            eprintln!("{}: {what} already at version {}", path.display(), m.to);
        }
    }
    Ok(())
}
