//! FullKV: keeps every entry — the reference every method is compared with.

use burn::tensor::backend::Backend;

use super::Press;
use crate::cache::KvCache;
use crate::error::Result;
use crate::observe::{ObserveConfig, Observer};

/// Keeps everything; observes nothing.
#[derive(Debug, Clone, Default)]
pub struct FullPress;

impl<B: Backend> Press<B> for FullPress {
    fn name(&self) -> &str {
        "full"
    }

    fn prefill_observe(&self) -> Option<ObserveConfig> {
        None
    }

    fn after_prefill(&mut self, _cache: &mut KvCache<B>, _obs: Option<&Observer>) -> Result<()> {
        Ok(())
    }
}
