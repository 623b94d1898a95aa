//! `kvplan eval ppl`: streaming perplexity on Gutenberg text (TreeKV §5.2, its Figure 4).
//!
//! Each text streams one token at a time under each method and budget; the methods that evict
//! while decoding (`streaming`, `h2o`, `treekv`) hold their budget throughout, `full` holds
//! everything. Texts are cut to `--length` tokens; past the model's trained context only the
//! methods that re-assign positions run (`kvplan_eval::tasks::ppl`). Records (every token's NLL)
//! go to `<out>/<model>.ppl.records.json` after every stream (a re-run reuses them), the curves
//! into `<out>/<model>.results.json`, the table to `<out>/<model>.ppl.md`.

use kvplan_common::data::SHAKESPEARE;
use kvplan_eval::tasks::{PplRun, PplTask};

use super::eval::PplArgs;

/// Runs `kvplan eval ppl`.
pub fn run(args: PplArgs) -> anyhow::Result<()> {
    let methods = super::methods_or_all(Some(&args.methods))?;
    let (length, every, budgets, texts) = if args.quick {
        (
            256,
            64,
            vec![64],
            args.texts[..1.min(args.texts.len())].to_vec(),
        )
    } else {
        (2048, 128, vec![64, 128, 256], args.texts.clone())
    };
    let run = PplRun {
        methods,
        budgets: args.budgets.clone().unwrap_or(budgets),
        length: args.length.unwrap_or(length),
        every: args.every.unwrap_or(every),
        texts,
    };
    let dir = args.common.ensure_data(&SHAKESPEARE)?;
    let positions = Some(args.positions);
    args.common
        .run(args.quick, PplTask::new(run, dir), positions)
}
