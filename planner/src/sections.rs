//! The plan's `sections`: one section per planned method, keyed by the method's name, in the
//! order of the method table (`methods/`). Each section's schema, validation and rule live in its
//! method's module; this file only holds them together and reads and writes the JSON object,
//! with the checks a struct with `deny_unknown_fields` would make (an unknown or repeated key is
//! an error naming it).

use crate::budgets::{self, Budgets, Target};
use crate::geometry::Geometry;
use crate::methods::{Method, MethodSection, Section, SECTION_NAMES};
use crate::{Error, Result};
use serde::de::{self, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// The sections of a plan, at most one per method, kept in table order.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Sections(BTreeMap<Method, Section>);

impl Sections {
    /// Adds `section`, replacing the method's previous one.
    pub fn insert(&mut self, section: Section) {
        self.0.insert(section.method(), section);
    }

    /// The section of `method`, if the plan has one.
    pub fn section(&self, method: Method) -> Option<&Section> {
        self.0.get(&method)
    }

    /// The section of `method` as its module's type `T` (`PodSection` for `Method::Pod`); None
    /// if the plan has none or `T` is not the method's type.
    pub fn get<T: MethodSection>(&self, method: Method) -> Option<&T> {
        self.section(method)?.as_any().downcast_ref()
    }

    /// Whether the plan has a section for `method`.
    pub fn contains(&self, method: Method) -> bool {
        self.0.contains_key(&method)
    }

    /// The methods that have a section, in table order.
    pub fn methods(&self) -> Vec<Method> {
        self.0.keys().copied().collect()
    }

    /// Validates every section against the geometry; errors name `sections.<method>.…`.
    pub fn validate(&self, g: &Geometry) -> Result<()> {
        for (m, s) in &self.0 {
            s.validate(&format!("sections.{m}"), g)?;
        }
        Ok(())
    }
}

/// Applies `method`'s rule from `sections` at context `n` under `target`: the per-head average
/// `B = target.per_head(n)` handed to the rule in the method's module (`methods/`), then held to
/// the windowed layers and the floor ([`budgets::apply_rule`]).
pub fn compute(
    sections: &Sections,
    g: &Geometry,
    method: Method,
    n: usize,
    target: Target,
) -> Result<Budgets> {
    let section = sections.section(method);
    budgets::apply_rule(g, method, n, target, |out| match section {
        Some(s) => s.budgets(g, out),
        None => Err(Error::MissingSection(method)),
    })
}

impl Serialize for Sections {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for s in self.0.values() {
            s.serialize_entry(&mut map)?;
        }
        map.end()
    }
}

/// A key of the `sections` object: the name of a method that has a section. Read inside the key
/// so that an unknown name is reported at its own JSON path (`sections.<name>`).
struct SectionKey(Method);

impl<'de> Deserialize<'de> for SectionKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = SectionKey;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a method name")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<SectionKey, E> {
                match v.parse::<Method>() {
                    Ok(m) if m.has_section() => Ok(SectionKey(m)),
                    _ => Err(E::unknown_field(v, SECTION_NAMES)),
                }
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Sections {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct SectionsVisitor;
        impl<'de> Visitor<'de> for SectionsVisitor {
            type Value = Sections;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of method sections")
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Sections, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(SectionKey(m)) = map.next_key()? {
                    if out.contains_key(&m) {
                        return Err(de::Error::duplicate_field(m.name()));
                    }
                    out.insert(m, Section::deserialize_value(m, &mut map)?);
                }
                Ok(Sections(out))
            }
        }
        d.deserialize_map(SectionsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::h2o::H2oSection;
    use crate::methods::streaming::StreamingSection;

    fn two() -> Sections {
        let mut s = Sections::default();
        s.insert(Section::Streaming(StreamingSection { sinks: 4 }));
        s.insert(Section::H2o(H2oSection {
            heavy_fraction: 0.5,
        }));
        s
    }

    #[test]
    fn written_in_table_order_and_read_back() {
        // h2o comes before streaming in the table, whatever the insertion order.
        let json = serde_json::to_string(&two()).unwrap_or_default();
        assert_eq!(
            json,
            r#"{"h2o":{"heavy_fraction":0.5},"streaming":{"sinks":4}}"#
        );
        let back: Option<Sections> = serde_json::from_str(&json).ok();
        assert_eq!(back, Some(two()));
        assert_eq!(two().methods(), vec![Method::H2o, Method::Streaming]);
        assert_eq!(
            two().get::<StreamingSection>(Method::Streaming),
            Some(&StreamingSection { sinks: 4 })
        );
        assert_eq!(two().get::<H2oSection>(Method::Streaming), None);
    }

    #[test]
    fn unknown_full_and_repeated_keys_are_errors() {
        let err = |text: &str| {
            serde_json::from_str::<Sections>(text)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert!(err(r#"{"pyramidkv": {}}"#)
            .starts_with("unknown field `pyramidkv`, expected one of `snapkv`"));
        assert!(err(r#"{"full": {}}"#).starts_with("unknown field `full`"));
        let twice = r#"{"streaming": {"sinks": 4}, "streaming": {"sinks": 4}}"#;
        assert!(err(twice).starts_with("duplicate field `streaming`"));
    }
}
