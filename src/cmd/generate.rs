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

use std::path::PathBuf;

use anyhow::Context;
use kvplan_planner::Budgets;
use kvplan_runtime::backend::Selected;
use kvplan_runtime::generate::{GenerateConfig, Sampling};
use kvplan_runtime::model::Model;
use kvplan_runtime::press::registry::{build_press_with, PressRequest};
use kvplan_runtime::press::{generate_pressed, MemoryReport};

use super::model_args::{self, load_model, ModelArgs, WeightsArg};

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
    /// KV-cache method: full, streaming, h2o, snapkv, pyramid, headkv, headkv-r, treekv,
    /// spindle, pod.
    #[arg(long, value_name = "NAME", default_value = "full")]
    pub method: String,
    /// Plan the method's budgets come from [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<PathBuf>,
    /// Re-target the plan: entries per (layer, KV head), observation window included.
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    pub budget: Option<usize>,
    /// Re-target the plan: share of the prompt kept per head, 0 < R <= 1.
    #[arg(long, value_name = "R")]
    pub ratio: Option<f64>,
    #[command(flatten)]
    pub press: super::model_args::PressArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub weights: WeightsArg,
}

/// Runs `kvplan generate`.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    super::methods_or_all(Some(std::slice::from_ref(&args.method)))?;
    let path = args.model.resolve()?;
    let (tok, model) = load_model(&path, args.weights.weights.as_deref())?;
    let prompt = if args.chat {
        tok.encode_chat(&args.prompt)?
    } else {
        tok.encode_prompt(&args.prompt)?
    };
    let plan = model_args::plan_for_methods(
        std::slice::from_ref(&args.method),
        args.plan.as_deref(),
        &path,
        &model,
    )?;
    let target = model_args::retarget(args.budget, args.ratio);
    let request = PressRequest {
        plan: plan.as_ref(),
        context_len: prompt.len(),
        target,
        options: args.press.options(),
    };
    let mut spec = build_press_with::<Selected>(&args.method, &request, &model.config)?;
    let config = GenerateConfig {
        max_new_tokens: args.max_new_tokens,
        sampling: sampling_of(&args),
        stop_ids: tok.stop_ids.clone(),
    };
    let mut out = StreamedText::default();
    let run = generate_pressed(&model, &prompt, &config, spec.press.as_mut(), |id| {
        if !config.stop_ids.contains(&id) {
            out.push(&tok, id);
        }
    })?;
    if let Some(e) = out.write_err {
        return Err(e).context("writing to stdout");
    }
    eprintln!(
        "\nkvplan: {} prompt tokens, {} new tokens; prefill {:.2}s, decode {:.2}s ({:.1} tokens/s)",
        prompt.len(),
        run.ids.len(),
        run.prefill_secs,
        run.decode_secs,
        if run.decode_secs > 0.0 {
            run.decode_steps as f64 / run.decode_secs
        } else {
            0.0
        }
    );
    report(
        &args.method,
        &run.after_prefill,
        "after prefill",
        spec.budgets.as_ref(),
        &model,
    );
    report(&args.method, &run.at_end, "at the end", None, &model);
    Ok(())
}

/// Greedy, or top-p sampling with the given temperature and seed.
fn sampling_of(args: &GenerateArgs) -> Sampling {
    if args.greedy {
        Sampling::Greedy
    } else {
        Sampling::TopP {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
        }
    }
}

/// The continuation streamed to stdout as it grows.
#[derive(Default)]
struct StreamedText {
    ids: Vec<u32>,
    shown: String,
    /// The first write error; nothing more is written after it.
    write_err: Option<std::io::Error>,
}

impl StreamedText {
    /// Adds `id`, decodes everything so far and prints what is new, holding back an incomplete
    /// UTF-8 sequence (shown as U+FFFD) until the next token completes it.
    fn push(&mut self, tok: &kvplan_runtime::tokenizer::Tokenizer, id: u32) {
        if self.write_err.is_some() {
            return;
        }
        self.ids.push(id);
        let Ok(text) = tok.decode(&self.ids) else {
            return;
        };
        if text.ends_with('\u{FFFD}')
            || text.len() <= self.shown.len()
            || !text.starts_with(&self.shown)
        {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let new = &text[self.shown.len()..];
        if let Err(e) = stdout
            .write_all(new.as_bytes())
            .and_then(|()| stdout.flush())
        {
            self.write_err = Some(e);
        }
        self.shown = text;
    }
}

/// One memory line on stderr; after prefill, the plan's figure beside it.
fn report(
    method: &str,
    m: &MemoryReport,
    when: &str,
    budgets: Option<&Budgets>,
    model: &Model<Selected>,
) {
    let mut line = format!(
        "kvplan: {method} {when} ({} tokens): KV held {} bytes, FullKV {} bytes, ratio {:.4}",
        m.tokens,
        m.held_bytes,
        m.full_bytes,
        m.ratio()
    );
    if let Some(b) = budgets {
        let planned = b.kv_bytes(model.config.geometry.head_dim, 4);
        let off = (m.held_bytes as f64 - planned as f64) / planned.max(1) as f64;
        line.push_str(&format!("; plan {planned} bytes ({:+.2}%)", 100.0 * off));
    }
    eprintln!("{line}");
}
