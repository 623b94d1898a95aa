//! Plan files (schema 2, `Plan::from_json`); a plan accepted must give budgets for each of its
//! methods at a few context lengths without panicking, and its summary.
#![no_main]

use kvplan_planner::Plan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = Plan::from_json(text) else {
        return;
    };
    for method in plan.methods() {
        for n in [1, 64, 1000, 8192] {
            let _ = plan.budgets_at(method, n);
        }
    }
    let _ = kvplan_planner::export::summary::summary(&plan, 1024, 2);
    let again = plan.to_json().unwrap_or_else(|e| panic!("{e}"));
    let back = Plan::from_json(&again).unwrap_or_else(|e| panic!("a written plan reloads: {e}"));
    assert_eq!(back, plan);
});
