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
use kvplan_app::bench::{bench, tokens_per_s, BenchReport, BenchRequest, MethodRow, Row};
use kvplan_app::model::retarget;
use kvplan_planner::Target;

use super::model_args::{ModelArgs, PressArgs};

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
    /// Plan the methods' budgets come from [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<std::path::PathBuf>,
    /// Re-target the plan: entries per (layer, KV head).
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    pub budget: Option<usize>,
    /// Re-target the plan: share of the prompt kept per head, 0 < R <= 1.
    #[arg(long, value_name = "R")]
    pub ratio: Option<f64>,
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
            plan: self.plan.clone(),
            target: retarget(self.budget, self.ratio),
            press: self.press.options(),
            model: self.model.source(),
        }
    }
}

/// Runs `kvplan bench`: each row on stdout as it is measured, the whole as JSON with `--json`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    let report = bench(&args.request(), &mut |row| println!("{}", line(row)))?;
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

const MIB: f64 = (1 << 20) as f64;

/// The output line of `row`.
fn line(row: Row) -> String {
    match row {
        Row::Machine(m) => format!(
            "model: {} | backend: {} | weights: {}, {:.0} MiB | threads: {}",
            m.model,
            m.backend,
            m.weights,
            m.weight_bytes as f64 / MIB,
            m.threads
        ),
        Row::Prefill(r) => format!(
            "prefill {:>5} tokens: {:>7.3} s  {:>8.1} tokens/s  peak RSS {:.0} MiB",
            r.tokens,
            r.seconds,
            tokens_per_s(r.tokens, r.seconds),
            r.peak_rss_mib.unwrap_or(f64::NAN)
        ),
        Row::Decode(d) => format!(
            "decode  {} tokens at {} context: {:>7.3} s  {:>8.2} tokens/s  KV {:.1} MiB  peak RSS {:.0} MiB",
            d.tokens,
            d.context,
            d.seconds,
            tokens_per_s(d.tokens, d.seconds),
            d.kv_bytes as f64 / MIB,
            d.peak_rss_mib.unwrap_or(f64::NAN)
        ),
        Row::SharedPrefill(p) => format!(
            "methods: shared prefill of {} tokens (observed) {:.1} s; budgets: {}",
            p.tokens,
            p.seconds,
            match p.target {
                Some(Target::Tokens(b)) => format!("{b} entries per head"),
                Some(Target::Ratio(r)) => format!("ratio {r}"),
                None => "the plan's target".into(),
            }
        ),
        Row::Method(MethodRow::Skipped { method, reason, .. }) => {
            format!("{method:>16}: skipped: {reason}")
        }
        Row::Method(MethodRow::Ran(r)) => format!(
            "{:>16}: KV {:>7.1} MiB ({:.3} of FullKV)  press {:>6.2} s  decode {:>7.2} tokens/s  {:.2}x the model's FullKV decode",
            r.method,
            r.kv_bytes as f64 / MIB,
            r.kv_fraction,
            r.press_seconds,
            tokens_per_s(r.tokens, r.seconds),
            r.vs_full,
        ),
    }
}
