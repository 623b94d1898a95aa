//! `kvplan generate`: run the model on a prompt and stream the continuation to stdout.
//!
//! Only the continuation text goes to stdout (so it can be compared exactly); load time, token
//! counts and speed go to stderr. The stop token itself is not printed.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::generate::{generate, GenerateConfig, Sampling};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

use super::model_args::ModelArgs;

/// Arguments of `kvplan generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// The prompt.
    #[arg(long)]
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
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
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Runs `kvplan generate`.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let path = args.model.resolve()?;
    let started = Instant::now();
    let gguf = GgufFile::open(&path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let device = backend::device();
    let model = Model::<Selected>::from_gguf(&gguf, &device)
        .with_context(|| format!("loading {}", path.display()))?;
    drop(gguf);
    eprintln!(
        "kvplan: loaded {} ({} backend) in {:.1}s",
        model.config.name,
        backend::name(),
        started.elapsed().as_secs_f64()
    );
    let prompt = if args.chat {
        tok.encode_chat(&args.prompt)?
    } else {
        tok.encode(&args.prompt)?
    };
    let sampling = if args.greedy {
        Sampling::Greedy
    } else {
        Sampling::TopP {
            temperature: args.temperature,
            top_p: args.top_p,
            seed: args.seed,
        }
    };
    let config = GenerateConfig {
        max_new_tokens: args.max_new_tokens,
        sampling,
        stop_ids: tok.stop_ids.clone(),
    };
    let mut cache = model.new_cache();
    let mut shown = String::new();
    let mut text_ids = Vec::new();
    let mut stdout = std::io::stdout().lock();
    let mut write_err = None;
    let started = Instant::now();
    let ids = generate(&model, &prompt, &config, &mut cache, None, |id| {
        if config.stop_ids.contains(&id) || write_err.is_some() {
            return;
        }
        text_ids.push(id);
        // Decode everything so far and print what is new, holding back an incomplete
        // UTF-8 sequence (shown as U+FFFD) until the next token completes it.
        if let Ok(text) = tok.decode(&text_ids) {
            if !text.ends_with('\u{FFFD}') && text.len() > shown.len() && text.starts_with(&shown) {
                let new = &text[shown.len()..];
                if let Err(e) = stdout
                    .write_all(new.as_bytes())
                    .and_then(|()| stdout.flush())
                {
                    write_err = Some(e);
                }
                shown = text;
            }
        }
    })?;
    if let Some(e) = write_err {
        return Err(e).context("writing to stdout");
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "\nkvplan: {} prompt tokens, {} new tokens in {:.2}s; KV cache {} bytes",
        prompt.len(),
        ids.len(),
        secs,
        cache.bytes()
    );
    Ok(())
}
