//! RULER's 13 tasks (`niah_single_1`–`3`, `niah_multikey_1`–`3`, `niah_multivalue`,
//! `niah_multiquery`, `vt`, `cwe`, `fwe`, `qa_1`, `qa_2`; `kvplan_eval::ruler`) at one length
//! under every method and budget (or compression ratio), with their defaults.
//!
//! Defaults: all 13 tasks at 4096 tokens, 20 examples per task, budgets 128 and 512 (none when
//! ratios are given). Quick: one 1024-token example per task but `qa_2` (its ten paragraphs pass
//! 1024 tokens) at budget 64, answers cut at 32 tokens, into `<out>/quick/`. Every prompt is
//! generated before the model runs (the eval driver builds every prompt first), so a task that
//! cannot fit the length is an error at once.

use anyhow::bail;
use kvplan_common::data::LONG_CONTEXT_EVAL;
use kvplan_eval::task::Reporter;
use kvplan_eval::tasks::ruler::{RulerRun, Task};
use kvplan_eval::tasks::RulerTask;

use super::{EvalSettings, PromptSettings};
use crate::methods::methods_or_all;

/// Examples per task by default: 20 seeded prompts per task, 260 behind the average of the
/// 13 tasks.
pub const RULER_EXAMPLES: usize = 20;

/// A RULER run; every `None` takes the default (the quick one under `quick`).
#[derive(Debug, Clone)]
pub struct RulerRequest {
    /// Task names; `None`: all 13 (all but `qa_2` under `quick`).
    pub tasks: Option<Vec<String>>,
    /// Methods; `None`: every method of the registry.
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head).
    pub budgets: Option<Vec<usize>>,
    /// Compression ratios of the context (each method but full at the budget reaching each).
    pub ratios: Option<Vec<f64>>,
    /// Tokens of prompt and answer together.
    pub length: Option<usize>,
    /// Examples per task.
    pub examples: Option<usize>,
    /// Seed of the examples.
    pub seed: u64,
    /// Most answer tokens decoded, when the task allows more.
    pub answer_tokens: Option<usize>,
    /// The quick run, into `<out>/quick/`.
    pub quick: bool,
    /// Window placement, mode, prompts export.
    pub prompts: PromptSettings,
    /// The settings every task shares.
    pub settings: EvalSettings,
}

/// The tasks named, in order, duplicates dropped; `None`: every task.
fn tasks_of(names: Option<&[String]>) -> anyhow::Result<Vec<Task>> {
    let Some(names) = names else {
        return Ok(Task::ALL.to_vec());
    };
    let mut tasks = Vec::new();
    for n in names {
        let t = Task::from_name(n.trim())?;
        if !tasks.contains(&t) {
            tasks.push(t);
        }
    }
    Ok(tasks)
}

/// The run `req` asks for; bad values are one clear error.
pub fn run_of(req: &RulerRequest) -> anyhow::Result<RulerRun> {
    let tasks = tasks_of(req.tasks.as_deref())?;
    let methods = methods_or_all(req.methods.as_deref())?;
    let ratios = req.ratios.clone().unwrap_or_default();
    kvplan_eval::ratio::validate(&ratios).map_err(anyhow::Error::msg)?;
    let (length, examples, budgets, cap) = if req.quick {
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
    let tasks = match (&req.tasks, req.quick) {
        (None, true) => tasks.into_iter().filter(|&t| t != Task::Qa2).collect(),
        _ => tasks,
    };
    let run = RulerRun {
        tasks,
        length: req.length.unwrap_or(length),
        examples: req.examples.unwrap_or(examples),
        seed: req.seed,
        methods,
        budgets: req.budgets.clone().unwrap_or(budgets),
        ratios,
        answer_cap: req.answer_tokens.or(cap),
        leave_out_unfit: req.tasks.is_none(),
    };
    if run.tasks.is_empty() || run.methods.is_empty() || run.examples == 0 {
        bail!("give at least one task, one method and one example");
    }
    if run.budgets.contains(&0) || run.answer_cap == Some(0) {
        bail!("--budgets and --answer-tokens must be positive");
    }
    Ok(run)
}

/// Runs the tasks (or exports their prompts), reporting to `show`.
pub fn run(req: &RulerRequest, show: &mut dyn Reporter) -> anyhow::Result<()> {
    let run = run_of(req)?;
    let package = req.settings.ensure_data(&LONG_CONTEXT_EVAL)?;
    let mut task = RulerTask::new(run, package);
    task.setup = req.prompts.setup()?;
    let export = req.prompts.export_prompts.as_deref();
    req.settings.run(req.quick, task, None, export, show)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(quick: bool) -> RulerRequest {
        RulerRequest {
            tasks: None,
            methods: Some(vec!["full".into()]),
            budgets: None,
            ratios: None,
            length: None,
            examples: None,
            seed: 0,
            answer_tokens: None,
            quick,
            prompts: PromptSettings::default(),
            settings: EvalSettings::default(),
        }
    }

    #[test]
    fn the_default_run_is_every_task_at_4096_tokens() {
        let run = run_of(&request(false)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(run.tasks, Task::ALL.to_vec());
        assert_eq!((run.length, run.examples), (4096, RULER_EXAMPLES));
        assert_eq!(run.budgets, vec![128, 512]);
        assert_eq!(run.answer_cap, None);
    }

    #[test]
    fn quick_leaves_out_qa_2_unless_it_is_named() {
        let run = run_of(&request(true)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!run.tasks.contains(&Task::Qa2));
        assert_eq!(run.tasks.len(), Task::ALL.len() - 1);
        assert_eq!((run.length, run.answer_cap), (1024, Some(32)));
        let mut named = request(true);
        named.tasks = Some(vec!["qa_2".into(), " qa_2".into()]);
        let run = run_of(&named).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(run.tasks, vec![Task::Qa2]);
    }

    #[test]
    fn ratios_drop_the_default_budgets_and_a_zero_budget_is_refused() {
        let mut req = request(false);
        req.ratios = Some(vec![0.5]);
        let run = run_of(&req).unwrap_or_else(|e| panic!("{e}"));
        assert!(run.budgets.is_empty());
        let mut zero = request(false);
        zero.budgets = Some(vec![0]);
        let err = run_of(&zero).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("--budgets and --answer-tokens must be positive")
        );
    }
}
