//! The evaluation tasks, each over the one driver ([`crate::driver`]): NIAH ([`niah`]), the
//! RULER subset ([`ruler`]) and streaming perplexity ([`ppl`]).

pub mod niah;
pub mod ppl;
pub mod ruler;

pub use niah::{NiahGrid, NiahTask};
pub use ppl::{PplRun, PplTask};
pub use ruler::RulerTask;

use burn::tensor::backend::Backend;
use kvplan_runtime::tokenizer::Tokenizer;

use crate::runner::Evaluator;
use crate::{Error, Result};

/// The text before and after a prompt's user message: the model's chat template, or — for a
/// model without one — kvpress's plain form, BOS (as its special token's text, when the model
/// adds one) before the context and a newline between the question and the answer prefix
/// (`<bos>{context}{question}` + `\n{answer prefix}`).
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
fn needs_plan<B: Backend>(ev: &Evaluator<'_, B>, methods: &[String]) -> Result<()> {
    if ev.plan.is_none() && methods.iter().any(|m| m != "full") {
        return Err(Error::Request(
            "methods other than `full` need a plan: give --plan FILE".into(),
        ));
    }
    Ok(())
}

/// Copies of borrowed records, for the aggregations that take a slice.
fn owned<R: Clone>(records: &[&R]) -> Vec<R> {
    records.iter().map(|r| (*r).clone()).collect()
}
