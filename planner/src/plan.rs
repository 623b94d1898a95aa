//! The plan file (docs/design.md "The plan file"): self-describing, versioned, validated on load,
//! written atomically.
//!
//! A plan stores each method's parameters and measurements and, through `alloc/`, the rule that
//! turns them into budgets for any context length and target, so one plan serves every budget and
//! prompt length. `preview` holds the budgets at one context length for readers (and plots); on
//! load it must equal what the rules give. `budget_semantics` states what a budget means
//! (`semantics`; checked on load), `notes` how the model's geometry changes the rules (for
//! readers; not read back).
//!
//! Version 2 added each layer's attention span (`model.geometry.layer_windows`),
//! `budget_semantics` and `notes`. A version-1 file is refused with the command that upgrades it
//! (`kvplan migrate FILE`, `migrate`).

use crate::budgets::{Budgets, Target};
use crate::geometry::ModelIdentity;
use crate::profile::ProfileSettings;
use crate::sections::{self, Sections};
use crate::semantics::BudgetSemantics;
use crate::{io, validate, Error, Method, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Version of the plan schema this build reads and writes.
pub const PLAN_SCHEMA_VERSION: u32 = 2;

/// A KV-cache budget plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Always [`PLAN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The model the plan is for.
    pub model: ModelIdentity,
    /// Where the plan comes from.
    pub provenance: Provenance,
    /// Default budget target (the runtime's `--budget` may re-target through the same rules).
    pub target: Target,
    /// What a budget means (unit, what counts inside it, GQA, decode policy per method).
    pub budget_semantics: BudgetSemantics,
    /// How the model's geometry changes the rules (windowed layers, one KV head), and whether the
    /// profile's retrieval-reasoning answers beat chance where HeadKV uses them, for readers.
    pub notes: Vec<String>,
    /// One section per method.
    pub sections: Sections,
    /// Budgets at one context length, for readers; checked against the rules on load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<Preview>,
}

/// Where a plan comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// kvplan version that wrote the plan.
    pub kvplan_version: String,
    /// Date the plan was written, `YYYY-MM-DD`.
    pub date: String,
    /// Settings of the profile the plan was built from (method, examples, lengths, seeds).
    pub profile: ProfileSettings,
}

/// Budgets of every planned method at one context length, under the plan's target.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Preview {
    pub context_len: usize,
    pub methods: BTreeMap<Method, PreviewEntry>,
}

/// One method's budgets in a preview.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PreviewEntry {
    /// Tokens kept `[layer][kv_head]`.
    pub kept: Vec<Vec<usize>>,
    /// Key entries stored `[layer][kv_head]`, only where they differ from `kept` (PoD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<Vec<Vec<usize>>>,
}

impl PreviewEntry {
    /// The preview of `b`.
    pub fn of(b: &Budgets) -> Self {
        let keys = (b.keys_per_layer_per_kv_head != b.per_layer_per_kv_head)
            .then(|| b.keys_per_layer_per_kv_head.clone());
        PreviewEntry {
            kept: b.per_layer_per_kv_head.clone(),
            keys,
        }
    }
}

impl Plan {
    /// Methods that have a section, in table order ([`Method::ALL`]).
    pub fn methods(&self) -> Vec<Method> {
        self.sections.methods()
    }

    /// Budgets of `method` for a prompt of `context_len` tokens under `target`.
    pub fn budgets(&self, method: Method, context_len: usize, target: Target) -> Result<Budgets> {
        target.validate("target")?;
        sections::compute(
            &self.sections,
            &self.model.geometry,
            method,
            context_len,
            target,
        )
    }

    /// Budgets of `method` for a prompt of `context_len` tokens under the plan's own target.
    pub fn budgets_at(&self, method: Method, context_len: usize) -> Result<Budgets> {
        self.budgets(method, context_len, self.target)
    }

    /// The preview of every planned method at `context_len`. A method whose rule has no budgets
    /// there (e.g. SpindleKV below β) is left out: the plan still serves other lengths.
    pub fn make_preview(&self, context_len: usize) -> Preview {
        let methods = self
            .methods()
            .into_iter()
            .filter_map(|m| {
                let b = self.budgets_at(m, context_len).ok()?;
                Some((m, PreviewEntry::of(&b)))
            })
            .collect();
        Preview {
            context_len,
            methods,
        }
    }

    /// Parses and validates a plan from JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        validate::schema_version("plan", text, PLAN_SCHEMA_VERSION)?;
        let plan: Plan = validate::parse("plan", text)?;
        plan.validate()?;
        Ok(plan)
    }

    /// Reads, parses and validates a plan file; with `model`, also checks that the plan is for
    /// that model (hash and geometry).
    pub fn load(path: &Path, model: Option<&ModelIdentity>) -> Result<Self> {
        let plan = Self::from_json(&io::read(path)?)?;
        if let Some(m) = model {
            plan.check_model(m)?;
        }
        Ok(plan)
    }

    /// Checks that the plan is for `model`; the error names the first differing field.
    pub fn check_model(&self, model: &ModelIdentity) -> Result<()> {
        self.model.check_matches(model, "model")
    }

    /// Pretty JSON with a final newline; the same plan always gives the same bytes.
    pub fn to_json(&self) -> Result<String> {
        io::to_json(self, "plan")
    }

    /// Validates, then writes atomically (temp file in the same directory, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        io::write_atomic(path, &self.to_json()?)
    }

    /// Checks the whole plan: version, identity, target, sections against the geometry, and the
    /// preview against the rules.
    pub fn validate(&self) -> Result<()> {
        validate::current_schema(self.schema_version, PLAN_SCHEMA_VERSION)?;
        self.model.validate("model")?;
        self.target.validate("target")?;
        self.budget_semantics.validate(&self.methods())?;
        self.sections.validate(&self.model.geometry)?;
        if let Some(p) = &self.preview {
            self.validate_preview(p)?;
        }
        Ok(())
    }

    fn validate_preview(&self, p: &Preview) -> Result<()> {
        let g = &self.model.geometry;
        validate::at_least("preview.context_len", p.context_len, 1)?;
        let planned = self.methods();
        for (m, entry) in &p.methods {
            let path = format!("preview.methods.{m}");
            if !planned.contains(m) {
                return Err(Error::invalid(path, format!("a `{m}` section"), "none"));
            }
            let keys = entry.keys.as_ref().unwrap_or(&entry.kept);
            for (name, grid) in [("kept", &entry.kept), ("keys", keys)] {
                let q = format!("{path}.{name}");
                validate::len(&q, grid.len(), g.layers, "one per layer")?;
                for (l, row) in grid.iter().enumerate() {
                    validate::len(
                        &format!("{q}[{l}]"),
                        row.len(),
                        g.kv_heads,
                        "one per KV head",
                    )?;
                    for (h, &x) in row.iter().enumerate() {
                        if x > p.context_len {
                            return Err(Error::invalid(
                                format!("{q}[{l}][{h}]"),
                                format!("at most the context length {}", p.context_len),
                                x,
                            ));
                        }
                    }
                }
            }
            let rule = PreviewEntry::of(&self.budgets_at(*m, p.context_len)?);
            let found = [(&entry.kept, "kept"), (keys, "keys")];
            let expect = [&rule.kept, rule.keys.as_ref().unwrap_or(&rule.kept)];
            for ((grid, name), want) in found.into_iter().zip(expect) {
                if let Some((l, h)) = first_difference(grid, want) {
                    return Err(Error::invalid(
                        format!("{path}.{name}[{l}][{h}]"),
                        format!("{} (the {m} rule at context {})", want[l][h], p.context_len),
                        grid[l][h],
                    ));
                }
            }
        }
        Ok(())
    }
}

fn first_difference(a: &[Vec<usize>], b: &[Vec<usize>]) -> Option<(usize, usize)> {
    a.iter()
        .zip(b)
        .enumerate()
        .find_map(|(l, (ra, rb))| ra.iter().zip(rb).position(|(x, y)| x != y).map(|h| (l, h)))
}
