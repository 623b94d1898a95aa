//! Helpers shared by the planner's integration tests: the hand-made SmolLM2 profile
//! (`fixtures/README.md`) and the plans built from it.

#![allow(dead_code)]

use kvplan_planner::{build_plan, Method, Plan, PlanOptions, Profile, Target};
use std::path::PathBuf;

/// The hand-made SmolLM2 profile, `fixtures/smollm2-handmade.profile.json`.
pub fn profile() -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smollm2-handmade.profile.json");
    Profile::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The plan of `methods` at `target` that `opts` build from `profile`; panics with the
/// planner's error.
pub fn build(profile: &Profile, methods: &[Method], target: Target, opts: &PlanOptions) -> Plan {
    build_plan(profile, methods, target, opts).unwrap_or_else(|e| panic!("{e}"))
}
