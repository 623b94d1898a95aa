//! The committed SmolLM2 plan is what the planner makes of the committed profile: rebuilding it
//! with the options `kvplan plan --budget 128 --method all --date 2026-11-23` uses (preview at
//! the CLI's default context of 8192 tokens, the papers' defaults otherwise) gives the committed
//! file byte for byte. Pins the plan's schema, key order, numbers and preview through any
//! restructuring of the planner.

use kvplan_planner::{build_plan, Method, PlanOptions, Profile, Target};
use std::path::PathBuf;

/// The repository's `plans/` folder (the planner crate lives one level below the root).
fn plans() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../plans")
}

#[test]
fn committed_plan_is_rebuilt_byte_for_byte() {
    let profile = Profile::load(&plans().join("smollm2-135m-instruct.profile.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    let plan_path = plans().join("smollm2-135m-instruct.plan.json");
    let committed = std::fs::read_to_string(&plan_path)
        .unwrap_or_else(|e| panic!("{}: {e}", plan_path.display()));
    // What `kvplan plan` passes: its own version, the date given, the preview at
    // `--context-len` (default 8192), every other option at its default.
    let opts = PlanOptions {
        kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
        date: String::from("2026-11-23"),
        preview_context_len: Some(8192),
        ..PlanOptions::default()
    };
    let built = build_plan(&profile, &Method::ALL, Target::Tokens(128), &opts)
        .and_then(|p| p.to_json())
        .unwrap_or_else(|e| panic!("{e}"));
    if built != committed {
        let line = built
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .map_or(built.lines().count().min(committed.lines().count()), |i| i);
        panic!(
            "rebuilt plan differs from {} first at line {}: built {:?}, committed {:?}",
            plan_path.display(),
            line + 1,
            built.lines().nth(line),
            committed.lines().nth(line)
        );
    }
}
