//! The evaluation tasks, each in its own folder with all that is its own: NIAH ([`niah`]),
//! RULER's 13 tasks ([`ruler`]) and streaming perplexity ([`ppl`]) — how its prompts (or texts)
//! are built and its responses scored, its record's summary and its tables — and, with feature
//! `model`, the task the one driver (`crate::driver`) runs (`niah::task`, `ruler::task`,
//! `ppl::task`). What two tasks share sits below them: prompts and their records
//! ([`crate::prompt`], [`crate::records`]), RULER's string matching ([`crate::score`]), the
//! aggregation and the score tables ([`crate::aggregate`], [`crate::table`]).

pub mod niah;
pub mod ppl;
pub mod ruler;

#[cfg(feature = "model")]
pub use niah::task::{NiahGrid, NiahTask};
#[cfg(feature = "model")]
pub use ppl::task::{PplRun, PplTask};
#[cfg(feature = "model")]
pub use ruler::task::RulerTask;

#[cfg(feature = "model")]
use burn::tensor::backend::Backend;
#[cfg(feature = "model")]
use kvplan_planner::MethodName;
#[cfg(feature = "model")]
use kvplan_runtime::tokenizer::Tokenizer;

#[cfg(feature = "model")]
use crate::runner::Evaluator;
#[cfg(feature = "model")]
use crate::{Error, Result};

/// The text before and after a prompt's user message: the model's chat template, or — for a
/// model without one — kvpress's plain form, BOS (as its special token's text, when the model
/// adds one) before the context and a newline between the question and the answer prefix
/// (`<bos>{context}{question}` + `\n{answer prefix}`).
#[cfg(feature = "model")]
pub fn user_frame(tok: &Tokenizer) -> Result<(String, String)> {
    if tok.has_chat_template() {
        return Ok(tok.user_frame()?);
    }
    let bos = match tok.bos_id() {
        Some(id) => tok.decode(&[id])?,
        None => String::new(),
    };
    Ok((bos, "\n".to_string()))
}

/// Refuses methods other than `full` without a plan, before anything runs.
#[cfg(feature = "model")]
fn needs_plan<B: Backend>(ev: &Evaluator<'_, B>, methods: &[MethodName]) -> Result<()> {
    if ev.plan.is_none() && methods.iter().any(|m| !m.is_full()) {
        return Err(Error::Request(
            "methods other than `full` need a plan: give --plan FILE".into(),
        ));
    }
    Ok(())
}

/// Copies of borrowed records, for the aggregations that take a slice.
#[cfg(feature = "model")]
fn owned<R: Clone>(records: &[&R]) -> Vec<R> {
    records.iter().map(|r| (*r).clone()).collect()
}
