//! `kvplan eval niah --quick` on the shipped model under the window placements and modes:
//! the prompts export (`--export-prompts`) holds the question-aware ids, the question-agnostic
//! split and where the question ends; a question-agnostic run appends the question uncompressed
//! (counted in the KV fraction) and records its settings; records made under another setting are
//! refused.

mod common;

use common::{kvplan, kvplan_ok, read_json};

use std::path::{Path, PathBuf};

use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::tokenizer::Tokenizer;

fn scratch(name: &str) -> PathBuf {
    common::scratch("window", name)
}

/// The prompts file `kvplan eval TASK_ARGS… --quick --methods full` exports into `dir` on
/// `model` (`--export-prompts`), parsed.
fn exported_prompts(task_args: &[&str], model: &Path, dir: &Path) -> serde_json::Value {
    let file = dir.join("prompts.json");
    let (model_s, dir_s, file_s) = (
        model.to_string_lossy(),
        dir.to_string_lossy(),
        file.to_string_lossy(),
    );
    let rest = [
        "--quick",
        "--methods",
        "full",
        "--model",
        &model_s,
        "--out",
        &dir_s,
        "--export-prompts",
        &file_s,
    ];
    kvplan_ok(&[&["eval"][..], task_args, &rest].concat());
    read_json(&file)
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

#[test]
fn exported_prompts_end_the_question_before_the_template_tail() {
    let (model, dir) = (common::shipped_model(), scratch("export"));
    let p = exported_prompts(&["niah"], &model, &dir);
    assert_eq!(p["format"], "kvplan-prompts/v1");
    assert_eq!(p["task"], "niah");
    assert_eq!(p["settings"]["window"], "question-end");
    assert_eq!(p["settings"]["mode"], "question-aware");
    let prompts = p["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 1, "--quick: one prompt");
    let q = &prompts[0];
    assert_eq!(
        (q["task"].as_str(), q["context_len"].as_u64()),
        (Some("niah"), Some(512))
    );
    assert_eq!(
        (q["depth"].as_f64(), q["example"].as_u64()),
        (Some(0.5), Some(0))
    );
    assert_eq!(q["metric"], "string_match_all");
    let (all, ctx, question) = (
        ids(&q["ids"]),
        ids(&q["context_ids"]),
        ids(&q["question_ids"]),
    );
    assert_eq!(all.len(), 512);
    assert_eq!(
        [ctx.clone(), question].concat(),
        all,
        "NIAH's forms are the prompt cut in two"
    );
    let end = q["window_end"].as_u64().expect("window_end") as usize;
    assert!(ctx.len() < end && end < all.len());
    // The question's last token is its `?`; the template's tail and the answer prefix follow.
    let gguf = GgufFile::open(&model).expect("model");
    let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let asked = tok.decode(&all[ctx.len()..end]).expect("decode");
    let value = q["expected"][0].as_str().expect("expected");
    assert!(
        asked.starts_with("\nWhat is the special magic number for "),
        "{asked:?}"
    );
    assert!(
        asked.ends_with("mentioned in the provided text?"),
        "{asked:?}"
    );
    let tail = tok.decode(&all[end..]).expect("decode");
    assert!(
        tail.starts_with("<|im_end|>\n<|im_start|>assistant\nThe special magic"),
        "{tail:?}"
    );
    assert!(!tail.contains(value));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn question_agnostic_appends_the_question_and_other_settings_are_refused() {
    let model = common::shipped_model();
    let dir = scratch("agnostic");
    let (model_s, dir_s) = (model.to_string_lossy(), dir.to_string_lossy());
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "niah",
            "--quick",
            "--methods",
            "full,snapkv",
            "--no-figures",
            "--model",
            &model_s,
            "--out",
            &dir_s,
        ];
        args.extend_from_slice(extra);
        kvplan(&args)
    };
    let o = run(&["--mode", "question-agnostic"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(table.contains("mode: question-agnostic"), "{table}");
    let records = read_json(&dir.join("quick/SmolLM2-135M-Instruct.niah.records.json"));
    assert_eq!(records["settings"]["mode"], "question-agnostic");
    for r in records["records"].as_array().expect("records") {
        let frac = r["kv_fraction"].as_f64().expect("kv_fraction");
        if r["method"] == "full" {
            assert_eq!(frac, 1.0);
        } else {
            // 64 context entries per head plus the whole question (~20 tokens) of 512.
            assert!(frac > 64.0 / 512.0 && frac < 0.25, "snapkv holds {frac}");
        }
    }
    let o = run(&["--window", "prompt-end"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("mode: question-agnostic → question-aware"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ruler_prompts_split_where_kvpress_splits_them() {
    let (model, dir) = (common::shipped_model(), scratch("ruler"));
    let p = exported_prompts(&["ruler", "--tasks", "vt,qa_1"], &model, &dir);
    assert_eq!(p["task"], "ruler");
    let gguf = GgufFile::open(&model).expect("model");
    let tok = Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let prompts = p["prompts"].as_array().expect("prompts");
    assert_eq!(prompts.len(), 2);
    // (prompt, question start, question end, metric, times the pattern is in the context: vt's
    // one-shot example asks it too, and QA's instruction opens the user message)
    let cases = [
        (
            &prompts[0],
            "Question: Find all variables",
            "in the text above.",
            "string_match_all",
            1,
        ),
        (
            &prompts[1],
            "Answer the question based on",
            "?",
            "string_match_part",
            1,
        ),
    ];
    for (q, start, end, metric, before) in cases {
        assert_eq!(q["metric"], metric);
        assert_eq!(q["context_len"], 1024);
        let all = ids(&q["ids"]);
        let end_at = q["window_end"].as_u64().expect("window_end") as usize;
        let asked = tok.decode(&all[..end_at]).expect("decode");
        assert!(asked.ends_with(end), "{}", &asked[asked.len() - 40..]);
        let tail = tok.decode(&all[end_at..]).expect("decode");
        assert!(
            tail.starts_with("<|im_end|>\n<|im_start|>assistant\n"),
            "{tail:?}"
        );
        let question = tok.decode(&ids(&q["question_ids"])).expect("decode");
        assert!(question.starts_with(start), "{question:?}");
        // The records' question and answer prefix travel with the prompt (the kvpress records
        // made of it copy them for the leaderboard's predictions.csv): the question is asked in
        // the prompt, the answer prefix ends it.
        let asked_q = q["question"].as_str().expect("question");
        assert!(
            !asked_q.is_empty() && asked.contains(asked_q.trim()),
            "{asked_q:?}"
        );
        let prefix = q["answer_prefix"].as_str().expect("answer_prefix");
        assert!(
            tail.trim_end().ends_with(prefix.trim()),
            "{tail:?} / {prefix:?}"
        );
        assert!(q["needle"].is_string());
        let context = tok.decode(&ids(&q["context_ids"])).expect("decode");
        assert!(context.starts_with("<|im_start|>"), "{context:?}");
        assert_eq!(context.matches(start).count(), before);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
