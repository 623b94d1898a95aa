//! The evaluation tasks, each over the one driver ([`crate::driver`]): NIAH ([`niah`]), the
//! RULER subset ([`ruler`]) and streaming perplexity ([`ppl`]).

pub mod niah;
pub mod ppl;
pub mod ruler;

pub use niah::{NiahGrid, NiahTask};
pub use ppl::{PplRun, PplTask};
pub use ruler::RulerTask;

use burn::tensor::backend::Backend;

use crate::runner::Evaluator;
use crate::{Error, Result};

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
