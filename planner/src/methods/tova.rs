//! TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs"; kvpress `TOVAPress`): the score
//! of a cached entry is the attention the newest query gives it, averaged over all query heads of
//! the layer, so every KV head of a layer keeps the same set. The runtime applies it after
//! prefill (scores of the last prompt row) and after every decoding step. Budgets are uniform:
//! every (layer, KV head) keeps the per-head target `B` (`alloc::uniform`). The section has no
//! parameters.

use super::{Method, MethodSection};
use crate::alloc::uniform;
use crate::budgets::Budgets;
use crate::build::PlanOptions;
use crate::geometry::Geometry;
use crate::profile::Profile;
use crate::Result;
use serde::{Deserialize, Serialize};

/// TOVA: uniform budgets; nothing to configure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct TovaSection {}

impl MethodSection for TovaSection {
    fn build(_: Method, _: &Profile, _: &PlanOptions) -> Result<Self> {
        Ok(TovaSection {})
    }

    fn validate(&self, _: &str, _: &Geometry) -> Result<()> {
        Ok(())
    }

    fn budgets(&self, g: &Geometry, out: &mut Budgets) -> Result<()> {
        out.per_layer_per_kv_head =
            uniform::budgets(g.layers, g.kv_heads, out.context_len, out.per_head);
        Ok(())
    }

    fn parameters(&self) -> String {
        String::from("newest query's attention, mean over the layer's query heads")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budgets::{compute, Target};
    use crate::methods::Section;
    use crate::sections::Sections;

    fn sections() -> Sections {
        let mut s = Sections::default();
        s.insert(Section::Tova(TovaSection {}));
        s
    }

    #[test]
    fn every_head_keeps_the_target() {
        // SmolLM2: 30 layers × 3 KV heads; B = 128 of n = 1000 → 30·3·128 = 11,520 entries.
        let g = Geometry::new(30, 9, 3, 64).unwrap_or_else(|e| panic!("{e}"));
        let b = compute(&sections(), &g, Method::Tova, 1000, Target::Tokens(128))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(b.per_layer_per_kv_head.iter().flatten().all(|&x| x == 128));
        assert_eq!(b.total(), 11_520);
        assert_eq!((b.window, b.sinks, b.recent), (0, 0, 0));
        assert!(b.compress);
        // A prompt of 100 tokens fits: every head keeps all of it.
        let b = compute(&sections(), &g, Method::Tova, 100, Target::Tokens(128))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.total(), 30 * 3 * 100);
        assert!(!b.compress);
    }

    #[test]
    fn section_is_an_empty_object() {
        assert_eq!(
            serde_json::to_string(&TovaSection {}).ok().as_deref(),
            Some("{}")
        );
        assert!(serde_json::from_str::<TovaSection>(r#"{"window": 1}"#).is_err());
    }
}
