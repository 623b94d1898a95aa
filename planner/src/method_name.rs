//! A method's name as the CLI takes it and records store it, parsed once into what it names: a
//! method of the table ([`crate::method`]), that method under a control
//! ([`crate::controls`]: `headkv@perm3`, `headkv-r@beta1.2`, `headkv@layer-uniform`), or that
//! method's budgets reduced to an engine's layer classes ([`crate::export::classes`]:
//! `vllm:headkv-r`, `trtllm:pyramid`, `trtllm-engine:snapkv`).
//!
//! Here the crates below the CLI meet: the runtime builds a press from a [`MethodName`], eval
//! runs and tabulates rows of it, both without a burn-free crate depending on burn. A name is
//! accepted only in the form it is written back ([`fmt::Display`]): records on disk key their
//! rows by these strings, so `headkv@beta1.50` (written back as `headkv@beta1.5`) is refused
//! rather than renamed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::controls::{Control, CONTROLLED};
use crate::export::capability::Engine;
use crate::method::{Method, NAMES};

/// A parsed method name: what a run of it builds and what its records are called.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MethodName {
    /// A method of the planner's table (`full`, `snapkv`, `headkv-r`, …).
    Method(Method),
    /// A control on a HeadKV method (`headkv@perm3`, `headkv-r@beta2`, `headkv@layer-uniform`).
    Control(Method, Control),
    /// An engine's layer classes over a method (`vllm:headkv`).
    Classes(Engine, Method),
}

/// A name that does not parse: none of the forms, or one form with a malformed part.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadMethodName {
    /// No form fits: no `:`, no `@`, and not a method of the table.
    #[error(
        "unknown method `{0}`; the registry has: {names}, <engine>:<method> for an engine's \
         layer classes ({engines}), and the controls headkv@perm<seed>, headkv@beta<β>, \
         headkv@layer-uniform (also on headkv-r)",
        names = NAMES.join(", "),
        engines = engine_names()
    )]
    Unknown(String),
    /// A form whose `part` is not what the form takes.
    #[error("method `{name}`: expected {expected}, found {found}")]
    Malformed {
        /// The whole name.
        name: String,
        /// What the form takes there.
        expected: String,
        /// What the name holds there.
        found: String,
    },
}

impl MethodName {
    /// FullKV, which needs no plan.
    pub const FULL: MethodName = MethodName::Method(Method::Full);

    /// The method of the table the name runs (`headkv` of `headkv@perm3` and `vllm:headkv`).
    pub fn method(self) -> Method {
        match self {
            Self::Method(m) | Self::Control(m, _) | Self::Classes(_, m) => m,
        }
    }

    /// Whether the name is FullKV itself (`full`): no plan, no budget.
    pub fn is_full(self) -> bool {
        self == Self::FULL
    }

    /// The control, for `<method>@<control>`.
    pub fn control(self) -> Option<Control> {
        match self {
            Self::Control(_, c) => Some(c),
            _ => None,
        }
    }

    /// The engine, for `<engine>:<method>`.
    pub fn engine(self) -> Option<Engine> {
        match self {
            Self::Classes(e, _) => Some(e),
            _ => None,
        }
    }
}

impl From<Method> for MethodName {
    fn from(m: Method) -> Self {
        Self::Method(m)
    }
}

/// The engines whose layer classes can be simulated, comma-separated.
fn engine_names() -> String {
    Engine::SIMULATED.map(Engine::name).join(", ")
}

impl fmt::Display for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Method(m) => f.write_str(m.name()),
            Self::Control(m, c) => write!(f, "{m}@{c}"),
            Self::Classes(e, m) => write!(f, "{}:{m}", e.name()),
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Control::Permuted(seed) => write!(f, "perm{seed}"),
            // Rust's shortest round-trip form: `1.2`, `1.005`, `10` — as records hold them.
            Control::Beta(beta) => write!(f, "beta{beta}"),
            Control::LayerUniform => f.write_str("layer-uniform"),
        }
    }
}

impl FromStr for MethodName {
    type Err = BadMethodName;

    /// `<engine>:<method>`, `<method>@<control>` or a method of the table. A malformed engine
    /// name or control is that form's own error; any other name is [`BadMethodName::Unknown`],
    /// listing every form.
    fn from_str(name: &str) -> Result<Self, BadMethodName> {
        let bad = |expected: String, found: &str| BadMethodName::Malformed {
            name: name.to_string(),
            expected,
            found: format!("`{found}`"),
        };
        if let Some((engine, method)) = name.split_once(':') {
            return classes(engine, method, bad);
        }
        if let Some((method, control)) = name.split_once('@') {
            let parsed = controlled(method, control, &bad)?;
            let back = parsed.to_string();
            return if back == name {
                Ok(parsed)
            } else {
                Err(bad(format!("`{back}` (the form records hold)"), name))
            };
        }
        name.parse()
            .map(Self::Method)
            .map_err(|_| BadMethodName::Unknown(name.to_string()))
    }
}

/// `<engine>:<method>`: a simulated engine and a method that keeps fewer entries per head (not
/// `full`, not `pod`).
fn classes(
    engine: &str,
    method: &str,
    bad: impl Fn(String, &str) -> BadMethodName,
) -> Result<MethodName, BadMethodName> {
    let engine = Engine::simulated(engine).ok_or_else(|| {
        bad(
            format!("<engine>:<method> with an engine of {}", engine_names()),
            engine,
        )
    })?;
    let expected = || "<engine>:<method> with a method of the table other than full and pod".into();
    match method.parse() {
        Ok(m) if !matches!(m, Method::Full | Method::Pod) => Ok(MethodName::Classes(engine, m)),
        _ => Err(bad(expected(), method)),
    }
}

/// `<method>@<control>`: a method with per-head scores and one of the controls.
fn controlled(
    method: &str,
    control: &str,
    bad: &impl Fn(String, &str) -> BadMethodName,
) -> Result<MethodName, BadMethodName> {
    let method: Method = method
        .parse()
        .map_err(|_| bad("a method of the table before `@`".into(), method))?;
    if !CONTROLLED.contains(&method) {
        let with_scores = CONTROLLED.map(Method::name).join(", ");
        let expected = format!("a method with per-head scores ({with_scores}) before `@`");
        return Err(bad(expected, method.name()));
    }
    let control = if control == "layer-uniform" {
        Control::LayerUniform
    } else if let Some(seed) = control.strip_prefix("perm") {
        let seed = seed
            .parse()
            .map_err(|_| bad("perm<seed>, seed an integer".into(), control))?;
        Control::Permuted(seed)
    } else if let Some(beta) = control.strip_prefix("beta") {
        let b: f64 = beta
            .parse()
            .map_err(|_| bad("beta<β>, β a number".into(), control))?;
        if !(b.is_finite() && b >= 1.0) {
            return Err(bad("beta<β> with β >= 1 (eq. 4)".into(), control));
        }
        Control::Beta(b)
    } else {
        let expected = "perm<seed>, beta<β> or layer-uniform after `@`";
        return Err(bad(expected.into(), control));
    };
    Ok(MethodName::Control(method, control))
}

impl Serialize for MethodName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MethodName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(name: &str) -> MethodName {
        name.parse().unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn refused(name: &str) -> String {
        match name.parse::<MethodName>() {
            Ok(m) => panic!("{name} parsed as {m:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Every kvplan name the committed records hold (`grep -rhoE '"method": "[^"]*"' results`,
    /// less other tools' `kvpress-…` rows and the intervals' `wilson`, `bootstrap`) beyond the
    /// table's own names (all of them).
    const IN_RECORDS: &[&str] = &[
        "headkv@perm1",
        "headkv@perm2",
        "headkv@perm3",
        "headkv@perm4",
        "headkv@perm5",
        "headkv-r@perm1",
        "headkv-r@perm2",
        "headkv-r@perm3",
        "headkv@layer-uniform",
        "headkv-r@layer-uniform",
        "headkv@beta1.005",
        "headkv@beta1.01",
        "headkv@beta1.1",
        "headkv@beta1.2",
        "headkv@beta1.5",
        "headkv@beta2",
        "headkv@beta5",
        "headkv@beta10",
        "headkv-r@beta1.005",
        "headkv-r@beta1.01",
        "headkv-r@beta1.1",
        "headkv-r@beta1.2",
        "headkv-r@beta1.5",
        "headkv-r@beta2",
        "headkv-r@beta5",
        "headkv-r@beta10",
        "vllm:headkv-r",
        "vllm:pyramid",
        "trtllm:headkv-r",
        "trtllm:pyramid",
        "trtllm-engine:headkv-r",
        "trtllm-engine:pyramid",
    ];

    #[test]
    fn every_name_in_the_records_is_written_back_as_read() {
        for &name in IN_RECORDS {
            assert_eq!(parsed(name).to_string(), name);
            let json = serde_json::to_string(&parsed(name)).unwrap_or_default();
            assert_eq!(json, format!("\"{name}\""));
            let back: Option<MethodName> = serde_json::from_str(&json).ok();
            assert_eq!(back, Some(parsed(name)));
        }
        for m in NAMES {
            assert_eq!(parsed(m).to_string(), *m);
        }
    }

    #[test]
    fn a_name_is_parsed_into_its_method_and_form() {
        assert_eq!(parsed("snapkv"), MethodName::Method(Method::SnapKv));
        assert!(parsed("full").is_full());
        assert!(!parsed("vllm:snapkv").is_full());
        let (m, c) = (Method::HeadKvR, Control::Beta(1.2));
        assert_eq!(parsed("headkv-r@beta1.2"), MethodName::Control(m, c));
        assert_eq!(parsed("headkv-r@beta1.2").control(), Some(c));
        let p = parsed("headkv@perm3");
        assert_eq!(p, MethodName::Control(Method::HeadKv, Control::Permuted(3)));
        let p = parsed("headkv@layer-uniform");
        assert_eq!(p.control(), Some(Control::LayerUniform));
        let p = parsed("trtllm-engine:pyramid");
        assert_eq!(
            p,
            MethodName::Classes(Engine::TrtllmEngine, Method::Pyramid)
        );
        assert_eq!(
            (p.method(), p.engine()),
            (Method::Pyramid, Some(Engine::TrtllmEngine))
        );
    }

    #[test]
    fn each_malformed_form_says_what_it_expected_and_found() {
        let cases = [
            (
                "headkv@perm",
                "expected perm<seed>, seed an integer, found `perm`",
            ),
            (
                "headkv@beta0.5",
                "expected beta<β> with β >= 1 (eq. 4), found `beta0.5`",
            ),
            (
                "headkv@betax",
                "expected beta<β>, β a number, found `betax`",
            ),
            ("headkv@x1", "layer-uniform after `@`, found `x1`"),
            (
                "snapkv@perm1",
                "(headkv, headkv-r) before `@`, found `snapkv`",
            ),
            (
                "nope@perm1",
                "a method of the table before `@`, found `nope`",
            ),
            (
                "headkv@beta1.50",
                "expected `headkv@beta1.5` (the form records hold)",
            ),
            ("headkv@perm03", "expected `headkv@perm3`"),
            (
                "sglang:snapkv",
                "an engine of vllm, trtllm, trtllm-engine, found `sglang`",
            ),
            ("vllm:pod", "other than full and pod, found `pod`"),
            ("trtllm:full", "other than full and pod, found `full`"),
            ("vllm:pyramidkv", "found `pyramidkv`"),
        ];
        for (name, says) in cases {
            let e = refused(name);
            assert!(e.starts_with(&format!("method `{name}`: expected")), "{e}");
            assert!(e.contains(says), "{name}: {e}");
        }
        let e = refused("snapkv2");
        assert!(e.starts_with("unknown method `snapkv2`; the registry has: full, snapkv"));
        assert!(e.contains("<engine>:<method> for an engine's layer classes (vllm, trtllm, "));
        let e = serde_json::from_str::<MethodName>("\"pyramidkv\"").err();
        assert!(e.is_some_and(|e| e.to_string().contains("unknown method `pyramidkv`")));
    }
}
