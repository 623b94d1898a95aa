//! Bad plans and profiles are rejected with messages naming the JSON path and what was expected.

mod common;

use common::{build, profile};
use kvplan_planner::{Method, ModelIdentity, Plan, PlanOptions, Profile, Target};
use serde_json::{json, Value};

fn plan_value() -> Value {
    let opts = PlanOptions {
        preview_context_len: Some(1024),
        ..PlanOptions::default()
    };
    let plan = build(&profile(), &Method::ALL, Target::Tokens(64), &opts);
    serde_json::to_value(&plan).unwrap_or_else(|e| panic!("{e}"))
}

/// Leaves the field `key` out of the object `v`.
fn remove(v: &mut Value, key: &str) {
    v.as_object_mut().expect("an object").remove(key);
}

/// The error message of loading `v` as a plan.
fn plan_error(v: &Value) -> String {
    match Plan::from_json(&v.to_string()) {
        Ok(_) => panic!("plan accepted"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that the plan loader rejects `v` with an error starting with `prefix`.
fn rejects(v: &Value, prefix: &str) {
    let e = plan_error(v);
    assert!(e.starts_with(prefix), "{e}");
}

#[test]
fn good_plan_loads() {
    assert!(Plan::from_json(&plan_value().to_string()).is_ok());
}

#[test]
fn unknown_schema_version() {
    let mut v = plan_value();
    v["schema_version"] = json!(3);
    assert_eq!(plan_error(&v), "schema_version: expected 2, found 3");
    v["schema_version"] = json!(1);
    assert_eq!(
        plan_error(&v),
        "schema_version: expected 2, found 1 (a version-1 plan: upgrade it with `kvplan migrate \
         FILE`)"
    );
}

#[test]
fn bad_layer_windows() {
    let mut v = plan_value();
    v["model"]["geometry"]["layer_windows"][4] = json!(0);
    assert_eq!(
        plan_error(&v),
        "model.geometry.layer_windows[4]: expected null (global attention) or a window of at \
         least 1 token, found 0"
    );
    let mut v = plan_value();
    if let Some(w) = v["model"]["geometry"]["layer_windows"].as_array_mut() {
        w.pop();
    }
    assert_eq!(
        plan_error(&v),
        "model.geometry.layer_windows: expected 30 entries (one per layer: null for global \
         attention or a window W >= 1), found 29 entries"
    );
    let mut v = plan_value();
    v["model"]["geometry"]["layer_windows"][4] = json!("global");
    rejects(
        &v,
        "plan: at `model.geometry.layer_windows[4]`: invalid type: string",
    );
    let mut v = plan_value();
    remove(&mut v["model"]["geometry"], "layer_windows");
    rejects(
        &v,
        "plan: at `model.geometry`: missing field `layer_windows`",
    );
}

#[test]
fn budget_semantics_must_be_this_builds() {
    let mut v = plan_value();
    v["budget_semantics"]["observation_window_inside_budget"] = json!(false);
    assert_eq!(
        plan_error(&v),
        "budget_semantics.observation_window_inside_budget: expected true (what this build \
         does), found false"
    );
    let mut v = plan_value();
    v["budget_semantics"]["granularity"] = json!("query_head");
    rejects(
        &v,
        "plan: at `budget_semantics.granularity`: unknown variant `query_head`",
    );
    let mut v = plan_value();
    v["budget_semantics"]["methods"]["snapkv"]["decode"] =
        json!({"cache": "held_at_budget", "compress_every": 1});
    assert_eq!(
        plan_error(&v),
        "budget_semantics.methods.snapkv.decode: expected Grows (what this build does), found \
         HeldAtBudget { compress_every: 1 }"
    );
}

#[test]
fn missing_field() {
    let mut v = plan_value();
    remove(&mut v["sections"]["pyramid"], "beta");
    rejects(
        &v,
        "plan: at `sections.pyramid`: missing field `beta` at line 1",
    );
}

#[test]
fn extra_field() {
    let mut v = plan_value();
    v["sections"]["treekv"]["cache_size"] = json!(5);
    rejects(
        &v,
        "plan: at `sections.treekv.cache_size`: unknown field `cache_size`",
    );
}

#[test]
fn negative_number() {
    let mut v = plan_value();
    v["sections"]["headkv"]["scores"][3][2] = json!(-0.5);
    assert_eq!(
        plan_error(&v),
        "sections.headkv.scores[3][2]: expected a number in [0, 1], found -0.5"
    );
    let mut v = plan_value();
    v["sections"]["pyramid"]["window"] = json!(-8);
    rejects(&v, "plan: at `sections.pyramid.window`: invalid value");
}

#[test]
fn nan_is_not_json() {
    let text = plan_value()
        .to_string()
        .replace("\"tau\":0.7", "\"tau\":NaN");
    let e = Plan::from_json(&text).err().map(|e| e.to_string());
    assert!(
        e.is_some_and(|m| m.starts_with("plan: at `.`")),
        "NaN accepted"
    );
}

#[test]
fn scores_the_geometry_cannot_hold() {
    let mut v = plan_value();
    if let Some(rows) = v["sections"]["headkv-r"]["scores"].as_array_mut() {
        rows.pop();
    }
    assert_eq!(
        plan_error(&v),
        "sections.headkv-r.scores: expected 30 entries (one per layer), found 29 entries"
    );
}

#[test]
fn preview_above_context_or_off_the_rule() {
    let mut v = plan_value();
    v["preview"]["methods"]["pyramid"]["kept"][0][1] = json!(5000);
    assert_eq!(
        plan_error(&v),
        "preview.methods.pyramid.kept[0][1]: expected at most the context length 1024, found 5000"
    );
    // Pyramid at n = 1024, B = 64: c = 56, top 2, bottom 110, step ⌊108/29⌋ = 3 (r = 21);
    // Σ = 30·110 − 3·435 = 1995, target 1680, E = 315 → 10 each, top 15 layers one more:
    // layer 0 keeps 110 − 10 + 8 = 108.
    let mut v = plan_value();
    v["preview"]["methods"]["pyramid"]["kept"][0][1] = json!(100);
    assert_eq!(
        plan_error(&v),
        "preview.methods.pyramid.kept[0][1]: expected 108 (the pyramid rule at context 1024), found 100"
    );
    let mut v = plan_value();
    if let Some(rows) = v["preview"]["methods"]["snapkv"]["kept"][2].as_array_mut() {
        rows.push(json!(64));
    }
    assert_eq!(
        plan_error(&v),
        "preview.methods.snapkv.kept[2]: expected 3 entries (one per KV head), found 4 entries"
    );
}

#[test]
fn pod_blocks_must_cover_the_layers() {
    let mut v = plan_value();
    v["sections"]["pod"]["blocks"][2] = json!([[0, 5], [7, 29]]);
    assert_eq!(
        plan_error(&v),
        "sections.pod.blocks[2][1]: expected a block [6, l] with 6 <= l < 30, found [7, 29]"
    );
    let mut v = plan_value();
    v["sections"]["pod"]["blocks"][0] = json!([[0, 12], [13, 25]]);
    assert_eq!(
        plan_error(&v),
        "sections.pod.blocks[0]: expected blocks covering layers 0..30, found blocks ending at layer 25"
    );
}

#[test]
fn pod_saving_must_match_blocks() {
    let mut v = plan_value();
    v["sections"]["pod"]["saving"] = json!(0.9);
    rejects(&v, "sections.pod.saving: expected 0.7");
}

#[test]
fn spindle_alpha_follows_beta() {
    let mut v = plan_value();
    v["sections"]["spindle"]["alpha"] = json!(0.6);
    assert_eq!(
        plan_error(&v),
        "sections.spindle.alpha: expected (1 + β)/2 = 0.525, found 0.6"
    );
}

#[test]
fn bad_target() {
    let mut v = plan_value();
    v["target"] = json!({"ratio": 0.0});
    assert_eq!(
        plan_error(&v),
        "target.ratio: expected a ratio in (0, 1], found 0"
    );
    v["target"] = json!({"bytes": 10});
    rejects(&v, "plan: at `target`: unknown variant `bytes`");
}

#[test]
fn plan_for_another_model() {
    let plan = Plan::from_json(&plan_value().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let mut other: ModelIdentity = plan.model.clone();
    other.gguf_sha256 = "0".repeat(64);
    let e = plan.check_model(&other).err().map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some(format!(
            "model.gguf_sha256: expected {} (the model in use), found {}",
            "0".repeat(64),
            plan.model.gguf_sha256
        ))
        .as_deref()
    );
    let mut other = plan.model.clone();
    other.geometry.head_dim = 128;
    let e = plan.check_model(&other).err().map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("model.geometry.head_dim: expected 128 (the model in use), found 64")
    );
}

#[test]
fn bad_hash_in_file() {
    let mut v = plan_value();
    v["model"]["gguf_sha256"] = json!("B179");
    assert_eq!(
        plan_error(&v),
        "model.gguf_sha256: expected 64 lowercase hex digits, found \"B179\""
    );
}

#[test]
fn missing_section_is_an_error_when_budgets_are_asked() {
    let plan = build(
        &profile(),
        &[Method::Pyramid],
        Target::Tokens(64),
        &PlanOptions::default(),
    );
    let e = plan
        .budgets_at(Method::HeadKv, 1024)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("the plan has no `headkv` section (build it with --method headkv)")
    );
}

#[test]
fn bad_profile_similarity() {
    let mut v = serde_json::to_value(profile()).unwrap_or_else(|e| panic!("{e}"));
    v["layer_similarity"]["per_head"][1][2][5] = json!(0.3);
    let e = Profile::from_json(&v.to_string())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some(
            "layer_similarity.per_head[1][5][2]: expected 0.3 (symmetric with [2][5]), found 0.82"
        )
    );
    let mut v = serde_json::to_value(profile()).unwrap_or_else(|e| panic!("{e}"));
    v["retrieval"]["trials_kept"] = json!(60);
    let e = Profile::from_json(&v.to_string())
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("retrieval.trials_kept: expected at most trials_total = 50, found 60")
    );
}
