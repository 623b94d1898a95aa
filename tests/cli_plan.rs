//! `kvplan plan` end to end on the hand-made SmolLM2 profile: the written plan loads and
//! validates, the summary and `kvplan export`'s files are written, and bad inputs fail with
//! clear messages.

mod common;

use common::{kvplan, no_user_plans};
use kvplan_common::committed;
use kvplan_planner::{Method, Plan, Target};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("planner/tests/fixtures/smollm2-handmade.profile.json")
}

/// A fresh, empty scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch("cli", name);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// `kvplan plan --profile PROFILE ARGS… --out OUT`.
fn plan(profile: &Path, args: &[&str], out: &Path) -> Output {
    let (profile, out) = (
        profile.to_str().unwrap_or_default(),
        out.to_str().unwrap_or_default(),
    );
    kvplan(&[&["plan", "--profile", profile][..], args, &["--out", out]].concat())
}

/// `kvplan export PLAN ARGS… --out OUT`.
fn export(plan: &Path, args: &[&str], out: &Path) -> Output {
    let (plan, out) = (
        plan.to_str().unwrap_or_default(),
        out.to_str().unwrap_or_default(),
    );
    kvplan(&[&["export", plan][..], args, &["--out", out]].concat())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that the run failed and that its stderr says `message`.
fn fails_with(o: &Output, message: &str) {
    assert!(!o.status.success(), "succeeded: {}", stderr(o));
    assert!(stderr(o).contains(message), "{}", stderr(o));
}

#[test]
fn writes_a_valid_plan_with_every_method() {
    let dir = scratch("all");
    let out = dir.join("smollm2.plan.json");
    let o = plan(
        &fixture(),
        &[
            "--budget",
            "128",
            "--method",
            "all",
            "--context-len",
            "2048",
            "--date",
            "2026-11-22",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = Plan::load(&out, None).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plan.methods(), Method::ALL.to_vec());
    assert_eq!(plan.target, Target::Tokens(128));
    assert_eq!(plan.provenance.date, "2026-11-22");
    assert_eq!(plan.preview.as_ref().map(|p| p.context_len), Some(2048));
    // Pyramid at n = 2048 (B = 128, α = 8): c = 120, top 6, bottom 234 < 2040, so as at 8192:
    // layer 0 keeps 234 − 12 + 8 = 230 (worked out in planner/tests/fixture_plan.rs).
    let pyramid = plan
        .budgets_at(Method::Pyramid, 2048)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(pyramid.per_layer_per_kv_head[0], vec![230; 3]);
}

/// `plans/<rel>` as committed (not as `kvplan profile` may have rewritten it), copied into `dir`.
fn committed_copy(rel: &str, dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = committed::read(root, rel).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let name = Path::new(rel).file_name().unwrap_or_default();
    let path = dir.join("committed").join(name);
    std::fs::create_dir_all(dir.join("committed")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    path
}

/// The committed plan is what `kvplan plan` builds from the committed profile. Both are read as
/// committed (`git show HEAD:…`), so a `kvplan profile` run that rewrote them in the checkout
/// does not change what this test checks.
#[test]
fn rebuilds_the_committed_plan_byte_for_byte() {
    let dir = scratch("golden");
    let committed_path = committed_copy("plans/smollm2-135m-instruct.plan.json", &dir);
    let profile = committed_copy("plans/smollm2-135m-instruct.profile.json", &dir);
    let out = dir.join("smollm2-135m-instruct.plan.json");
    let o = plan(
        &profile,
        &["--budget", "128", "--method", "all", "--date", "2026-11-23"],
        &out,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let committed = std::fs::read(&committed_path)
        .unwrap_or_else(|e| panic!("{}: {e}", committed_path.display()));
    let built = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    assert!(
        built == committed,
        "{} differs from the committed plans/smollm2-135m-instruct.plan.json (run `diff` on the \
         two)",
        out.display(),
    );
}

#[test]
fn summary_and_exports() {
    let dir = scratch("summary");
    let out = dir.join("p.json");
    let exports = dir.join("exports");
    let o = plan(
        &fixture(),
        &["--ratio", "0.125", "--method", "headkv,pod"],
        &out,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = kvplan(&[
        "plan",
        "--summary",
        out.to_str().unwrap_or_default(),
        "--context-len",
        "1024",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("== headkv =="), "{text}");
    assert!(text.contains("== pod =="), "{text}");
    // FullKV at 1024 tokens, f32: 2 × 1024 × 64 × 4 × 30 × 3 = 47,185,920 bytes.
    assert!(text.contains("vs FullKV 47185920"), "{text}");
    // The score and gate files moved to `kvplan export`; the plan holds retrieval-reasoning
    // scores only (headkv), so they are asked for by name.
    let o = export(
        &out,
        &[
            "--to",
            "headkv,duo",
            "--scores",
            "reasoning",
            "--context-len",
            "1024",
        ],
        &exports,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let line =
        std::fs::read_to_string(exports.join("headkv/headkv_scores.json")).unwrap_or_default();
    assert!(
        line.starts_with("{\"0-0\": [0.01], \"0-1\": [0.01]"),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1);
    let rows =
        std::fs::read_to_string(exports.join("duo/full_attention_heads.tsv")).unwrap_or_default();
    assert_eq!(rows.lines().count(), 30);
    assert!(rows.lines().all(|r| r.split('\t').count() == 3));
    // Beside each export: the context length and target the files are for. Ratio 0.125 at
    // 1024 tokens = 128 per head: DuoAttention's streaming heads keep half of it, 4 sinks + 60
    // recent.
    let manifest =
        std::fs::read_to_string(exports.join("duo/kvplan-export.json")).unwrap_or_default();
    let m: serde_json::Value = serde_json::from_str(&manifest).unwrap_or_default();
    assert_eq!(m["context_len"], 1024, "{manifest}");
    assert_eq!(m["target"]["ratio"], 0.125, "{manifest}");
    let config = std::fs::read_to_string(exports.join("duo/config.json")).unwrap_or_default();
    let c: serde_json::Value = serde_json::from_str(&config).unwrap_or_default();
    assert_eq!(
        (c["sink_size"].clone(), c["recent_size"].clone()),
        (4.into(), 60.into())
    );
    // A method the plan does not hold is one clear error naming its section, and nothing is
    // written (the other formats asked with it included).
    let refused = dir.join("refused");
    let o = export(
        &out,
        &[
            "--to",
            "headkv,vllm",
            "--method",
            "pyramid",
            "--scores",
            "reasoning",
            "--context-len",
            "1024",
        ],
        &refused,
    );
    fails_with(&o, "cannot export");
    fails_with(&o, "sections.pyramid");
    assert!(!refused.exists());
}

/// `kvplan export` without a plan file exports the model's plan as every command finds it: from
/// a folder with no `plans/` and an empty per-user folder, the plan kvplan ships, byte for byte
/// what exporting the committed file writes.
#[test]
fn export_finds_the_models_plan_without_a_file() {
    let dir = scratch("export-no-plan");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kvplan"))
            .args(args)
            .current_dir(&dir)
            .env("KVPLAN_PLANS", no_user_plans())
            .output()
            .unwrap_or_else(|e| panic!("cannot run kvplan: {e}"))
    };
    let common = ["--to", "trtllm", "--context-len", "1024", "--budget", "128"];
    let found = run(&[
        &["export", "--model", "gemma-3-270m", "--out", "found"][..],
        &common[..],
    ]
    .concat());
    assert!(found.status.success(), "{}", stderr(&found));
    assert!(
        stderr(&found).contains("plan gemma-3-270m (shipped with kvplan)"),
        "{}",
        stderr(&found)
    );
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans/gemma-3-270m.plan.json");
    let named = run(&[
        &[
            "export",
            committed.to_str().unwrap_or_default(),
            "--out",
            "named",
        ][..],
        &common[..],
    ]
    .concat());
    assert!(named.status.success(), "{}", stderr(&named));
    for f in ["kv_cache_config.json", "kvplan-export.json"] {
        let read = |d: &str| std::fs::read(dir.join(d).join(f)).unwrap_or_default();
        assert!(!read("found").is_empty(), "{f}");
        assert_eq!(read("found"), read("named"), "{f}");
    }
    // A model with no plan anywhere is one error naming where it looked.
    let none = run(&[
        &["export", "--model", "no-such-model", "--out", "none"][..],
        &common[..],
    ]
    .concat());
    fails_with(&none, "no plan for no-such-model");
    assert!(!dir.join("none").exists());
}

#[test]
fn missing_profile_names_the_file() {
    let dir = scratch("missing");
    let out = dir.join("p.json");
    let o = plan(
        Path::new("/no/such/profile.json"),
        &["--budget", "64"],
        &out,
    );
    fails_with(&o, "cannot read profile /no/such/profile.json");
    assert!(!out.exists());
}

#[test]
fn bad_inputs_fail_clearly() {
    let dir = scratch("bad");
    let out = dir.join("p.json");
    let profile = fixture();
    let p = profile.to_str().unwrap_or_default();
    let o_str = out.to_str().unwrap_or_default();
    let cases: [(&[&str], &str); 5] = [
        (
            &["plan", "--profile", p, "--ratio", "1.5", "--out", o_str],
            "target.ratio: expected a ratio in (0, 1], found 1.5",
        ),
        (
            &[
                "plan",
                "--profile",
                p,
                "--budget",
                "64",
                "--method",
                "pyramidkv",
                "--out",
                o_str,
            ],
            "unknown method `pyramidkv`",
        ),
        (
            &["plan", "--profile", p, "--out", o_str],
            "give the budget target",
        ),
        (&["plan"], "give --profile FILE to build a plan"),
        (
            &[
                "plan",
                "--profile",
                p,
                "--budget",
                "64",
                "--method",
                "pod",
                "--pod-saving",
                "0.99",
                "--out",
                o_str,
            ],
            "pod: no δ reaches a saving of 0.99",
        ),
    ];
    for (args, message) in cases {
        let o = kvplan(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(message), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn corrupt_profile_and_plan_name_file_and_path() {
    let dir = scratch("corrupt");
    let text = std::fs::read_to_string(fixture()).unwrap_or_default();
    let bad = dir.join("bad.profile.json");
    std::fs::write(
        &bad,
        text.replace(
            "\"funnel_top_k\": 16,",
            "\"funnel_top_k\": 16, \"extra\": 1,",
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("p.json");
    let o = plan(&bad, &["--budget", "64"], &out);
    fails_with(&o, &format!("cannot read profile {}", bad.display()));
    fails_with(&o, "settings.extra");

    let plan = dir.join("bad.plan.json");
    std::fs::write(&plan, "{\"schema_version\": 7}").unwrap_or_else(|e| panic!("{e}"));
    let o = kvplan(&["plan", "--summary", plan.to_str().unwrap_or_default()]);
    fails_with(&o, &format!("cannot read plan {}", plan.display()));
    fails_with(&o, "schema_version: expected 2, found 7");
}

/// The version-1 SmolLM2 plan as committed before the schema bump.
fn v1_plan() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("planner/tests/fixtures/v1/smollm2-135m-instruct.plan.json")
}

#[test]
fn a_version_1_plan_names_the_command_that_upgrades_it() {
    let o = kvplan(&["plan", "--summary", v1_plan().to_str().unwrap_or_default()]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("schema_version: expected 2, found 1")
            && err.contains("upgrade it with `kvplan migrate FILE`"),
        "{err}"
    );
}

#[test]
fn migrate_upgrades_in_place_and_a_failed_batch_writes_nothing() {
    let dir = scratch("migrate");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let old = std::fs::read(v1_plan()).unwrap_or_else(|e| panic!("{e}"));
    let plan = dir.join("p.plan.json");
    let bad = dir.join("bad.plan.json");
    std::fs::write(&plan, &old).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&bad, "{\"schema_version\": 1, \"sections\": {}}")
        .unwrap_or_else(|e| panic!("{e}"));
    // One bad file: an error naming it, and the good one is left as it was.
    let o = kvplan(&[
        "migrate",
        plan.to_str().unwrap_or_default(),
        bad.to_str().unwrap_or_default(),
    ]);
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!("cannot migrate {}", bad.display())),
        "{err}"
    );
    assert!(std::fs::read(&plan).is_ok_and(|t| t == old));
    // Alone it is upgraded to the version-2 plan that a plan rebuilt from the migrated profile
    // matched byte for byte (planner/tests/fixtures/README.md), then left alone.
    let o = kvplan(&["migrate", plan.to_str().unwrap_or_default()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("plan version 1 → 2"), "{}", stderr(&o));
    let migrated = root.join("planner/tests/fixtures/v2/smollm2-135m-instruct.migrated.plan.json");
    let expected = std::fs::read(migrated).unwrap_or_else(|e| panic!("{e}"));
    assert!(std::fs::read(&plan).is_ok_and(|t| t == expected));
    let o = kvplan(&["migrate", plan.to_str().unwrap_or_default()]);
    assert!(
        stderr(&o).contains("plan already at version 2"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_plans_decode_policy_is_what_the_presses_do() {
    // A method the plan says is held at its budget while generating is one whose press evicts
    // while decoding (the runtime's capabilities), and no other.
    use kvplan_planner::DecodePolicy;
    for m in Method::ALL {
        let semantics = m.semantics().unwrap_or_else(|| panic!("{m}: no semantics"));
        let caps = kvplan_runtime::press::capabilities(m.into());
        let held = matches!(semantics.decode, DecodePolicy::HeldAtBudget { .. });
        assert_eq!(held, caps.evicts_while_decoding, "{m}");
    }
}

/// Every committed plan's published exports (`plans/exports/<slug>/`) are what `kvplan export
/// --to all --context-len 4096` writes from it today, file for file.
#[test]
fn published_exports_match_the_committed_plans() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plans: Vec<PathBuf> = std::fs::read_dir(root.join("plans"))
        .unwrap_or_else(|e| panic!("plans/: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".plan.json"))
        .collect();
    assert!(plans.len() >= 3, "{plans:?}");
    for plan in plans {
        let name = plan.file_name().unwrap_or_default().to_string_lossy();
        let slug = name.trim_end_matches(".plan.json").to_string();
        let out = scratch(&format!("published-{slug}"));
        // As committed: `kvplan profile` may have rewritten the plan in the checkout.
        let plan = committed_copy(&format!("plans/{name}"), &scratch(&format!("plan-{slug}")));
        let o = export(&plan, &["--to", "all", "--context-len", "4096"], &out);
        assert!(o.status.success(), "{slug}: {}", stderr(&o));
        if slug == "gemma-3-270m" {
            // vLLM can shrink only Gemma 3's local window, and at 4096 tokens the full global
            // layers alone hold more than the plan.
            let e = stderr(&o);
            assert!(
                e.contains("skipped vllm: budgets: expected room beside the 3 full global layers"),
                "{e}"
            );
        }
        let published = root.join("plans/exports").join(&slug);
        // The same formats as the committed folder: what the capability table allows for the
        // model's architecture, the refused ones listed on stderr.
        let listing = |d: &std::path::Path| -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            v.sort();
            v
        };
        let formats = listing(&out);
        assert_eq!(formats, listing(&published), "{slug}: formats");
        for format in &formats {
            let (built, committed) = (out.join(format), published.join(format));
            let files = listing(&built);
            assert!(
                files.contains(&"kvplan-export.json".to_string()),
                "{files:?}"
            );
            assert_eq!(files, listing(&committed), "{slug}/{format}: files");
            for f in files {
                let a = std::fs::read(built.join(&f)).unwrap_or_default();
                let rel = format!("plans/exports/{slug}/{format}/{f}");
                let b = committed::read(root, &rel).unwrap_or_default();
                assert!(
                    a == b,
                    "{slug}/{format}/{f} differs from plans/exports (regenerate: kvplan export \
                     plans/{slug}.plan.json --to all --context-len 4096 --out plans/exports/{slug} \
                     --force)"
                );
            }
        }
    }
}

/// An export into a folder an earlier export filled stops before writing anything when a file
/// would change, naming it; the same bytes again pass; `--force` replaces.
#[test]
fn export_never_replaces_an_earlier_export_silently() {
    let out = scratch("replace");
    let plan = committed_copy(
        "plans/smollm2-135m-instruct.plan.json",
        &scratch("replace-plan"),
    );
    let plan = plan.to_str().unwrap_or_default();
    let dir = out.to_str().unwrap_or_default();
    let run = |n: &str, force: bool| {
        let mut args = vec![
            "export",
            plan,
            "--to",
            "vllm",
            "--context-len",
            n,
            "--out",
            dir,
        ];
        if force {
            args.push("--force");
        }
        kvplan(&args)
    };
    assert!(run("2048", false).status.success());
    let first = std::fs::read(out.join("config_override.json")).unwrap_or_default();
    assert!(run("2048", false).status.success(), "the same bytes again");
    let o = run("1024", false);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("kvplan-export.json")
            && e.contains("--force")
            && e.contains("nothing was written"),
        "{e}"
    );
    assert_eq!(
        std::fs::read(out.join("config_override.json")).unwrap_or_default(),
        first
    );
    let o = run("1024", true);
    assert!(o.status.success(), "{}", stderr(&o));
    let manifest = std::fs::read_to_string(out.join("kvplan-export.json")).unwrap_or_default();
    assert!(manifest.contains("\"context_len\": 1024"), "{manifest}");
}
