//! The needle-in-a-haystack grid (RULER's niah template, Paul Graham essays) under every method
//! and budget, on the same examples, in one run, with its defaults.
//!
//! The default grid (1024 and 2048 tokens × depths 0, 0.25, 0.5, 0.75, 1 × 5 needles) puts 50
//! seeded prompts behind every method @ budget (budgets 64, 128, 256, 512); the table gives each
//! its 95% interval and paired differences against SnapKV and FullKV (`kvplan_eval::table`).
//! Quick: one 512-token example at depth 0.5 and budget 64, into `<out>/quick/`.

use kvplan_common::data::PAUL_GRAHAM;
use kvplan_eval::task::Reporter;
use kvplan_eval::tasks::{NiahGrid, NiahTask};

use super::{EvalSettings, PromptSettings};
use crate::methods::methods_or_all;

/// Needles per (length, depth) by default: 2 lengths × 5 depths × 5 = 50 prompts behind every
/// method @ budget: a Wilson interval of about ±14 points at a 50% pass rate, ±7 at 95%.
pub const NIAH_EXAMPLES: usize = 5;

/// A NIAH run; every `None` takes the default (the quick one under `quick`).
#[derive(Debug, Clone)]
pub struct NiahRequest {
    /// Methods; `None`: every method of the registry.
    pub methods: Option<Vec<String>>,
    /// Budgets (entries per layer and KV head).
    pub budgets: Option<Vec<usize>>,
    /// Prompt lengths in tokens.
    pub lengths: Option<Vec<usize>>,
    /// Needle depths in [0, 1].
    pub depths: Option<Vec<f64>>,
    /// Needles per (length, depth).
    pub examples: Option<usize>,
    /// Seed of the needles.
    pub seed: u64,
    /// The quick grid, into `<out>/quick/`.
    pub quick: bool,
    /// Window placement, mode, prompts export.
    pub prompts: PromptSettings,
    /// The settings every task shares.
    pub settings: EvalSettings,
}

/// The grid `req` asks for; bad values are one clear error.
pub fn grid_of(req: &NiahRequest) -> anyhow::Result<NiahGrid> {
    let methods = methods_or_all(req.methods.as_deref())?;
    let (lengths, depths, examples, budgets) = if req.quick {
        (vec![512], vec![0.5], 1, vec![64])
    } else {
        (
            vec![1024, 2048],
            vec![0.0, 0.25, 0.5, 0.75, 1.0],
            NIAH_EXAMPLES,
            vec![64, 128, 256, 512],
        )
    };
    let grid = NiahGrid {
        lengths: req.lengths.clone().unwrap_or(lengths),
        depths: req.depths.clone().unwrap_or(depths),
        examples: req.examples.unwrap_or(examples),
        seed: req.seed,
        methods,
        budgets: req.budgets.clone().unwrap_or(budgets),
    };
    grid.validate()?;
    Ok(grid)
}

/// Runs the grid (or exports its prompts), reporting to `show`.
pub fn run(req: &NiahRequest, show: &mut dyn Reporter) -> anyhow::Result<()> {
    let grid = grid_of(req)?;
    let essays = req.settings.ensure_data(&PAUL_GRAHAM)?;
    let mut task = NiahTask::new(grid, essays);
    task.setup = req.prompts.setup()?;
    let export = req.prompts.export_prompts.as_deref();
    req.settings.run(req.quick, task, None, export, show)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(quick: bool) -> NiahRequest {
        NiahRequest {
            methods: Some(vec!["full".into(), "snapkv".into()]),
            budgets: None,
            lengths: None,
            depths: None,
            examples: None,
            seed: 0,
            quick,
            prompts: PromptSettings::default(),
            settings: EvalSettings::default(),
        }
    }

    #[test]
    fn the_default_grid_is_fifty_prompts_behind_every_cell() {
        let g = grid_of(&request(false)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.lengths, vec![1024, 2048]);
        assert_eq!(g.depths.len(), 5);
        assert_eq!(g.lengths.len() * g.depths.len() * g.examples, 50);
        assert_eq!(g.budgets, vec![64, 128, 256, 512]);
    }

    #[test]
    fn quick_is_one_short_example_and_given_values_win() {
        let mut req = request(true);
        let g = grid_of(&req).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((g.lengths, g.depths, g.examples), (vec![512], vec![0.5], 1));
        assert_eq!(g.budgets, vec![64]);
        req.budgets = Some(vec![32]);
        let g = grid_of(&req).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.budgets, vec![32]);
    }

    #[test]
    fn an_unknown_method_is_refused_before_anything_runs() {
        let mut req = request(true);
        req.methods = Some(vec!["nope".into()]);
        assert!(grid_of(&req).is_err());
    }
}
