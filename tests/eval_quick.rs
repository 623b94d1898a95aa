//! `kvplan eval niah --quick` end to end on the shipped model: records, results and table are
//! written, FullKV holds the whole cache and the presses less, and a second run reuses every
//! cell instead of running the model again.

mod common;

use common::{kvplan_ok, read_json};

use std::path::PathBuf;

use kvplan_plots::EvalResults;

fn scratch(name: &str) -> PathBuf {
    common::scratch("eval", name)
}

#[test]
fn quick_niah_writes_records_results_and_table_and_resumes() {
    let model = common::shipped_model();
    let dir = scratch("quick");
    let (model_s, dir_s) = (model.to_string_lossy(), dir.to_string_lossy());
    let args = [
        "eval",
        "niah",
        "--quick",
        "--methods",
        "full,streaming,snapkv,pyramid,pod",
        "--model",
        &model_s,
        "--out",
        &dir_s,
    ];
    let (o, err) = kvplan_ok(&args);
    let out = dir.join("quick");
    let records = read_json(&out.join("SmolLM2-135M-Instruct.niah.records.json"));
    let recs = records["records"].as_array().expect("records");
    assert_eq!(recs.len(), 5, "full once, four presses at budget 64");
    for r in recs {
        assert_eq!(r["context_len"], 512);
        assert_eq!(r["depth"], 0.5);
        let score = r["score"].as_f64().expect("score");
        assert!((0.0..=1.0).contains(&score), "{r}");
        let value = r["expected"][0].as_str().expect("expected");
        assert!(r["needle"].as_str().expect("needle").contains(value));
        let frac = r["kv_fraction"].as_f64().expect("kv_fraction");
        // Over the whole generation: the peak share is at least the share after the prompt
        // (one of its measurements) and at least the mean.
        let peak = r["kv_peak"].as_f64().expect("kv_peak");
        let mean = r["kv_mean"].as_f64().expect("kv_mean");
        assert!(peak >= frac && peak >= mean && mean > 0.0, "{r}");
        // The prompt's own needle is its cluster.
        let key = r["cluster"].as_str().expect("cluster");
        assert!(r["needle"].as_str().expect("needle").contains(key), "{r}");
        if r["method"] == "full" {
            assert_eq!((frac, peak, mean), (1.0, 1.0, 1.0));
            assert!(r["budget"].is_null());
        } else if r["method"] == "pod" {
            // PoD keeps every value and shares distant keys: less than FullKV, not 64 entries.
            assert!(frac < 1.0, "pod holds {frac} of FullKV");
        } else {
            assert!(
                frac < 0.5,
                "{} holds {frac} of FullKV at budget 64",
                r["method"]
            );
        }
    }
    let results = EvalResults::load(&out.join("SmolLM2-135M-Instruct.results.json"))
        .expect("results validate");
    assert_eq!(results.niah.len(), 5);
    assert_eq!(results.quality.len(), 5);
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        table.contains("| full |") && table.contains("| snapkv @ 64 |"),
        "{table}"
    );
    let saved = std::fs::read_to_string(out.join("SmolLM2-135M-Instruct.niah.md")).expect("md");
    assert_eq!(saved, table);
    // Figures by default: one NIAH heatmap per method and budget, PNG and SVG.
    for f in ["niah-full.png", "niah-snapkv-64.png", "niah-pod-64.svg"] {
        let path = out.join("figures").join("SmolLM2-135M-Instruct").join(f);
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(
            len > 1000,
            "{} missing or empty; stderr: {err}",
            path.display()
        );
    }

    // kvpress's records on the same prompt, as tools/kvpress_side_by_side.py writes them (the
    // prompt settings plus its own), are shown beside kvplan's on the next run.
    let mut settings = records["settings"].clone();
    settings["runner"] = "kvpress 0.5.5".into();
    let mut beside = recs[0].clone();
    beside["method"] = "kvpress-snapkv".into();
    beside["budget"] = 64.into();
    let companion = serde_json::json!({"settings": settings, "records": [beside]});
    let companion_path = out.join("SmolLM2-135M-Instruct.niah.kvpress.records.json");
    std::fs::write(&companion_path, companion.to_string()).expect("companion");

    // Again: every cell reused, the same records, kvpress's row in the table.
    let (o, err) = kvplan_ok(&args);
    assert!(err.contains("5 reused"), "{err}");
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        table.contains("| snapkv @ 64 |") && table.contains("| kvpress-snapkv @ 64 |"),
        "{table}"
    );
    let again = read_json(&out.join("SmolLM2-135M-Instruct.niah.records.json"));
    assert_eq!(again, records);

    // A run of one method still shows every method recorded on these prompts, so its Δ columns
    // have their references (snapkv, full).
    let mut one = args;
    one[4] = "streaming";
    let (o, err) = kvplan_ok(&one);
    assert!(
        err.contains(
            "cells of this run's methods 1, of other methods and budgets recorded on the same prompts 4"
        ),
        "{err}"
    );
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    for row in [
        "| full |",
        "| snapkv @ 64 |",
        "| streaming @ 64 |",
        // PoD with the model's own weights is marked untrained (eval/src/marks.rs).
        "| pod ‡ @ 64 |",
    ] {
        assert!(table.contains(row), "{row} missing: {table}");
    }
    assert!(table.contains("‡ PoD untrained"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn short_streaming_perplexity_writes_curves_for_each_method() {
    let model = common::shipped_model();
    let dir = scratch("ppl");
    let (model_s, dir_s) = (model.to_string_lossy(), dir.to_string_lossy());
    kvplan_ok(&[
        "eval",
        "ppl",
        "--quick",
        "--methods",
        "full,streaming,treekv",
        "--budgets",
        "32",
        "--length",
        "80",
        "--every",
        "20",
        "--model",
        &model_s,
        "--out",
        &dir_s,
    ]);
    let out = dir.join("quick");
    let results = EvalResults::load(&out.join("SmolLM2-135M-Instruct.results.json"))
        .expect("results validate");
    assert_eq!(results.perplexity.len(), 3);
    for c in &results.perplexity {
        // 79 scored tokens: points every 20 and the last.
        assert_eq!(c.positions, vec![20, 40, 60, 79], "{}", c.method);
        assert!(c.perplexity.iter().all(|p| p.is_finite() && *p >= 1.0));
    }
    let records = read_json(&out.join("SmolLM2-135M-Instruct.ppl.records.json"));
    for r in records["records"].as_array().expect("records") {
        assert_eq!(r["nll"].as_array().map(Vec::len), Some(79));
        let frac = r["kv_fraction"].as_f64().expect("kv_fraction");
        if r["method"] == "full" {
            assert_eq!(frac, 1.0);
        } else {
            // 32 entries of 80 tokens at the end of the stream.
            assert!(frac <= 0.5, "{} holds {frac}", r["method"]);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quick_ruler_scores_two_tasks_writes_a_column_per_task_and_resumes() {
    let model = common::shipped_model();
    let dir = scratch("ruler");
    let (model_s, dir_s) = (model.to_string_lossy(), dir.to_string_lossy());
    let args = [
        "eval",
        "ruler",
        "--quick",
        "--tasks",
        "niah_single_2,qa_1",
        "--methods",
        "full,snapkv",
        "--length",
        "512",
        "--model",
        &model_s,
        "--out",
        &dir_s,
    ];
    let (o, _) = kvplan_ok(&args);
    let out = dir.join("quick");
    let records = read_json(&out.join("SmolLM2-135M-Instruct.ruler.records.json"));
    let recs = records["records"].as_array().expect("records");
    assert_eq!(recs.len(), 4, "two tasks × (full, snapkv @ 64)");
    for r in recs {
        assert_eq!(r["context_len"], 512);
        assert!(r["task"] == "niah_single_2" || r["task"] == "qa_1", "{r}");
        let score = r["score"].as_f64().expect("score");
        assert!((0.0..=1.0).contains(&score), "{r}");
        assert!(!r["expected"].as_array().expect("expected").is_empty());
        let frac = r["kv_fraction"].as_f64().expect("kv_fraction");
        if r["method"] == "full" {
            assert_eq!(frac, 1.0);
        } else {
            assert!(frac < 0.5, "snapkv holds {frac} of FullKV at budget 64");
        }
    }
    let results = EvalResults::load(&out.join("SmolLM2-135M-Instruct.results.json"))
        .expect("results validate");
    let tasks: Vec<&str> = results.quality.iter().map(|q| q.task.as_str()).collect();
    for t in ["ruler", "ruler/niah_single_2", "ruler/qa_1"] {
        assert_eq!(
            tasks.iter().filter(|x| **x == t).count(),
            2,
            "{t}: {tasks:?}"
        );
    }
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        table.starts_with(
            "| method @ budget | KV % | average [95% CI] | Δ vs snapkv [95% CI] | Δ vs full [95% CI] | n |"
        ) && table.contains("| method @ budget | KV % | niah_single_2 | qa_1 |"),
        "{table}"
    );
    assert!(table.contains("| snapkv @ 64 |"), "{table}");
    let saved = std::fs::read_to_string(out.join("SmolLM2-135M-Instruct.ruler.md")).expect("md");
    assert_eq!(saved, table);

    // Again: every cell reused, the same records.
    let (_, err) = kvplan_ok(&args);
    assert!(err.contains("4 reused"), "{err}");
    assert_eq!(
        read_json(&out.join("SmolLM2-135M-Instruct.ruler.records.json")),
        records
    );
    let _ = std::fs::remove_dir_all(&dir);
}
