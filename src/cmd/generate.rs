//! `kvplan generate`: run the model on a prompt and stream the continuation to stdout.
//!
//! Only the continuation text goes to stdout (so it can be compared exactly); load time, token
//! counts, speed and the memory report go to stderr. The stop token itself is not printed.
//!
//! `--method NAME` applies a press from the registry (`full` by default), configured from
//! `--plan FILE` (default: the model's `plans/<slug>.plan.json`) at the prompt's length,
//! under the plan's target or `--budget N` / `--ratio R`. The memory report gives the KV bytes
//! held, the bytes the real FullKV cache of the model's KV heads would hold, their ratio and the
//! plan's own figure.

use std::io::Write;

use anyhow::Context;
use kvplan_app::generate::{generate, GenerateRequest};
use kvplan_runtime::generate::Sampling;
use kvplan_runtime::press::MemoryReport;

use super::model_args::{ModelArgs, PlanArgs, PressArgs, WeightsArg};
use kvplan_runtime::model::quant::Kernels;

/// Arguments of `kvplan generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// The prompt.
    #[arg(long)]
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template (`tokenizer.chat_template`;
    /// an error for a model without one). Without it the prompt is plain text, after BOS when the
    /// model adds one.
    #[arg(long)]
    pub chat: bool,
    /// Most new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_new_tokens: usize,
    /// Pick the most likely token at every step (otherwise: seeded top-p sampling).
    #[arg(long)]
    pub greedy: bool,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.2)]
    pub temperature: f32,
    /// Nucleus (top-p) mass.
    #[arg(long, default_value_t = 0.9)]
    pub top_p: f32,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// KV-cache method (the list: the method table's names).
    #[arg(long, value_name = "NAME", default_value = "full", help = method_help())]
    pub method: String,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub press: PressArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub weights: WeightsArg,
}

impl GenerateArgs {
    /// The application layer's request.
    fn request(&self) -> GenerateRequest {
        GenerateRequest {
            prompt: self.prompt.clone(),
            chat: self.chat,
            max_new_tokens: self.max_new_tokens,
            sampling: self.sampling(),
            method: self.method.clone(),
            plan: self.plan.plan.clone(),
            target: self.plan.target(),
            press: self.press.options(),
            model: self.model.source(),
            weights: self.weights.weights.clone(),
        }
    }

    /// Greedy, or top-p sampling with the given temperature and seed.
    fn sampling(&self) -> Sampling {
        if self.greedy {
            Sampling::Greedy
        } else {
            Sampling::TopP {
                temperature: self.temperature,
                top_p: self.top_p,
                seed: self.seed,
            }
        }
    }
}

/// Runs `kvplan generate`: the continuation to stdout as it grows, the counts and memory to
/// stderr.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    args.model.use_kernels(Kernels::Int8);
    let mut stdout = |text: &str| {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    let run = generate(&args.request(), &mut stdout)?;
    if let Some(e) = run.sink_error {
        return Err(e).context("writing to stdout");
    }
    // The first new token comes from the prefill's logits: with one new token there is no
    // decode step to time.
    let decode = match run.decode_steps {
        0 => "no decode step (the first token comes from the prefill)".to_string(),
        _ => format!(
            "decode {:.2}s ({:.1} tokens/s)",
            run.decode_secs,
            run.tokens_per_s()
        ),
    };
    eprintln!(
        "\nkvplan: {} prompt tokens, {} new tokens; prefill {:.2}s, {decode}",
        run.prompt_tokens, run.new_tokens, run.prefill_secs,
    );
    let method = &args.method;
    report(
        method,
        &run.after_prefill,
        "after prefill",
        run.planned_bytes,
    );
    report(method, &run.at_end, "at the end", None);
    Ok(())
}

/// One memory line on stderr; after prefill, the plan's figure beside it.
fn report(method: &str, m: &MemoryReport, when: &str, planned: Option<u64>) {
    let mut line = format!(
        "kvplan: {method} {when} ({} tokens): KV held {} bytes, FullKV {} bytes, ratio {:.4}",
        m.tokens,
        m.held_bytes,
        m.full_bytes,
        m.ratio()
    );
    if let Some(planned) = planned {
        let off = (m.held_bytes as f64 - planned as f64) / planned.max(1) as f64;
        line.push_str(&format!("; plan {planned} bytes ({:+.2}%)", 100.0 * off));
    }
    eprintln!("{line}");
}

/// `--method`'s help: every name of the method table, so the list cannot fall behind it.
fn method_help() -> String {
    format!(
        "KV-cache method: {}",
        kvplan_runtime::press::PRESS_NAMES.join(", ")
    )
}
