//! The README's two set-up commands in the README's order, on a copy: `kvplan profile` (`--quick`
//! here, so CI can afford it twice) run in a folder whose `plans/` already holds a committed
//! profile and plan, then the check the test suite makes of them (the plan is what `kvplan plan`
//! builds from the profile). A rerun that measures the same profile up to its date and float
//! noise must leave the committed files byte for byte as they were.
//!
//! The committed pair is made here, not copied from `plans/`: a first quick run, with every
//! fractional number below 0.5 moved by 1e-7 (as another CPU's rounding would) and an older date.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kvplan_planner::Profile;
use serde_json::Value;

const PROFILE: &str = "plans/smollm2-135m-instruct.profile.json";
const PLAN: &str = "plans/smollm2-135m-instruct.plan.json";
const COMMITTED_DATE: &str = "2026-11-19";

fn kvplan(dir: &Path, args: &[&str]) -> Output {
    // The per-user plans folder inside the scratch folder: nothing of the user's is read or
    // written.
    Command::new(env!("CARGO_BIN_EXE_kvplan"))
        .args(args)
        .current_dir(dir)
        .env("KVPLAN_PLANS", dir.join("user-plans"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run kvplan: {e}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every fractional number in (0, 0.5) moved up by 1e-7: float noise, well inside every range
/// the profile's validation checks (and inside its 1e-6 symmetry tolerance).
fn jitter(v: &mut Value, moved: &mut usize) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap_or(0.0);
            if x > 0.0 && x < 0.5 {
                if let Some(y) = serde_json::Number::from_f64(x + 1e-7) {
                    *n = y;
                    *moved += 1;
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| jitter(x, moved)),
        Value::Object(o) => o.values_mut().for_each(|x| jitter(x, moved)),
        _ => {}
    }
}

/// The first quick run's profile, jittered and dated [`COMMITTED_DATE`], and the plan `kvplan
/// plan` builds from it: the files "committed" in `dir`.
fn commit_a_pair(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let path = dir.join(PROFILE);
    let text = String::from_utf8_lossy(&read(&path)).into_owned();
    let mut value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    let mut moved = 0;
    jitter(&mut value, &mut moved);
    assert!(moved > 100, "only {moved} numbers jittered");
    value["settings"]["date"] = Value::from(COMMITTED_DATE);
    let profile = Profile::from_json(&value.to_string()).unwrap_or_else(|e| panic!("{e}"));
    profile.save(&path).unwrap_or_else(|e| panic!("{e}"));
    plan_from_profile(dir, PLAN);
    (read(&path), read(&dir.join(PLAN)))
}

/// `kvplan plan` of the profile in `dir` at the committed settings, into `out` (under `dir`).
fn plan_from_profile(dir: &Path, out: &str) {
    let o = kvplan(
        dir,
        &[
            "plan",
            "--profile",
            PROFILE,
            "--budget",
            "128",
            "--method",
            "all",
            "--date",
            COMMITTED_DATE,
            "--out",
            out,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn profile_then_tests_leaves_committed_files_that_differ_only_by_noise() {
    common::shipped_model();
    let dir: PathBuf =
        std::env::temp_dir().join(format!("kvplan-profile-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // A copy of a checkout: the working directory holds plans/, where the main job writes.
    std::fs::create_dir_all(dir.join("plans")).unwrap_or_else(|e| panic!("{e}"));
    let first = kvplan(
        &dir,
        &["profile", "--quick", "--date", "2026-11-20", "--no-figures"],
    );
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(!dir.join("user-plans").exists(), "wrote outside ./plans/");
    let (profile, plan) = commit_a_pair(&dir);

    // The README's main job (quick), dated today.
    let rerun = kvplan(&dir, &["profile", "--quick", "--no-figures"]);
    let err = stderr(&rerun);
    assert!(rerun.status.success(), "{err}");
    assert!(
        err.contains(&format!("kept {PROFILE} (dated {COMMITTED_DATE})")),
        "{err}"
    );
    assert!(err.contains(&format!("kept {PLAN}: unchanged")), "{err}");
    assert!(
        read(&dir.join(PROFILE)) == profile,
        "the profile was rewritten"
    );
    assert!(read(&dir.join(PLAN)) == plan, "the plan was rewritten");
    assert!(!dir
        .join("plans/smollm2-135m-instruct.profile.partial.json")
        .exists());

    // Then the tests' check: the plan rebuilt from the profile in place is the plan in place.
    plan_from_profile(&dir, "rebuilt.plan.json");
    assert!(read(&dir.join("rebuilt.plan.json")) == plan);

    std::fs::remove_dir_all(&dir).ok();
}
