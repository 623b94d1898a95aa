//! `kvplan plan`: profile → plan (filled by the planner issue).

/// Arguments of `kvplan plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {}

/// Runs `kvplan plan`.
pub fn run(_args: PlanArgs) -> anyhow::Result<()> {
    anyhow::bail!("kvplan plan is not built yet")
}
