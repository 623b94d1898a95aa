//! `kvplan export`'s formats from the hand-made SmolLM2 profile, each checked against the layout
//! its reader expects (kvpress 0.5.5's `PerLayerCompressionPress`, `LUKVPress`,
//! `DuoAttentionPress.load_attention_pattern`; HF `config.json` `layer_types`; TensorRT-LLM's
//! `KvCacheConfig`), with budgets worked by hand in `fixture_plan.rs`
//! (`headkv_r_on_smollm2_by_hand`: at B = 128, n = 8192, head (14, kv 1) keeps 3608, (16, kv 0)
//! 2796, (20, kv 2) 2041, (11, kv 0) 1229, (22, kv 1) 706, (8, kv 0) 300, every other head 10).

mod common;

use common::{build, profile};
use kvplan_planner::export::{export, Export, Format, Request, ScoreSet};
use kvplan_planner::{Method, Plan, PlanOptions, Profile, Target};
use serde_json::Value;

/// The plan of `methods` at 128 entries per head, default options.
fn plan_of(p: &Profile, methods: &[Method]) -> Plan {
    build(p, methods, Target::Tokens(128), &PlanOptions::default())
}

fn plan() -> Plan {
    plan_of(&profile(), &Method::ALL)
}

fn request(format: Format) -> Request {
    Request {
        format,
        method: None,
        context_len: 8192,
        target: None,
        scores: ScoreSet::Retrieval,
        block_size: None,
        memory: None,
    }
}

fn run(plan: &Plan, req: &Request) -> Export {
    export(plan, req).unwrap_or_else(|e| panic!("{}: {e}", req.format.name()))
}

fn json_file(e: &Export, name: &str) -> Value {
    let f = e
        .files
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("{name} not in {:?}", e.files.iter().map(|f| &f.name)));
    serde_json::from_slice(&f.bytes).expect("JSON")
}

fn text_file(e: &Export, name: &str) -> String {
    let f = e.files.iter().find(|f| f.name == name).expect(name);
    String::from_utf8(f.bytes.clone()).expect("UTF-8")
}

/// The mean kept entries per KV head of each layer under headkv-r at B = 128, n = 8192.
fn headkv_r_layer_means() -> Vec<f64> {
    let mut kept = vec![[10.0f64; 3]; 30];
    kept[14][1] = 3608.0;
    kept[16][0] = 2796.0;
    kept[20][2] = 2041.0;
    kept[11][0] = 1229.0;
    kept[22][1] = 706.0;
    kept[8][0] = 300.0;
    kept.iter().map(|r| r.iter().sum::<f64>() / 3.0).collect()
}

#[test]
fn trtllm_gets_full_layers_and_one_window() {
    // TensorRT-LLM frees blocks at its smallest window only (blocks.rs): the export writes two
    // classes. headkv-r at n = 8192: the plan's 3840 entries per KV head (30 · 128; the layer
    // means range from 10 to 1209) cannot hold one full layer (8192), so every layer gets
    // W = 3840 / 30 = 128 — not the per-layer means, of which only the smallest would free
    // blocks.
    let means = headkv_r_layer_means();
    assert!((means.iter().sum::<f64>() - 3840.0).abs() < 1e-9);
    assert_eq!(means[14].round(), 1209.0);
    let e = run(&plan(), &request(Format::Trtllm));
    let v = json_file(&e, "kv_cache_config.json");
    let windows: Vec<u64> = serde_json::from_value(v["max_attention_window"].clone()).unwrap();
    assert_eq!(windows, vec![128; 30]);
    assert_eq!(v["sink_token_length"], 0);
    assert_eq!(v["tokens_per_block"], 32);
    // The same list nested under kv_cache_config: for trtllm-serve.
    let yaml = text_file(&e, "extra_llm_api_options.yaml");
    assert!(
        yaml.starts_with("kv_cache_config:\n  max_attention_window: [128, 128, ")
            && yaml.ends_with("tokens_per_block: 32\n"),
        "{yaml}"
    );
    assert_eq!(e.manifest.method, "headkv-r");
    assert_eq!(
        (e.manifest.honours.engine, e.manifest.honours.prefill),
        ("trtllm", Some("unwindowed"))
    );
    assert_eq!(e.manifest.context_len, 8192);
    let r = e.manifest.reduction.as_ref().expect("a reduction");
    assert!((r.plan_entries - 3840.0).abs() < 1e-9, "{}", r.plan_entries);
    assert_eq!(r.reduced_entries, 3840);
    // In steady decode, 32-token blocks: ⌈128/32⌉ + 1 = 5 per layer (kSWAExtraBlock), 160
    // slots, +25% against the plan.
    assert_eq!(r.block_slots, 30 * 160);
    assert!((r.block_bytes_error - 0.25).abs() < 1e-12);
    // At admission every layer holds the whole prompt (addSequence): 30 · 8192.
    assert_eq!((r.admission_slots, r.peak_slots), (30 * 8192, 30 * 8192));
    // One distinct window: the whole pool to it.
    let env = text_file(&e, "trtllm_env.sh");
    assert_eq!(env, "export TRTLLM_WINDOW_SIZE_SHARES=1.0000\n");
}

#[test]
fn vllm_two_classes_and_the_hf_config_keys() {
    // headkv-r at n = 8192: the 3840 entries cannot hold one full layer (8192), so every layer
    // slides over W = 3840 / 30 = 128.
    let e = run(&plan(), &request(Format::Vllm));
    let v = json_file(&e, "config_override.json");
    // The same keys as the one-line --hf-overrides argument.
    let line = text_file(&e, "hf_overrides.txt");
    assert_eq!(line.lines().count(), 1);
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), v);
    let types: Vec<String> = serde_json::from_value(v["layer_types"].clone()).unwrap();
    assert_eq!(types, vec!["sliding_attention".to_string(); 30]);
    assert_eq!(
        (v["sliding_window"].clone(), v["use_sliding_window"].clone()),
        (128.into(), true.into())
    );
    // At n = 256 the same plan target (128 per head) leaves room for full layers: headkv-r's
    // layer means are then different, but the classes still keep the plan's bytes within one
    // window's rounding per layer.
    let mut req = request(Format::Vllm);
    req.context_len = 256;
    let e = run(&plan(), &req);
    let r = e.manifest.reduction.clone().expect("a reduction");
    assert!(
        r.bytes_error.abs() <= 30.0 * 0.5 / r.plan_entries + 1e-12,
        "{r:?}"
    );
    let v = json_file(&e, "config_override.json");
    let types: Vec<String> = serde_json::from_value(v["layer_types"].clone()).unwrap();
    let full = types.iter().filter(|t| *t == "full_attention").count();
    assert_eq!(full, r.layers.iter().filter(|l| *l == "full").count());
}

#[test]
fn kvpress_ratios_are_one_minus_the_kept_share_per_layer() {
    let e = run(&plan(), &request(Format::Kvpress));
    // One file per serving length: 512, 1024, 2048, 4096 and the export's 8192.
    let names: Vec<&str> = e.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "compression_ratios_512.json",
            "compression_ratios_1024.json",
            "compression_ratios_2048.json",
            "compression_ratios_4096.json",
            "compression_ratios.json"
        ]
    );
    // At 512 tokens the plan's 128 per head is a quarter: the ratios average 1 − 128/512.
    let at512: Vec<f64> = serde_json::from_value(
        json_file(&e, "compression_ratios_512.json")["compression_ratios"].clone(),
    )
    .unwrap();
    let mean = at512.iter().sum::<f64>() / 30.0;
    assert!((mean - 0.75).abs() < 1e-12, "{mean}");
    let v = json_file(&e, "compression_ratios.json");
    let ratios: Vec<f64> = serde_json::from_value(v["compression_ratios"].clone()).unwrap();
    assert_eq!(ratios.len(), 30);
    for (r, m) in ratios.iter().zip(headkv_r_layer_means()) {
        assert!((r - (1.0 - m / 8192.0)).abs() < 1e-12, "{r} vs {m}");
    }
    // PerLayerCompressionPress's compression_ratio is their mean: 1 − 128/8192.
    let mean = ratios.iter().sum::<f64>() / 30.0;
    assert!((mean - (1.0 - 128.0 / 8192.0)).abs() < 1e-12, "{mean}");
}

#[test]
fn lukv_curve_is_a_float32_npy_of_99_layers_by_kv_heads() {
    let e = run(&plan(), &request(Format::Lukv));
    assert_eq!(e.files[0].name, "lukv_curve.npy");
    let bytes = &e.files[0].bytes;
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
    assert!(header.contains("'descr': '<f4'") && header.contains("'shape': (99, 30, 3)"));
    let values: Vec<f32> = bytes[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(values.len(), 99 * 30 * 3);
    // Row r−1 averages r/100: the per-head target is ⌊(1 − r/100) · 8192⌋, so the mean prune
    // ratio is r/100 up to 1/8192 (the flooring), and every entry is a ratio in [0, 1].
    for r in 1..=99usize {
        let row = &values[(r - 1) * 90..r * 90];
        let mean = row.iter().map(|&x| x as f64).sum::<f64>() / 90.0;
        let want = r as f64 / 100.0;
        assert!(
            mean >= want - 1e-6 && mean <= want + 1.0 / 8192.0 + 1e-6,
            "r = {r}: {mean}"
        );
        assert!(row.iter().all(|&x| (0.0..=1.0).contains(&x)));
    }
    // At 50%: the retrieval head (14, kv 1) prunes less than a head without retrieval score.
    let at50 = &values[49 * 90..50 * 90];
    assert!(at50[14 * 3 + 1] < at50[0]);
}

#[test]
fn duo_writes_sink_recent_and_gates_per_kv_head() {
    let e = run(&plan(), &request(Format::Duo));
    let names: Vec<&str> = e.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["config.json", "full_attention_heads.tsv"]);
    let config: Value = serde_json::from_slice(&e.files[0].bytes).unwrap();
    // Streaming's 4 sinks + 60 recent = half the plan's 128 per head; the other half pays for
    // full heads: 90 KV heads · 128 = 11 520 entries, 90 · 64 streaming leave 5 760, a full
    // head costs 8192 − 64 = 8128 more: 0 full heads at 8192 tokens → sparsity 1.
    assert_eq!(
        (config["sink_size"].clone(), config["recent_size"].clone()),
        (4.into(), 60.into())
    );
    assert_eq!(
        (
            config["sparsity"].clone(),
            config["head_compression_ratio"].clone()
        ),
        (1.0.into(), 1.0.into())
    );
    // At 1024 tokens: 5 760 / (1024 − 64) = 6 full heads; sparsity (90 − 6 − ½)/89.
    let mut req = request(Format::Duo);
    req.context_len = 1024;
    let c = json_file(&run(&plan(), &req), "config.json");
    assert_eq!(c["sparsity"].as_f64(), Some(83.5 / 89.0));
    assert_eq!(c["head_compression_ratio"].as_f64(), Some(1.0 - 6.0 / 90.0));
    // np.loadtxt(..., delimiter="\t"): 30 rows of 3 numbers in [0, 1]; the head with the
    // largest retrieval score (14, q4 → kv 1, 0.62) is 1.
    let text = std::str::from_utf8(&e.files[1].bytes).unwrap();
    let rows: Vec<Vec<f64>> = text
        .lines()
        .map(|l| l.split('\t').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 30);
    assert!(rows
        .iter()
        .all(|r| r.len() == 3 && r.iter().all(|x| (0.0..=1.0).contains(x))));
    assert_eq!(rows[14][1], 1.0);
    assert_eq!(e.manifest.scores, Some("retrieval"));
}

#[test]
fn headkv_scores_and_an_all_zero_set_refused() {
    let e = run(&plan(), &request(Format::Headkv));
    // head_capacity [layers, query heads]: the KV head's budget minus the 8-token window —
    // (14, q4 → kv 1) 3608 − 8, every 10-entry head 2.
    let cap: Vec<Vec<u64>> =
        serde_json::from_value(json_file(&e, "head_capacity.json")["head_capacity"].clone())
            .unwrap();
    assert_eq!((cap.len(), cap[0].len()), (30, 9));
    assert_eq!((cap[14][4], cap[14][3], cap[0][0]), (3600, 3600, 2));
    // KVCache-Factory's settings: compress prompts from the plan's per-head budget on (its default
    // 2048 would leave shorter prompts whole), one cache per KV head (the default query_head
    // layout holds 3× the bytes here). kv_head mode averages each group's row: exact, as a
    // group's three query heads carry one budget.
    let file = json_file(&e, "head_capacity.json");
    assert_eq!(
        (
            file["window_size"].clone(),
            file["max_capacity_prompt"].clone()
        ),
        (8.into(), 128.into())
    );
    assert_eq!(file["kv_cache_granularity"], "kv_head");
    assert!(cap
        .iter()
        .all(|row| row.chunks(3).all(|g| g.iter().all(|&c| c == g[0]))));
    assert!(
        e.manifest.notes.iter().any(|n| n.contains("3× them")),
        "{:?}",
        e.manifest.notes
    );
    let line = std::str::from_utf8(&e.files[0].bytes).unwrap();
    assert_eq!(line.matches('\n').count(), 1);
    let v: Value = serde_json::from_str(line).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 30 * 9);
    assert_eq!(v["14-4"], serde_json::json!([0.62]));
    // A model that answered no reasoning trial has all-zero retrieval-reasoning scores.
    let mut p = profile();
    for row in &mut p.retrieval_reasoning.scores {
        row.iter_mut().for_each(|s| *s = 0.0);
    }
    let plan = plan_of(&p, &Method::ALL);
    let mut req = request(Format::Headkv);
    req.scores = ScoreSet::Reasoning;
    let err = export(&plan, &req).unwrap_err().to_string();
    assert!(
        err.contains("sections.headkv.scores") && err.contains("all zero"),
        "{err}"
    );
}

#[test]
fn pod_and_missing_sections_are_refused_by_name() {
    let mut req = request(Format::Trtllm);
    req.method = Some(Method::Pod);
    let err = export(&plan(), &req).unwrap_err().to_string();
    assert!(err.contains("--method") && err.contains("pod"), "{err}");
    let only_snapkv = plan_of(&profile(), &[Method::SnapKv]);
    let e = run(&only_snapkv, &request(Format::Kvpress));
    assert_eq!(e.manifest.method, "snapkv");
    req.method = Some(Method::Pyramid);
    let err = export(&only_snapkv, &req).unwrap_err().to_string();
    assert!(err.contains("sections.pyramid"), "{err}");
    let err = "nope".parse::<Format>().unwrap_err().to_string();
    assert!(
        err.contains("--to") && err.contains("vllm, trtllm"),
        "{err}"
    );
}

/// Whether `name` is the file `declared` names (`<m>`: a serving length, digits).
fn is_declared(name: &str, declared: &str) -> bool {
    match declared.split_once("<m>") {
        None => name == declared,
        Some((head, tail)) => name
            .strip_prefix(head)
            .and_then(|rest| rest.strip_suffix(tail))
            .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit())),
    }
}

#[test]
fn every_format_writes_the_files_its_target_declares() {
    // The table's targets on a Llama plan: each writes only the files its target lists (the
    // help prints them), each fixed name among them; one it refuses says why.
    for format in Format::ALL {
        let target = format.target();
        let e = match export(&plan(), &request(format)) {
            Ok(e) => e,
            Err(err) => {
                let refusal = target
                    .capability(kvplan_planner::export::capability::Arch::Llama)
                    .expect_err(format.name());
                assert_eq!(err.to_string(), refusal.to_string());
                continue;
            }
        };
        assert_eq!(e.manifest.format, target.name());
        assert_eq!(e.manifest.read_by, target.reader());
        for f in &e.files {
            assert!(
                target.files().iter().any(|d| is_declared(&f.name, d)),
                "{}: {} not in {:?}",
                format.name(),
                f.name,
                target.files()
            );
        }
        for d in target.files().iter().filter(|d| !d.contains("<m>")) {
            assert!(
                e.files.iter().any(|f| f.name == *d),
                "{}: {d}",
                format.name()
            );
        }
    }
}
