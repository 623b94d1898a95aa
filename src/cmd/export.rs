//! `kvplan export`: a plan in the files serving engines and the KV-compression packages read,
//! as the capability table says each honours it (`kvplan_planner::export`: the target table,
//! one file per format with its capability entries, the reductions, the engines' blocks). The
//! formats' help is the table's.

use anyhow::{bail, Context};
use kvplan_app::plans;
use kvplan_common::catalog::DEFAULT_MODEL;
use kvplan_common::fs::write_atomic_creating_dirs;
use kvplan_planner::export::deploy::Memory;
use kvplan_planner::export::{export, help, manifest_json, Export, Format, Request, ScoreSet};
use kvplan_planner::{Method, Plan, Target};
use std::path::{Path, PathBuf};

/// Arguments of `kvplan export`.
#[derive(clap::Args, Debug)]
#[command(after_help = export_help())]
pub struct ExportArgs {
    /// The plan to export (`kvplan plan` or `kvplan profile` wrote it) [default: --model's plan,
    /// found as every command finds it: ./plans, the per-user folder, the plans kvplan ships].
    #[arg(value_name = "PLAN")]
    plan: Option<PathBuf>,
    /// The catalog model whose plan is exported when no PLAN is named.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_MODEL, conflicts_with = "plan")]
    model: String,
    /// Format(s), comma-separated, or all.
    #[arg(long, value_name = "FORMAT", value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// Context length the budgets are for (budgets depend on it; recorded beside the files).
    #[arg(long, value_name = "L")]
    context_len: usize,
    /// Target: entries per (layer, KV head) (default: the plan's target).
    #[arg(long, value_name = "N", conflicts_with_all = ["ratio", "memory"])]
    budget: Option<usize>,
    /// Target: share of the context kept per KV head, 0 < R <= 1 (kvpress's compression_ratio
    /// is 1 − R).
    #[arg(long, value_name = "R", conflicts_with = "memory")]
    ratio: Option<f64>,
    /// Target from a deployment: the largest budget whose KV cache, in the engine's blocks,
    /// fits in BYTES for --batch sequences of --context-len tokens.
    #[arg(long, value_name = "BYTES")]
    memory: Option<u64>,
    /// Sequences served at once (with --memory).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "memory")]
    batch: usize,
    /// Bytes per cached number (with --memory; 2: fp16/bf16).
    #[arg(long, value_name = "B", default_value_t = 2, requires = "memory")]
    kv_bytes: usize,
    /// Tokens per cache block (default: the engine's, 16 vLLM, 32 TensorRT-LLM).
    #[arg(long, value_name = "B")]
    block_size: Option<usize>,
    /// Method whose budgets are exported (default: the first of headkv-r, pyramid, headkv,
    /// snapkv in the plan; duo and headkv use the score set's method).
    #[arg(long, value_name = "M")]
    method: Option<String>,
    /// Score set of the headkv and duo exports: retrieval (headkv-r's) or reasoning (headkv's).
    #[arg(long, value_name = "S", default_value = "retrieval")]
    scores: String,
    /// Output folder (created); with several formats, one sub-folder per format.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Replace files an earlier export left in --out with different contents (without it such
    /// a file stops the export before anything is written).
    #[arg(long)]
    force: bool,
}

/// The formats (`--to`), from the target table, and examples.
fn export_help() -> String {
    format!(
        "\
Formats (--to), each written with kvplan-export.json beside it (format, architecture, the
capability entry followed and its engine sources, method, context length, target, and what a
window reduction keeps of the plan's entries and of its bytes in the engine's blocks):
{}
  all       every format the capability table allows, each in <out>/<format>/; the others are
            listed with the reason

Examples:
  kvplan export --to vllm --context-len 4096 --out exports/vllm        # the default model's plan
  kvplan export --model gemma-3-270m --to trtllm --context-len 4096 --out trt
  kvplan export plans/smollm2-135m-instruct.plan.json --to vllm --context-len 4096 --out exports/vllm
  kvplan export PLAN --to trtllm --context-len 8192 --budget 512 --method pyramid --out trt
  kvplan export PLAN --to trtllm --context-len 32768 --memory 8000000000 --batch 16 --out trt
  kvplan export PLAN --to all --context-len 4096 --out plans/exports/smollm2-135m-instruct",
        help::help_lines()
    )
}

/// Runs `kvplan export`.
pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let (plan, from) = load_plan(&args)?;
    let all = args.to.iter().any(|t| t == "all");
    let formats = super::parse_list(&args.to, &Format::ALL)?;
    let requests = requests(&args, &formats)?;
    // Every export is built before any file is written: a refused format writes nothing. With
    // `--to all` a refused format is skipped and listed; a named one is an error.
    let mut built: Vec<(PathBuf, Export)> = Vec::new();
    let mut skipped = Vec::new();
    for req in &requests {
        match export(&plan, req) {
            Ok(export) => {
                let dir = match formats.len() {
                    1 => args.out.clone(),
                    _ => args.out.join(req.format.name()),
                };
                built.push((dir, export));
            }
            Err(e) if all => skipped.push((req.format.name(), e.to_string())),
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("cannot export {from} to {}", req.format.name())))
            }
        }
    }
    if built.is_empty() {
        let why: Vec<String> = skipped
            .iter()
            .map(|(name, why)| format!("  {name}: {why}"))
            .collect();
        bail!(
            "nothing to export from {from}: every format was refused\n{}",
            why.join("\n")
        );
    }
    let files = built
        .iter()
        .map(|(dir, export)| files_of(dir, export))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !args.force {
        refuse_to_replace(files.iter().flatten())?;
    }
    for ((dir, export), files) in built.iter().zip(&files) {
        write_export(dir, export, files)?;
    }
    for (name, why) in &skipped {
        eprintln!("kvplan: skipped {name}: {why}");
    }
    Ok(())
}

/// The plan named, else `--model`'s, and how to name it in messages.
fn load_plan(args: &ExportArgs) -> anyhow::Result<(Plan, String)> {
    match &args.plan {
        Some(path) => {
            let plan = Plan::load(path, None)
                .with_context(|| format!("cannot read plan {}", path.display()))?;
            Ok((plan, path.display().to_string()))
        }
        None => {
            let (plan, source) = plans::of_slug(&plans::Places::here(), &args.model)?;
            eprintln!("kvplan: plan {}", source.describe());
            Ok((plan, source.describe()))
        }
    }
}

/// One request per format, from the arguments.
fn requests(args: &ExportArgs, formats: &[Format]) -> anyhow::Result<Vec<Request>> {
    let target = match (args.budget, args.ratio) {
        (Some(n), None) => Some(Target::Tokens(n)),
        (None, Some(r)) => Some(Target::Ratio(r)),
        (None, None) => None,
        (Some(_), Some(_)) => bail!("give --budget or --ratio, not both"),
    };
    let method: Option<Method> = args.method.as_deref().map(str::parse).transpose()?;
    let scores: ScoreSet = args.scores.parse()?;
    let memory = args.memory.map(|bytes| Memory {
        bytes,
        batch: args.batch,
        bytes_per_element: args.kv_bytes,
    });
    if args.block_size == Some(0) {
        bail!("--block-size: expected at least 1 token, found 0");
    }
    Ok(formats
        .iter()
        .map(|&format| Request {
            format,
            method,
            context_len: args.context_len,
            target,
            scores,
            block_size: args.block_size,
            memory,
        })
        .collect())
}

/// Every file an export writes into `dir`, its manifest last, with its bytes.
fn files_of(dir: &Path, export: &Export) -> anyhow::Result<Vec<(PathBuf, Vec<u8>)>> {
    let manifest = manifest_json(&export.manifest)?;
    let files = export
        .files
        .iter()
        .map(|f| (dir.join(&f.name), f.bytes.clone()));
    Ok(files
        .chain([(dir.join("kvplan-export.json"), manifest)])
        .collect())
}

/// Fails, naming them, if files the exports would write already exist with other contents (an
/// earlier export into the same folder): nothing is replaced without `--force`. The same bytes
/// again are no loss and pass.
fn refuse_to_replace<'a>(
    files: impl Iterator<Item = &'a (PathBuf, Vec<u8>)>,
) -> anyhow::Result<()> {
    let differ: Vec<String> = files
        .filter(|(path, bytes)| std::fs::read(path).is_ok_and(|old| old != *bytes))
        .map(|(path, _)| path.display().to_string())
        .collect();
    if !differ.is_empty() {
        bail!(
            "{} already exist{} with other contents (an earlier export); nothing was written — \
             --force replaces them, or choose another --out",
            differ.join(", "),
            if differ.len() == 1 { "s" } else { "" }
        );
    }
    Ok(())
}

/// Writes an export's `files` ([`files_of`]) into `dir`, and says what was written.
fn write_export(dir: &Path, export: &Export, files: &[(PathBuf, Vec<u8>)]) -> anyhow::Result<()> {
    for (path, bytes) in files {
        write(path, bytes)?;
    }
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
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_creating_dirs(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
