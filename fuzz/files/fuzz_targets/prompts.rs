//! The exported-prompts file (`kvplan eval … --export-prompts`, format `kvplan-prompts/v1`),
//! read with the checks of its reader (`PromptsFile::from_json`), written back and read again to
//! the same value.
#![no_main]

use kvplan_eval::prompt::PromptsFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(file) = PromptsFile::from_json(text, "fuzz") else {
        return;
    };
    let again = serde_json::to_string(&file).unwrap_or_else(|e| panic!("{e}"));
    let back = PromptsFile::from_json(&again, "fuzz")
        .unwrap_or_else(|e| panic!("written prompts read again: {e}"));
    assert_eq!(back, file);
});
