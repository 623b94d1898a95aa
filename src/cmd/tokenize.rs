//! `kvplan tokenize`: print the ids the model is given for a text (BOS first when the model adds
//! one) or for a one-message chat rendered by the model's template, as a JSON array.

use anyhow::Context;
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::tokenizer::Tokenizer;

use super::model_args::ModelArgs;

/// Arguments of `kvplan tokenize`.
#[derive(clap::Args, Debug)]
pub struct TokenizeArgs {
    /// Text to tokenize (special tokens written in it are recognised).
    #[arg(long)]
    pub text: String,
    /// Render the text as a user message in the model's chat template first (an error for a model
    /// without one).
    #[arg(long)]
    pub chat: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Runs `kvplan tokenize`.
pub fn run(args: TokenizeArgs) -> anyhow::Result<()> {
    let path = args.model.source().resolve()?;
    let gguf = GgufFile::open(&path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let ids = if args.chat {
        tok.encode_chat(&args.text)?
    } else {
        tok.encode_prompt(&args.text)?
    };
    println!("{}", serde_json::to_string(&ids)?);
    Ok(())
}
