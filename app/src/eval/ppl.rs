//! Streaming perplexity on Gutenberg text (TreeKV §5.2, its Figure 4), with its defaults.
//!
//! Each text streams one token at a time under each method and budget; the methods that evict
//! while decoding (`streaming`, `h2o`, `treekv`) hold their budget throughout, `full` holds
//! everything. Defaults: 2048 tokens per text, curve points every 128, budgets 64, 128, 256.
//! Quick: 256 tokens of the first text, points every 64, budget 64, into `<out>/quick/`.

use kvplan_common::data::SHAKESPEARE;
use kvplan_eval::task::Reporter;
use kvplan_eval::tasks::{PplRun, PplTask};
use kvplan_runtime::press::options::PositionPolicy;

use super::EvalSettings;
use crate::methods::methods_or_all;

/// A perplexity run; every `None` takes the default (the quick one under `quick`).
#[derive(Debug, Clone)]
pub struct PplRequest {
    /// Methods (those that evict while decoding, and FullKV).
    pub methods: Vec<String>,
    /// Budgets (entries per layer and KV head).
    pub budgets: Option<Vec<usize>>,
    /// Tokens streamed per text.
    pub length: Option<usize>,
    /// Gutenberg files under `<data>/shakespeare/`.
    pub texts: Vec<String>,
    /// Curve points every this many tokens.
    pub every: Option<usize>,
    /// The quick run, into `<out>/quick/`.
    pub quick: bool,
    /// Positions of the evicting methods.
    pub positions: PositionPolicy,
    /// The settings every task shares.
    pub settings: EvalSettings,
}

/// The run `req` asks for.
pub fn run_of(req: &PplRequest) -> anyhow::Result<PplRun> {
    let methods = methods_or_all(Some(&req.methods))?;
    let (length, every, budgets, texts) = if req.quick {
        let first = req.texts[..1.min(req.texts.len())].to_vec();
        (256, 64, vec![64], first)
    } else {
        (2048, 128, vec![64, 128, 256], req.texts.clone())
    };
    Ok(PplRun {
        methods,
        budgets: req.budgets.clone().unwrap_or(budgets),
        length: req.length.unwrap_or(length),
        every: req.every.unwrap_or(every),
        texts,
    })
}

/// Runs the streams, reporting to `show`.
pub fn run(req: &PplRequest, show: &mut dyn Reporter) -> anyhow::Result<()> {
    let run = run_of(req)?;
    let dir = req.settings.ensure_data(&SHAKESPEARE)?;
    let positions = Some(req.positions);
    let task = PplTask::new(run, dir);
    req.settings.run(req.quick, task, positions, None, show)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(quick: bool) -> PplRequest {
        PplRequest {
            methods: vec!["full".into(), "streaming".into()],
            budgets: None,
            length: None,
            texts: vec!["a.txt".into(), "b.txt".into()],
            every: None,
            quick,
            positions: PositionPolicy::Reassign,
            settings: EvalSettings::default(),
        }
    }

    #[test]
    fn the_default_run_streams_every_text_at_three_budgets() {
        let run = run_of(&request(false)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((run.length, run.every), (2048, 128));
        assert_eq!(run.budgets, vec![64, 128, 256]);
        assert_eq!(run.texts.len(), 2);
    }

    #[test]
    fn quick_streams_the_first_text_only() {
        let run = run_of(&request(true)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((run.length, run.every), (256, 64));
        assert_eq!(run.texts, vec![String::from("a.txt")]);
    }
}
