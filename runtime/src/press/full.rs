//! FullKV: keeps every entry — the reference every method is compared with.

use burn::tensor::backend::Backend;

use super::from_plan::{FromPlan, MethodPress};
use super::{Capabilities, Press, PressKind};
use crate::error::Result;
use kvplan_planner::Method;

/// Keeps everything; observes nothing.
#[derive(Debug, Clone, Default)]
pub struct FullPress;

impl MethodPress for FullPress {
    /// Keeps everything, so never evicts, and has nothing to move past the context.
    const KIND: PressKind = PressKind::PLAIN;

    /// FullKV reads nothing from a plan (the registry builds it without one).
    fn from_plan<B: Backend>(_: &FromPlan<'_>) -> Result<Box<dyn Press<B>>> {
        Ok(Box::new(FullPress))
    }
}

impl<B: Backend> Press<B> for FullPress {
    fn name(&self) -> &str {
        Method::Full.name()
    }

    fn capabilities(&self) -> Capabilities {
        Self::KIND.serving(Some(Method::Full))
    }
}
