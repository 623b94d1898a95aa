//! The whole path on every architecture kvplan runs beyond the catalog's, on the tiny
//! converter-made models of `tests/fixtures/<name>-tiny/` (one per architecture): `profile
//! --quick` → the plan it writes → `generate` under every method at a budget below the prompt →
//! `eval niah` on two prompts → `export --to all`. Each step must succeed and say what it did;
//! the numbers are random-weight models' and mean nothing beyond "it ran as designed".
//!
//! The tiny files declare a 256-token context (their RoPE-scaling boundaries sit at 64), shorter
//! than the quick profile's 512-token needle prompts, so each runs here from a copy whose
//! `<arch>.context_length` says 1,024: kvplan's RoPE reads no context length (YaRN and LongRoPE
//! take `rope.scaling.original_context_length`, and LongRoPE its stored attention factor), so the
//! copy computes what the file computes.

mod common;

use std::path::{Path, PathBuf};

use common::{kvplan, read_json};
use kvplan_runtime::gguf::{GgufFile, MetaValue};

/// The methods `generate` runs (the method table's).
const METHODS: [&str; 12] = [
    "full",
    "snapkv",
    "h2o",
    "streaming",
    "pyramid",
    "headkv",
    "headkv-r",
    "spindle",
    "pod",
    "treekv",
    "tova",
    "knorm",
];

/// The tiny model `name` with its context set to `context`, written into `dir`.
fn with_context(name: &str, context: u32, dir: &Path) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}-tiny"))
        .join("model-f32.gguf");
    let g = GgufFile::open(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let arch = g.meta_str("general.architecture").expect("architecture");
    let key = format!("{arch}.context_length");
    let out = dir.join(format!("{name}-tiny.gguf"));
    let bytes = common::gguf_with_key(&src, &key, MetaValue::U32(context));
    std::fs::write(&out, bytes).expect("write the copy");
    out
}

/// Runs kvplan with `args`, failing with its stderr; returns its stderr.
fn ok(args: &[&str]) -> String {
    let o = kvplan(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "kvplan {}: {err}", args.join(" "));
    err
}

/// A scratch folder `label` holding the tiny model `name` at a 1,024-token context, and the
/// model's path.
fn scratch_model(name: &str, label: &str) -> (PathBuf, String) {
    let dir = common::scratch("tiny", label);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let model = with_context(name, 1024, &dir);
    let m = model.to_string_lossy().into_owned();
    (dir, m)
}

/// A scratch folder `label` holding the tiny model `name` at a 1,024-token context and the plan
/// `profile --quick` wrote for it: `(folder, model path, plan path)`.
fn quick_plan(name: &str, label: &str) -> (PathBuf, String, String) {
    let (dir, m) = scratch_model(name, label);
    let plan = dir.join("p.plan.json").to_string_lossy().into_owned();
    let profile = dir.join("p.profile.json").to_string_lossy().into_owned();
    let args = [
        "profile",
        "--model",
        &m,
        "--quick",
        "--out",
        &profile,
        "--plan-out",
        &plan,
    ];
    ok(&[&args[..], &["--no-figures"]].concat());
    (dir, m, plan)
}

fn pipeline(name: &str, architecture: &str, pod: bool) {
    let (dir, m, plan_s) = quick_plan(name, name);
    let plan = PathBuf::from(&plan_s);
    let written = read_json(&plan);
    assert_eq!(written["model"]["architecture"], architecture);
    // A prompt past the budget (16 entries per head), so every press evicts.
    let prompt = "Mary went to the kitchen. John picked up the apple and walked to the garden. \
                  The secret passkey is 71432. Remember it. What is the secret passkey?";
    for method in METHODS {
        let args = [
            "generate",
            "--model",
            &m,
            "--plan",
            &plan_s,
            "--prompt",
            prompt,
            "--method",
            method,
            "--budget",
            "16",
            "--max-new-tokens",
            "4",
        ];
        if method == "pod" && !pod {
            let o = kvplan(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                !o.status.success() && err.contains("pod:"),
                "{name} pod: {err}"
            );
            continue;
        }
        let err = ok(&args);
        assert!(err.contains("KV held"), "{name} {method}: {err}");
        // Phi-3's file windows every layer at 32 entries, which FullKV holds too.
        if !matches!(method, "full" | "pod") && name != "phi3" {
            assert!(
                !err.contains("ratio 1.0000"),
                "{name} {method} kept all: {err}"
            );
        }
    }
    let methods = if pod {
        METHODS.join(",")
    } else {
        METHODS
            .iter()
            .filter(|&&m| m != "pod")
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    };
    let niah = dir.join("niah");
    ok(&[
        "eval",
        "niah",
        "--model",
        &m,
        "--plan",
        &plan_s,
        "--lengths",
        "512",
        "--depths",
        "0.25,0.75",
        "--examples",
        "1",
        "--budgets",
        "64",
        "--methods",
        &methods,
        "--out",
        &niah.to_string_lossy(),
        "--no-figures",
    ]);
    let records = std::fs::read_dir(&niah)
        .expect("niah folder")
        .filter_map(Result::ok)
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(".niah.records.json")
        })
        .expect("a records file");
    let records = read_json(&records.path());
    let n = records["records"].as_array().expect("records").len();
    let presses = methods.split(',').count() - 1;
    assert_eq!(
        n,
        2 * (1 + presses),
        "{name}: two prompts, FullKV once and each press at 64"
    );
    let exports = dir.join("exports");
    let err = ok(&[
        "export",
        &plan_s,
        "--to",
        "all",
        "--context-len",
        "512",
        "--out",
        &exports.to_string_lossy(),
    ]);
    assert!(
        exports.join("kvpress/compression_ratios.json").is_file(),
        "{name}: {err}"
    );
}

macro_rules! tiny_pipeline {
    ($($test:ident: $name:literal, $arch:literal, $pod:literal;)*) => {
        $(
            #[test]
            fn $test() {
                pipeline($name, $arch, $pod);
            }
        )*
    };
}

tiny_pipeline! {
    llama3_runs_the_whole_path: "llama3", "llama", true;
    mistral_runs_the_whole_path: "mistral", "llama", true;
    qwen2_yarn_runs_the_whole_path: "qwen2-yarn", "qwen2", true;
    qwen3_runs_the_whole_path: "qwen3", "qwen3", true;
    phi3_runs_the_whole_path: "phi3", "phi3", false;
    gemma2_runs_the_whole_path: "gemma2", "gemma2", false;
    olmo2_runs_the_whole_path: "olmo2", "olmo2", true;
    smollm3_runs_the_whole_path: "smollm3", "smollm3", true;
}

/// Records of `file` without their timings, sorted: what two runs of the same cells must share.
fn cells(file: &Path) -> Vec<String> {
    let mut out: Vec<String> = read_json(file)["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().expect("a record").remove("seconds");
            r.to_string()
        })
        .collect();
    out.sort();
    out
}

#[test]
fn three_auto_shards_as_three_processes_merge_to_the_unsharded_run() {
    // A Kubernetes Indexed Job of 3 completions: each process reads its JOB_COMPLETION_INDEX
    // through `--shard auto/3`; `eval merge` joins their records into the whole run's.
    let (dir, m, plan) = quick_plan("qwen3", "shards");
    let eval = |out: &Path, shard: &str| -> Vec<String> {
        let out = out.to_string_lossy().into_owned();
        [
            "eval",
            "niah",
            "--model",
            &m,
            "--plan",
            &plan,
            "--lengths",
            "512",
            "--depths",
            "0,0.5,1",
            "--examples",
            "2",
            "--budgets",
            "64",
            "--methods",
            "full,snapkv,streaming,headkv-r",
            "--out",
            &out,
            "--no-figures",
            "--shard",
            shard,
        ]
        .map(str::to_string)
        .to_vec()
    };
    let whole = dir.join("whole");
    let args = eval(&whole, "1/1");
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let sharded = dir.join("sharded");
    let children: Vec<_> = (0..3)
        .map(|i| {
            std::process::Command::new(env!("CARGO_BIN_EXE_kvplan"))
                .args(eval(&sharded, "auto/3"))
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("KVPLAN_PLANS", common::no_user_plans())
                .env("JOB_COMPLETION_INDEX", i.to_string())
                .env_remove("SLURM_ARRAY_TASK_ID")
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a shard")
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let o = child.wait_with_output().expect("a shard");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "shard {i}: {err}");
    }
    let name = "qwen3-tiny.niah";
    let shard_files: Vec<String> = (1..=3)
        .map(|i| {
            let f = sharded.join(format!("{name}.shard-{i}-of-3.records.json"));
            assert!(f.is_file(), "{}", f.display());
            f.to_string_lossy().into_owned()
        })
        .collect();
    let merged = dir.join("merged");
    let mut args = vec!["eval", "merge"];
    args.extend(shard_files.iter().map(String::as_str));
    let merged_s = merged.to_string_lossy().into_owned();
    args.extend(["--out", &merged_s]);
    ok(&args);
    let want = cells(&whole.join(format!("{name}.records.json")));
    assert_eq!(want.len(), 6 * 4, "6 prompts × (FullKV + 3 presses at 64)");
    assert_eq!(cells(&merged.join(format!("{name}.records.json"))), want);
}

#[test]
fn three_profile_shards_merge_to_the_unsharded_profile_byte_for_byte() {
    // Three SLURM array tasks (ids 4–6) each run their third of the trials and samples; the
    // command without --shard merges their files and writes the profile and plan an unsharded
    // run writes, byte for byte, and removes the shards' files.
    let (dir, m, _) = quick_plan("qwen3", "profile-shards");
    let profile_args = |sub: &str| -> Vec<String> {
        let out = dir.join(sub);
        [
            "profile".to_string(),
            "--model".into(),
            m.clone(),
            "--quick".into(),
            "--no-figures".into(),
            "--date".into(),
            "2026-11-29".into(),
            "--out".into(),
            out.join("p.profile.json").to_string_lossy().into_owned(),
            "--plan-out".into(),
            out.join("p.plan.json").to_string_lossy().into_owned(),
        ]
        .to_vec()
    };
    let whole = profile_args("whole");
    ok(&whole.iter().map(String::as_str).collect::<Vec<_>>());
    let mut sharded = profile_args("sharded");
    sharded.extend(["--shard".to_string(), "auto".to_string()]);
    let children: Vec<_> = (4..=6)
        .map(|id| {
            std::process::Command::new(env!("CARGO_BIN_EXE_kvplan"))
                .args(&sharded)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .env("KVPLAN_PLANS", common::no_user_plans())
                .env("SLURM_ARRAY_TASK_ID", id.to_string())
                .env("SLURM_ARRAY_TASK_MIN", "4")
                .env("SLURM_ARRAY_TASK_COUNT", "3")
                .env_remove("JOB_COMPLETION_INDEX")
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start a shard")
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().expect("a shard");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && err.contains("without --shard to merge"),
            "{err}"
        );
    }
    let out = dir.join("sharded");
    assert!(
        !out.join("p.profile.json").exists(),
        "a shard wrote a profile"
    );
    let merge = profile_args("sharded");
    let err = ok(&merge.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(err.matches(": merged ").count(), 3, "{err}");
    for f in ["p.profile.json", "p.plan.json"] {
        let (a, b) = (dir.join("whole").join(f), out.join(f));
        assert_eq!(
            std::fs::read(&a).unwrap(),
            std::fs::read(&b).unwrap(),
            "{f}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".shard-"))
        .collect();
    assert!(left.is_empty(), "shard files left: {left:?}");
}

/// Needle lengths too short for a needle stop `profile` before its first trial, naming the
/// needle and what to change (they used to surface after every retrieval trial had run: twelve
/// minutes on the 1.5B before its four-candidate reasoning needles were placed).
#[test]
fn lengths_too_short_for_a_needle_stop_the_profile_before_any_trial() {
    let (dir, m) = scratch_model("llama3", "short-lengths");
    let out = dir.join("p.profile.json").to_string_lossy().into_owned();
    let o = kvplan(&[
        "profile",
        "--model",
        &m,
        "--quick",
        // Room for a retrieval needle, not for a reasoning one (this tokenizer's counts).
        "--lengths",
        "192",
        "--depths",
        "50",
        "--no-figures",
        "--out",
        &out,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("192-token prompt has no room for the needle of reasoning/")
            && err.contains("give longer --lengths"),
        "{err}"
    );
    assert!(!err.contains("[1/"), "a trial ran before the error: {err}");
    assert!(!dir.join("p.profile.json").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `profile --needles calibrated` runs kvplan's calibrated retrieval-reasoning needles (two-hop
/// bridge facts, the answer's phrase checked) and says so in the profile's notes, so a plan made
/// from it cannot pass for one made from the authors' needles.
#[test]
fn the_calibrated_needle_set_runs_and_is_named_in_the_profile() {
    let (dir, m) = scratch_model("llama3", "calibrated");
    let out = dir.join("p.profile.json");
    let o = out.to_string_lossy().into_owned();
    let args = [
        "profile",
        "--model",
        &m,
        "--quick",
        "--needles",
        "calibrated",
    ];
    ok(&[&args[..], &["--no-figures", "--out", &o]].concat());
    let profile = read_json(&out);
    let trials = profile["details"]["retrieval_reasoning_trials"]
        .as_array()
        .expect("reasoning trials");
    assert!(!trials.is_empty());
    for t in trials {
        let id = t["example"].as_str().unwrap_or("");
        assert!(id.starts_with("reasoning/calibrated-4way-"), "{id}");
    }
    let notes = profile["details"]["notes"].to_string();
    assert!(
        notes.contains("kvplan's calibrated variant, not HeadKV's"),
        "{notes}"
    );
    // How a trial counts, said once: the check, not a score "> 0.5" it does not have.
    assert!(
        notes.contains("trials (kvplan's calibrated check: the response names the answer's phrase"),
        "{notes}"
    );
    assert!(!notes.contains("else 0 > 0.5"), "{notes}");
    // The chance test by needle is recorded beside the one over trials.
    let chance = &profile["settings"]["retrieval_reasoning_chance"];
    assert_eq!(chance["variant"], "calibrated");
    assert!(
        chance["by_needle"]["needles"].as_u64().unwrap_or(0) >= 1,
        "{chance}"
    );
    // Out of range, one clear error before any trial.
    let bad = kvplan(&[&args[..], &["--r2-candidates", "3", "--out", &o]].concat());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("found 3"), "{err}");
    assert!(!err.contains("[1/"), "a trial ran before the error: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
