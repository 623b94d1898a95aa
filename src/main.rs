//! `kvplan`: profile a model's attention, plan KV-cache budgets, run the model under the plan.
//!
//! Each subcommand lives in its own file under `src/cmd/`; this file only parses arguments.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "kvplan", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Turn a profile into a KV-cache budget plan.
    Plan(cmd::plan::PlanArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan(args) => cmd::plan::run(args),
    }
}
