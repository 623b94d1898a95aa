//! `kvplan migrate` of plan and profile text of schema 1 (or any version): an upgraded text must
//! load as the current schema of its kind, and migrating it again changes nothing.
#![no_main]

use kvplan_planner::migrate::{migrate, Kind};
use kvplan_planner::{Plan, Profile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = migrate(text) else {
        return;
    };
    let loads = match m.kind {
        Kind::Plan => Plan::from_json(&m.text).map(|_| ()),
        Kind::Profile => Profile::from_json(&m.text).map(|_| ()),
    };
    assert!(
        loads.is_ok(),
        "migrated {:?} does not load: {loads:?}",
        m.kind
    );
    let again = migrate(&m.text).unwrap_or_else(|e| panic!("migrating twice: {e}"));
    assert!(!again.changed());
});
