//! The planner side of a method that only scores entries and has nothing to configure (TOVA,
//! KNorm — their scoring, with its paper and reference, lives in the runtime press,
//! `runtime/src/press/<name>.rs`): an empty section `{}` and uniform budgets, every (layer, KV
//! head) keeping the per-head target `B` (`methods::uniform`). Such a method's planner side is one
//! line of the method table naming [`PlainSection`].

use super::uniform;
use super::{MethodSection, NoOptions};
use crate::budgets::Budgets;
use crate::geometry::Geometry;
use crate::method::Method;
use crate::profile::Profile;
use crate::Result;
use serde::{Deserialize, Serialize};

/// A method with nothing to configure: uniform budgets.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct PlainSection {}

impl MethodSection for PlainSection {
    type Options = NoOptions;

    fn build(_: Method, _: &Profile, _: usize, _: &NoOptions) -> Result<Self> {
        Ok(PlainSection {})
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
        String::from("no parameters; uniform budgets")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budgets::Target;
    use crate::methods::Section;
    use crate::sections::compute;
    use crate::sections::Sections;

    fn sections() -> Sections {
        let mut s = Sections::default();
        s.insert(Section::Tova(PlainSection {}));
        s.insert(Section::KNorm(PlainSection {}));
        s
    }

    #[test]
    fn every_head_keeps_the_target() {
        // SmolLM2: 30 layers × 3 KV heads; B = 128 of n = 1000 → 30·3·128 = 11,520 entries.
        let g = Geometry::new(30, 9, 3, 64).unwrap_or_else(|e| panic!("{e}"));
        for m in [Method::Tova, Method::KNorm] {
            let b = compute(&sections(), &g, m, 1000, Target::Tokens(128))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(b.per_layer_per_kv_head.iter().flatten().all(|&x| x == 128));
            assert_eq!(b.total(), 11_520);
            assert_eq!((b.window, b.sinks, b.recent), (0, 0, 0));
            assert!(b.compress);
            // A prompt of 100 tokens fits: every head keeps all of it.
            let b = compute(&sections(), &g, m, 100, Target::Tokens(128))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(b.total(), 30 * 3 * 100);
            assert!(!b.compress);
        }
    }

    #[test]
    fn section_is_an_empty_object() {
        assert_eq!(
            serde_json::to_string(&PlainSection {}).ok().as_deref(),
            Some("{}")
        );
        assert!(serde_json::from_str::<PlainSection>(r#"{"window": 1}"#).is_err());
    }
}
