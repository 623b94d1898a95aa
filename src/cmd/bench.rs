//! `kvplan bench`: prefill and decode speed and peak memory of the real model.
//!
//! Prefill runs `--prefill` lengths (default 512 and 2048 tokens) with logits for the last
//! position only, as generation does; decode runs `--decode-tokens` greedy steps after a
//! `--decode-context` prefill. Each phase is repeated `--repeats` times and the best time is
//! reported (the machine is noisy). Peak memory is the process's peak resident set during the
//! phase (Linux `VmHWM`, reset through `/proc/self/clear_refs` before each phase).
//!
//! `--methods` adds decode under KV methods: one observed prefill of `--decode-context` tokens
//! (what every listed press asks to observe), then each method compresses a copy of that cache
//! (its plan at `--budget`/`--ratio`, else the plan's own target) and decodes the same
//! `--decode-tokens` steps; reported with the KV it holds and its speed against FullKV's in the
//! same run. A method that runs its own forward pass (PoD) prefills on its own. Under
//! `--methods all` a method the model or plan cannot run (PoD on Gemma 3) is reported as skipped,
//! with the reason, in the output and the JSON rows; a method named explicitly is an error.

use anyhow::Context;
use kvplan_app::bench::{bench, BenchReport, BenchRequest};

use super::model_args::{ModelArgs, PlanArgs, PressArgs};
use kvplan_runtime::model::quant::Kernels;

/// Arguments of `kvplan bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Prompt lengths to prefill.
    #[arg(long, value_delimiter = ',', default_value = "512,2048")]
    pub prefill: Vec<usize>,
    /// Context before the decode measurement.
    #[arg(long, default_value_t = 2048)]
    pub decode_context: usize,
    /// Decode steps measured.
    #[arg(long, default_value_t = 32)]
    pub decode_tokens: usize,
    /// Repeats of each phase (best time reported).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Decode under these KV methods as well (comma-separated, e.g. `full,snapkv,streaming`;
    /// `all`: every method of the registry), after one shared prefill of --decode-context tokens.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub methods: Option<Vec<String>>,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub press: PressArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

impl BenchArgs {
    /// The application layer's request.
    fn request(&self) -> BenchRequest {
        BenchRequest {
            prefill: self.prefill.clone(),
            decode_context: self.decode_context,
            decode_tokens: self.decode_tokens,
            repeats: self.repeats,
            methods: self.methods.clone(),
            plan: self.plan.plan.clone(),
            target: self.plan.target(),
            press: self.press.options(),
            model: self.model.source(),
        }
    }
}

/// Runs `kvplan bench`: each row on stdout as it is measured, the whole as JSON with `--json`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    args.model.use_kernels(Kernels::Int8);
    let report = bench(&args.request(), &mut |row| println!("{row}"))?;
    if let Some(out) = &args.json {
        write_json(&report, out)?;
    }
    Ok(())
}

fn write_json(report: &BenchReport, out: &std::path::Path) -> anyhow::Result<()> {
    let body = serde_json::to_string_pretty(&report.to_json())?;
    kvplan_common::fs::write_atomic(out, body.as_bytes())
        .with_context(|| format!("writing {}", out.display()))
}
