//! Upgrading plan and profile files to the current schema (`kvplan migrate FILE…`).
//!
//! **Version 1 → 2.** Version 2 added each layer's attention span
//! (`model.geometry.layer_windows`) and, in a plan, `budget_semantics` and `notes`. Version-1
//! files were only ever written for `llama` models, whose layers all attend globally, so the
//! upgrade records every layer as global (`null`); a version-1 file of another architecture is
//! refused, since its windows cannot be known. The semantics written are what the version-1 code
//! did — for a model without windowed layers the budget rules are unchanged, so the upgraded plan
//! is the plan the current code builds from the upgraded profile. The result is parsed and
//! validated like any file before it is returned.

use crate::plan::{Plan, PLAN_SCHEMA_VERSION};
use crate::profile::{Profile, PROFILE_SCHEMA_VERSION};
use crate::semantics::{self, BudgetSemantics};
use crate::{validate, Error, Result};
use serde_json::Value;

/// Which schema a file follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plan,
    Profile,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Plan => "plan",
            Kind::Profile => "profile",
        }
    }

    fn current(self) -> u32 {
        match self {
            Kind::Plan => PLAN_SCHEMA_VERSION,
            Kind::Profile => PROFILE_SCHEMA_VERSION,
        }
    }
}

/// A file brought to the current schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Migrated {
    /// Plan or profile.
    pub kind: Kind,
    /// The version the file had.
    pub from: u64,
    /// The version it has now.
    pub to: u32,
    /// The file's text at the current version (the input itself when it already was).
    pub text: String,
}

impl Migrated {
    /// Whether the text changed (the file was of an older version).
    pub fn changed(&self) -> bool {
        self.from != u64::from(self.to)
    }
}

/// Upgrades the text of a plan or profile file (told apart by its `sections` or `settings`) to
/// the current schema version; a file already there is returned as it is (after validation).
pub fn migrate(text: &str) -> Result<Migrated> {
    let mut v: Value = serde_json::from_str(text).map_err(|e| Error::Parse {
        what: "plan or profile",
        path: String::from("."),
        message: e.to_string(),
    })?;
    let kind = kind_of(&v)?;
    let to = kind.current();
    let from = match v.get("schema_version").and_then(Value::as_u64) {
        Some(f) if (1..=u64::from(to)).contains(&f) => f,
        found => {
            let found = found.map_or_else(|| String::from("nothing"), |f| f.to_string());
            return Err(Error::invalid(
                "schema_version",
                format!("a {} version from 1 to {to}", kind.name()),
                found,
            ));
        }
    };
    if from == u64::from(to) {
        check(kind, text)?;
        return Ok(Migrated {
            kind,
            from,
            to,
            text: text.to_string(),
        });
    }
    v1_to_v2(&mut v)?;
    let text = match kind {
        Kind::Plan => plan_v2(v)?,
        Kind::Profile => Profile::from_json(&v.to_string())?.to_json()?,
    };
    Ok(Migrated {
        kind,
        from,
        to,
        text,
    })
}

fn kind_of(v: &Value) -> Result<Kind> {
    match (v.get("sections"), v.get("settings")) {
        (Some(_), None) => Ok(Kind::Plan),
        (None, Some(_)) => Ok(Kind::Profile),
        _ => Err(Error::invalid(
            ".",
            "a plan (with `sections`) or a profile (with `settings`)",
            "neither",
        )),
    }
}

fn check(kind: Kind, text: &str) -> Result<()> {
    match kind {
        Kind::Plan => Plan::from_json(text).map(|_| ()),
        Kind::Profile => Profile::from_json(text).map(|_| ()),
    }
}

/// The changes both schemas share: every layer global, version 2.
fn v1_to_v2(v: &mut Value) -> Result<()> {
    let arch = v.pointer("/model/architecture").and_then(Value::as_str);
    if arch != Some("llama") {
        return Err(Error::invalid(
            "model.architecture",
            "llama (version-1 files were only written for llama models, all layers global; \
             rebuild others with `kvplan profile`)",
            arch.map_or_else(|| String::from("nothing"), |a| format!("{a:?}")),
        ));
    }
    let layers = v
        .pointer("/model/geometry/layers")
        .and_then(Value::as_u64)
        .ok_or_else(|| Error::invalid("model.geometry.layers", "a layer count", "nothing"))?;
    if let Some(g) = v
        .pointer_mut("/model/geometry")
        .and_then(Value::as_object_mut)
    {
        g.insert(
            String::from("layer_windows"),
            Value::Array(vec![Value::Null; layers as usize]),
        );
    }
    if let Some(o) = v.as_object_mut() {
        o.insert(String::from("schema_version"), Value::from(2u32));
    }
    Ok(())
}

/// A plan's own additions: the semantics of its methods and the notes its geometry implies.
fn plan_v2(mut v: Value) -> Result<String> {
    if let Some(o) = v.as_object_mut() {
        let placeholder = serde_json::to_value(BudgetSemantics::of(&[])).unwrap_or_default();
        o.insert(String::from("budget_semantics"), placeholder);
        o.insert(String::from("notes"), Value::Array(Vec::new()));
    }
    let mut plan: Plan = validate::parse("plan", &v.to_string())?;
    let methods = plan.methods();
    plan.budget_semantics = BudgetSemantics::of(&methods);
    plan.notes = semantics::notes(&plan.model.geometry, &methods);
    plan.validate()?;
    plan.to_json()
}
