//! `kvplan export`: a plan in the files serving engines and kvpress read
//! (`kvplan_planner::export::engines`: the formats, the layer-class reductions).

use anyhow::{bail, Context};
use kvplan_common::fs::write_atomic_creating_dirs;
use kvplan_planner::export::engines::{self, Format, Request, ScoreSet};
use kvplan_planner::{Method, Plan, Target};
use std::path::{Path, PathBuf};

/// Arguments of `kvplan export`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Formats (--to), each written with kvplan-export.json beside it (format, method, context length,
target, and what a layer-class reduction kept of the plan's bytes):
  vllm     config_override.json: layer_types + sliding_window (merge into the HF config.json)
  trtllm   kv_cache_config.json: max_attention_window (one per layer), sink_token_length
  kvpress  compression_ratios.json: PerLayerCompressionPress(press, compression_ratios)
  lukv     lukv_curve.npy: float32 [99, layers, KV heads] prune ratios for kvpress's LUKVPress
  duo      config.json (sink_size, recent_size) + full_attention_heads.tsv (DuoAttention)
  headkv   headkv_scores.json: one line {\"layer-head\": [score]} (HeadKV, KVCache-Factory)
  all      every format, each in <out>/<format>/

Examples:
  kvplan export plans/smollm2-135m-instruct.plan.json --to vllm --context-len 4096 --out exports/vllm
  kvplan export PLAN --to trtllm --context-len 8192 --budget 512 --method pyramid --out trt
  kvplan export PLAN --to headkv --scores reasoning --context-len 4096 --out scores
  kvplan export PLAN --to all --context-len 4096 --out plans/smollm2-135m-instruct.exports")]
pub struct ExportArgs {
    /// The plan to export (`kvplan plan` or `kvplan profile` wrote it).
    #[arg(value_name = "PLAN")]
    plan: PathBuf,
    /// Format(s), comma-separated, or all.
    #[arg(long, value_name = "FORMAT", value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// Context length the budgets are for (budgets depend on it; recorded beside the files).
    #[arg(long, value_name = "L")]
    context_len: usize,
    /// Target: entries per (layer, KV head) (default: the plan's target).
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    budget: Option<usize>,
    /// Target: share of the context kept per KV head, 0 < R <= 1 (kvpress's compression_ratio
    /// is 1 − R).
    #[arg(long, value_name = "R")]
    ratio: Option<f64>,
    /// Method whose budgets are exported (vllm, trtllm, kvpress, lukv; default: the first of
    /// headkv-r, pyramid, headkv, snapkv in the plan).
    #[arg(long, value_name = "M")]
    method: Option<String>,
    /// Score set of the headkv and duo exports: retrieval (headkv-r's) or reasoning (headkv's).
    #[arg(long, value_name = "S", default_value = "retrieval")]
    scores: String,
    /// Output folder (created); with several formats, one sub-folder per format.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// Runs `kvplan export`.
pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let plan = Plan::load(&args.plan, None)
        .with_context(|| format!("cannot read plan {}", args.plan.display()))?;
    let formats = super::parse_list(&args.to, &Format::ALL)?;
    let target = match (args.budget, args.ratio) {
        (Some(n), None) => Some(Target::Tokens(n)),
        (None, Some(r)) => Some(Target::Ratio(r)),
        (None, None) => None,
        (Some(_), Some(_)) => bail!("give --budget or --ratio, not both"),
    };
    let method: Option<Method> = args.method.as_deref().map(str::parse).transpose()?;
    let scores: ScoreSet = args.scores.parse()?;
    // Every export is built before any file is written: a refused format writes nothing.
    let mut built = Vec::new();
    for &format in &formats {
        let req = Request {
            format,
            method,
            context_len: args.context_len,
            target,
            scores,
        };
        let export = engines::export(&plan, &req).with_context(|| {
            format!("cannot export {} to {}", args.plan.display(), format.name())
        })?;
        let dir = match formats.len() {
            1 => args.out.clone(),
            _ => args.out.join(format.name()),
        };
        built.push((dir, export));
    }
    for (dir, export) in &built {
        for f in &export.files {
            write(&dir.join(&f.name), &f.bytes)?;
        }
        write(
            &dir.join("kvplan-export.json"),
            &engines::manifest_json(&export.manifest)?,
        )?;
        let names: Vec<&str> = export.files.iter().map(|f| f.name.as_str()).collect();
        eprintln!(
            "kvplan: {} ({} at {} tokens): {} in {}",
            export.manifest.format,
            export.manifest.method,
            export.manifest.context_len,
            names.join(", "),
            dir.display()
        );
        for note in &export.manifest.notes {
            eprintln!("  {note}");
        }
    }
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_creating_dirs(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
