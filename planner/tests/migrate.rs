//! Version-1 files upgraded to version 2 (`kvplan migrate`): `fixtures/v1/` holds copies of the
//! version-1 files as they were committed before the schema bump — the SmolLM2 plan and the
//! hand-made profile.

use kvplan_planner::migrate::{migrate, Kind};
use kvplan_planner::{BudgetSemantics, Method, Plan, Profile};
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_version_1_plan_is_refused_with_the_command_that_upgrades_it() {
    let e = Plan::from_json(&fixture("v1/smollm2-135m-instruct.plan.json"))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some(
            "schema_version: expected 2, found 1 (a version-1 plan: upgrade it with `kvplan \
             migrate FILE`)"
        )
    );
}

#[test]
fn v1_plan_gains_windows_semantics_and_notes_and_keeps_the_rest() {
    let old = fixture("v1/smollm2-135m-instruct.plan.json");
    let m = migrate(&old).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (m.kind, m.from, m.to, m.changed()),
        (Kind::Plan, 1, 2, true)
    );
    let plan = Plan::from_json(&m.text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.model.geometry.layer_windows, vec![None; 30]);
    assert_eq!(plan.budget_semantics, BudgetSemantics::of(&Method::ALL));
    assert!(plan.notes.is_empty(), "{:?}", plan.notes);
    // Everything the version-1 file had is unchanged.
    let (a, b) = (json(&old), json(&m.text));
    for key in ["provenance", "target", "sections", "preview"] {
        assert_eq!(a[key], b[key], "{key}");
    }
    for key in ["layers", "q_heads", "kv_heads", "head_dim", "q_to_kv"] {
        assert_eq!(
            a["model"]["geometry"][key], b["model"]["geometry"][key],
            "{key}"
        );
    }
    // The expected migration: when it was the committed plan, the golden tests rebuilt it byte
    // for byte from the migrated profile (tests/fixtures/README.md).
    let expected = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/v2/smollm2-135m-instruct.migrated.plan.json");
    let expected = std::fs::read_to_string(&expected).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        m.text == expected,
        "migrated v1 plan differs from the expected migration"
    );
    // Migrating again changes nothing.
    let again = migrate(&m.text).unwrap_or_else(|e| panic!("{e}"));
    assert!(!again.changed() && again.text == m.text);
}

#[test]
fn v1_profile_becomes_the_v2_profile() {
    // The hand-made profile was regenerated at version 2 by make_handmade.py; migrating its
    // version-1 copy gives the same profile.
    let m = migrate(&fixture("v1/smollm2-handmade.profile.json")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((m.kind, m.from, m.to), (Kind::Profile, 1, 2));
    let migrated = Profile::from_json(&m.text).unwrap_or_else(|e| panic!("{e}"));
    let v2 = Profile::from_json(&fixture("smollm2-handmade.profile.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(migrated, v2);
}

#[test]
fn unknown_versions_kinds_and_architectures_are_errors() {
    let err = |text: &str| {
        migrate(text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let old = fixture("v1/smollm2-135m-instruct.plan.json");
    let mut v = json(&old);
    v["model"]["architecture"] = Value::from("gemma3");
    assert_eq!(
        err(&v.to_string()),
        "model.architecture: expected llama (version-1 files were only written for llama \
         models, all layers global; rebuild others with `kvplan profile`), found \"gemma3\""
    );
    let mut v = json(&old);
    v["schema_version"] = Value::from(3);
    assert_eq!(
        err(&v.to_string()),
        "schema_version: expected a plan version from 1 to 2, found 3"
    );
    assert_eq!(
        err(r#"{"schema_version": 1}"#),
        ".: expected a plan (with `sections`) or a profile (with `settings`), found neither"
    );
    // A broken v1 file is reported at its JSON path, after the upgrade.
    let mut v = json(&old);
    v["sections"]["spindle"]["alpha"] = Value::from(0.6);
    assert_eq!(
        err(&v.to_string()),
        "sections.spindle.alpha: expected (1 + β)/2 = 0.525, found 0.6"
    );
}
