//! The records-only subcommands through the CLI, on records written here: `kvplan eval paired`
//! (a difference worked by hand), `kvplan eval agree` (counts and its exit status) and `kvplan
//! eval without` (what the copy keeps, and no overwrite).

mod common;

use std::path::Path;

use common::kvplan;

/// A NIAH record of `method` at budget 128 on example `example` with answer `response`.
fn record(example: usize, method: &str, response: &str, score: f64) -> serde_json::Value {
    serde_json::json!({
        "task": "niah", "model": "m", "context_len": 1024, "depth": 0.5, "example": example,
        "method": method, "budget": 128, "needle": format!("n{example}"),
        "expected": ["1234567"], "response": response, "score": score, "kv_fraction": 0.2,
        "seconds": 0.1
    })
}

fn write(path: &Path, records: Vec<serde_json::Value>) {
    let file = serde_json::json!({ "settings": { "mode": "question-aware" }, "records": records });
    std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
    std::fs::write(path, file.to_string()).expect("records");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn paired_agree_and_without_from_records_alone() {
    let dir = common::scratch("records-tools", "all");
    let a = dir.join("a/m.niah.records.json");
    // Ten needles: SnapKV finds 1–8, H2O 1–3: SnapKV − H2O = +50 points over 10 independent
    // prompts, 5 discordant pairs all one way: exact McNemar p = 2 · 2⁻⁵ = 0.0625.
    let mut records = Vec::new();
    for e in 0..10 {
        let snap = if (1..=8).contains(&e) { 1.0 } else { 0.0 };
        let h2o = if (1..=3).contains(&e) { 1.0 } else { 0.0 };
        records.push(record(e, "snapkv", &format!("s{snap}"), snap));
        records.push(record(e, "h2o", &format!("h{h2o}"), h2o));
    }
    write(&a, records.clone());
    let a_str = a.to_string_lossy();
    let o = kvplan(&["eval", "paired", &a_str, "snapkv@128", &a_str, "h2o@128"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let line = text(&o.stdout);
    assert!(line.starts_with("snapkv@128 − h2o@128: +50.0 ["), "{line}");
    assert!(line.contains("p 0.062"), "{line}");
    assert!(
        line.contains("(1 tasks, 10 paired prompts in 10 clusters)"),
        "{line}"
    );
    let o = kvplan(&["eval", "paired", &a_str, "snapkv@64", &a_str, "h2o@128"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("no record of row snapkv@64"),
        "{}",
        text(&o.stderr)
    );

    // B: the same cells, H2O's answer on needle 0 changed (its score kept).
    let b = dir.join("b/m.niah.records.json");
    records[1] = record(0, "h2o", "other", 0.0);
    write(&b, records);
    let b_str = b.to_string_lossy();
    let o = kvplan(&["eval", "agree", &a_str, &b_str]);
    assert!(!o.status.success(), "a differing text exits non-zero");
    let table = text(&o.stdout);
    assert!(table.starts_with("20 cells in both"), "{table}");
    assert!(table.contains("| h2o | 10 | 9 | 10 | 10 |"), "{table}");
    assert!(table.contains("| snapkv | 10 | 10 | 10 | 10 |"), "{table}");
    let o = kvplan(&["eval", "agree", &a_str, &a_str]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    let out = dir.join("c/m.niah.records.json");
    let out_str = out.to_string_lossy();
    let o = kvplan(&["eval", "without", &a_str, &out_str, "h2o@128"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let kept = common::read_json(&out);
    let kept = kept["records"].as_array().expect("records");
    assert_eq!(kept.len(), 10);
    assert!(kept.iter().all(|r| r["method"] == "snapkv"));
    let o = kvplan(&["eval", "without", &a_str, &out_str, "snapkv"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("exists"), "{}", text(&o.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
