//! Records and results files of `kvplan eval`: a records file of prompt cells (`Record`) or of
//! perplexity streams (`PplRecord`) as a run resumes from it (`RecordsFile::from_json`, the
//! settings taken from the file itself, as a matching run would give them), then aggregated the
//! way the run does; and the results file (`EvalResults::from_json`) written back and reloaded.
#![no_main]

use kvplan_eval::aggregate::aggregate_niah;
use kvplan_eval::records::{Record, RecordsFile};
use kvplan_eval::results::EvalResults;
use kvplan_eval::tasks::ppl::{curves, PplRecord};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let settings: std::collections::BTreeMap<String, String> =
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| serde_json::from_value(v.get("settings")?.clone()).ok())
            .unwrap_or_default();
    if let Ok(file) = RecordsFile::<Record>::from_json(text, "fuzz", settings.clone()) {
        let tasks: Vec<String> = file.records.iter().map(|r| r.task.clone()).collect();
        for task in tasks.iter().take(3) {
            let _ = aggregate_niah(task, &file.records);
        }
    }
    if let Ok(file) = RecordsFile::<PplRecord>::from_json(text, "fuzz", settings) {
        let all: Vec<&PplRecord> = file.records.iter().collect();
        for every in [1, 7, 64] {
            let _ = curves(&all, every);
        }
    }
    if let Ok(results) = EvalResults::from_json(text) {
        let again = results.to_json().unwrap_or_else(|e| panic!("{e}"));
        let back = EvalResults::from_json(&again)
            .unwrap_or_else(|e| panic!("written results reload: {e}"));
        assert_eq!(back, results);
    }
});
