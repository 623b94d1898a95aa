//! Profile files (schema 2, `Profile::from_json`); a profile accepted must plan every method
//! (`build_plan`), as `kvplan plan` and `kvplan profile` do, or refuse with an error.
#![no_main]

use kvplan_planner::{build_plan, Method, PlanOptions, Profile, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profile) = Profile::from_json(text) else {
        return;
    };
    let opts = PlanOptions {
        date: "2026-01-01".into(),
        preview_context_len: Some(2048),
        ..PlanOptions::default()
    };
    for target in [Target::Tokens(128), Target::Ratio(0.25)] {
        if let Ok(plan) = build_plan(&profile, &Method::ALL, target, &opts) {
            for method in plan.methods() {
                let _ = plan.budgets_at(method, 4096);
            }
        }
    }
});
