//! The capability table on the committed plans of each architecture: what vLLM, TensorRT-LLM
//! and llama.cpp are given for Llama (SmolLM2), Qwen2 (Qwen2.5-Coder-0.5B) and Gemma 3 (270M),
//! worked by hand from the plans' layer budgets; refusals by name; `--memory`.

use kvplan_planner::export::deploy::Memory;
use kvplan_planner::export::{export, Export, Format, Request, ScoreSet};
use kvplan_planner::{Method, Plan, Target};
use serde_json::Value;
use std::path::PathBuf;

fn plan(slug: &str) -> Plan {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../plans")
        .join(format!("{slug}.plan.json"));
    Plan::load(&path, None).unwrap_or_else(|e| panic!("{e}"))
}

fn request(format: Format, n: usize, budget: usize) -> Request {
    Request {
        format,
        method: Some(Method::HeadKvR),
        context_len: n,
        target: Some(Target::Tokens(budget)),
        scores: ScoreSet::Retrieval,
        block_size: None,
        memory: None,
    }
}

/// The files of `format` at `n` tokens and `budget` entries per head ([`request`]).
fn exported(p: &Plan, format: Format, n: usize, budget: usize) -> Export {
    export(p, &request(format, n, budget)).unwrap_or_else(|e| panic!("{e}"))
}

/// Why `format` at `n` tokens and `budget` entries per head is refused ([`request`]).
fn refusal(p: &Plan, format: Format, n: usize, budget: usize) -> String {
    match export(p, &request(format, n, budget)) {
        Ok(_) => panic!("{format:?} at {n} tokens, budget {budget}: exported"),
        Err(e) => e.to_string(),
    }
}

/// Why `format` refuses Gemma 3's plan at 4096 tokens and budget 128: the 3 full global layers
/// alone (3 · 4096 = 12 288 entries) hold more than the plan's 3 · 128 + 15 · 512 = 8 064, and
/// the error names the way out (`--budget`).
fn globals_over_the_plan(p: &Plan, format: Format) -> String {
    let err = refusal(p, format, 4096, 128);
    assert!(err.contains("--budget") && err.contains("12288"), "{err}");
    err
}

fn json_file(e: &Export, name: &str) -> Value {
    let f = e.files.iter().find(|f| f.name == name).expect(name);
    serde_json::from_slice(&f.bytes).expect("JSON")
}

const QWEN: &str = "qwen2.5-coder-0.5b-instruct";
const GEMMA: &str = "gemma-3-270m";

#[test]
fn qwen2_on_vllm_is_one_window_never_mixed_layer_types() {
    // At 1024 tokens and budget 512 the two-class reduction would keep layers full (the README's
    // former "10 of 24 layers full"); vLLM's Qwen2 asserts against mixed layer_types, so every
    // layer gets W = the plan's mean, 512.
    let p = plan(QWEN);
    let e = exported(&p, Format::Vllm, 1024, 512);
    let v = json_file(&e, "config_override.json");
    let types: Vec<String> = serde_json::from_value(v["layer_types"].clone()).unwrap();
    assert_eq!(types, vec!["sliding_attention".to_string(); 24]);
    assert_eq!(v["sliding_window"], 512);
    assert_eq!(e.manifest.honours.layers, "one-window");
    // vLLM blocks of 16: in steady decode a window of 512 holds its 511 past tokens and the 2
    // in flight (async scheduling), ⌈513/16⌉ + 1 = 34 blocks = 544 of the 1024 tokens' 64
    // blocks: 24 · 544 = 13 056 slots against the plan's 24 · 512 = 12 288 (+6.25%). At
    // admission ⌈min(511 + 2 · 2048, 1024)/16⌉ + 1 = 65 blocks: 24 · 1040 (+103.1%), more than
    // FullKV's 24 · 1024 — at 1K vLLM's window saves nothing at admission.
    let r = e.manifest.reduction.expect("reduction");
    assert_eq!((r.block_size, r.block_slots), (16, 24 * 544));
    assert!(
        (r.block_bytes_error - 0.0625).abs() < 1e-12,
        "{}",
        r.block_bytes_error
    );
    assert_eq!((r.admission_slots, r.peak_slots), (24 * 1040, 24 * 1040));
    // Bytes a sequence at 2 bytes a number: slots × 2 (K, V) × 2 KV heads × 64 × 2.
    assert_eq!(r.bytes.admission, 24 * 1040 * 2 * 2 * 64 * 2);
    // A budget at the context: no window at all (use_sliding_window false).
    let e = exported(&p, Format::Vllm, 1024, 1024);
    let v = json_file(&e, "config_override.json");
    assert_eq!(
        (v["sliding_window"].clone(), v["use_sliding_window"].clone()),
        (Value::Null, false.into())
    );
}

#[test]
fn gemma_on_vllm_needs_room_beside_the_globals_and_trtllm_keeps_the_local_windows() {
    let p = plan(GEMMA);
    // vLLM can shrink only the local window: at 4096 tokens and budget 128 the 3 full global
    // layers alone (12 288 entries) exceed the plan's 8 064 — refused, naming the way out.
    globals_over_the_plan(&p, Format::Vllm);
    // TensorRT-LLM frees blocks at its smallest window only (one detached-block count per
    // sequence): the 15 local layers keep Gemma's 512 and the 3 global ones share it — a global
    // window below 512 would keep every local layer whole. At budget 128 the plan's 3 · 128
    // global entries are nearest to 3 windows of 512 (1 536), not to a full layer (4 096).
    let e = exported(&p, Format::Trtllm, 4096, 128);
    let windows: Vec<usize> = serde_json::from_value(
        json_file(&e, "kv_cache_config.json")["max_attention_window"].clone(),
    )
    .unwrap();
    assert!(windows.iter().all(|&w| w == 512), "{windows:?}");
    let own = &p.model.geometry.layer_windows;
    assert_eq!(own.iter().filter(|w| w.is_none()).count(), 3);
}

#[test]
fn llamacpp_overrides_gemma_local_window_only() {
    let p = plan(GEMMA);
    // 4096 tokens at budget 128: the 3 full global layers alone (12 288) exceed the plan's
    // 3 · 128 + 15 · 512 = 8 064 entries: refused, naming the way out.
    globals_over_the_plan(&p, Format::Llamacpp);
    // 1024 tokens at budget 512: T = 18 · 512 = 9 216, globals 3 · 1024, the 15 locals share
    // (9 216 − 3 072) / 15 = 409.6 → 410.
    let e = exported(&p, Format::Llamacpp, 1024, 512);
    let line = String::from_utf8(e.files[0].bytes.clone()).unwrap();
    assert_eq!(
        line,
        "--override-kv gemma3.attention.sliding_window=int:410\n"
    );
    // Refused for an architecture without windowed layers.
    let err = refusal(&plan(QWEN), Format::Llamacpp, 1024, 512);
    assert!(err.contains("llamacpp cannot run a qwen2 plan"), "{err}");
}

#[test]
fn gemma_kvpress_and_lukv_leave_the_local_layers_alone() {
    let p = plan(GEMMA);
    let own = p.model.geometry.layer_windows.clone();
    let e = exported(&p, Format::Kvpress, 4096, 128);
    let ratios: Vec<f64> = serde_json::from_value(
        json_file(&e, "compression_ratios.json")["compression_ratios"].clone(),
    )
    .unwrap();
    for (l, r) in ratios.iter().enumerate() {
        if own[l].is_some() {
            assert_eq!(*r, 0.0, "layer {l}");
        } else {
            assert!(*r > 0.9, "layer {l}: {r}");
        }
    }
    // LU-KV: row r−1 averages r/100 over the global layers (within 1/n), 0 on local layers.
    let mut req = request(Format::Lukv, 4096, 128);
    req.method = Some(Method::HeadKvR);
    let e = export(&p, &req).unwrap_or_else(|e| panic!("{e}"));
    let bytes = &e.files[0].bytes;
    let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let v: Vec<f32> = bytes[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (layers, kv) = (18, p.model.geometry.kv_heads);
    for r in [10usize, 50, 90] {
        let row = &v[(r - 1) * layers * kv..r * layers * kv];
        let global: Vec<f64> = (0..layers)
            .filter(|&l| own[l].is_none())
            .flat_map(|l| row[l * kv..(l + 1) * kv].iter().map(|&x| x as f64))
            .collect();
        let mean = global.iter().sum::<f64>() / global.len() as f64;
        let want = r as f64 / 100.0;
        assert!(
            mean >= want - 1e-6 && mean <= want + 1.0 / 4096.0 + 1e-6,
            "r {r}: {mean}"
        );
        assert!((0..layers)
            .filter(|&l| own[l].is_some())
            .all(|l| row[l * kv] == 0.0));
    }
}

#[test]
fn headkv_is_refused_off_llama() {
    let err = refusal(&plan(QWEN), Format::Headkv, 4096, 128);
    assert!(
        err.contains("headkv cannot run a qwen2 plan") && err.contains("llama"),
        "{err}"
    );
}

#[test]
fn memory_picks_the_largest_budget_whose_admission_fits() {
    // SmolLM2: 30 layers, 3 KV heads, head_dim 64, 2 bytes: a token slot is 2·3·64·2 = 768 bytes
    // per layer.
    let p = plan("smollm2-135m-instruct");
    // TensorRT-LLM at 4096 tokens, batch 2: addSequence gives every layer the whole prompt, so
    // FullKV's bytes, 2 · 30 · 4096 · 768, admit any budget, and less admits none.
    let mut req = request(Format::Trtllm, 4096, 128);
    req.target = None;
    let full = 2 * 30 * 4096 * 768u64;
    let memory = |bytes, batch| {
        Some(Memory {
            bytes,
            batch,
            bytes_per_element: 2,
        })
    };
    req.memory = memory(full, 2);
    let e = export(&p, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.manifest.target, Target::Tokens(4096));
    req.memory = memory(full / 8, 2);
    let err = export(&p, &req).unwrap_err().to_string();
    assert!(
        err.starts_with("--memory") && err.contains(&full.to_string()),
        "{err}"
    );
    // vLLM at 32K: a sliding layer is admitted with its window and 2 · 2048 tokens in flight,
    // so a quarter of FullKV admits a budget below the context — the largest whose blocks fit.
    let mut req = request(Format::Vllm, 32768, 128);
    req.target = None;
    let full = 30 * 32768 * 768u64;
    req.memory = memory(full / 4, 1);
    let e = export(&p, &req).unwrap_or_else(|e| panic!("{e}"));
    let Target::Tokens(b) = e.manifest.target else {
        panic!("tokens")
    };
    let admitted = |e: &Export| {
        e.manifest
            .reduction
            .as_ref()
            .map_or(0, |r| r.admission_slots) as u64
    };
    assert!(
        b < 32768 && admitted(&e) * 768 <= full / 4,
        "budget {b}: {}",
        admitted(&e)
    );
    req.memory = None;
    req.target = Some(Target::Tokens(b + 1));
    let next = export(&p, &req).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        admitted(&next) * 768 > full / 4,
        "budget {}: {}",
        b + 1,
        admitted(&next)
    );
    assert!(
        e.manifest.notes[0].contains(&format!("budget {b} per KV head")),
        "{:?}",
        e.manifest.notes
    );
    // Too little for budget 1: one error naming --memory.
    req.target = None;
    req.memory = memory(1000, 1);
    let err = export(&p, &req).unwrap_err().to_string();
    assert!(err.starts_with("--memory"), "{err}");
}

#[test]
fn duo_on_gemma3_streams_global_heads_only() {
    // Gemma 3 270M: 18 layers, one KV head, every 6th layer global (5, 11, 17). Both of
    // DuoAttention's readers apply the pattern to every row, so the 15 windowed layers must stay
    // full (keeping their own 512-token window), and the quantile must fall among the global
    // heads: gate 1 for windowed rows, the global gates halved below it.
    let p = plan(GEMMA);
    let mut req = request(Format::Duo, 1024, 512);
    req.method = None;
    let e = export(&p, &req).unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8(
        e.files
            .iter()
            .find(|f| f.name == "full_attention_heads.tsv")
            .expect("pattern")
            .bytes
            .clone(),
    )
    .unwrap();
    let gates: Vec<f64> = text.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(gates.len(), 18);
    let global = [5, 11, 17];
    for (l, g) in gates.iter().enumerate() {
        if global.contains(&l) {
            assert!((0.0..=0.5).contains(g), "layer {l}: {g}");
        } else {
            assert_eq!(*g, 1.0, "layer {l}");
        }
    }
    // Budget 512 at 1024 tokens over the 3 global heads, streaming 4 + 252: (1536 − 768)/768 = 1
    // full global head; with the 15 windowed heads 16 of 18 full: sparsity (18 − 16 − ½)/17,
    // head_compression_ratio 2/18.
    let c = json_file(&e, "config.json");
    assert_eq!(c["sparsity"].as_f64(), Some(1.5 / 17.0));
    assert_eq!(
        c["head_compression_ratio"].as_f64(),
        Some(1.0 - 16.0 / 18.0)
    );
    // np.quantile(gates, sparsity) with linear interpolation keeps exactly the 16 largest.
    let mut sorted = gates.clone();
    sorted.sort_by(f64::total_cmp);
    let pos: f64 = 1.5 / 17.0 * 17.0;
    let (i, f) = (pos.floor() as usize, pos.fract());
    let q = sorted[i] + f * (sorted[i + 1] - sorted[i]);
    assert_eq!(gates.iter().filter(|&&x| x >= q).count(), 16);
}

#[test]
fn gemma3_on_vllm_shrinks_the_local_window_only() {
    // vLLM 0.33.0's Gemma3Attention windows the layers layer_types marks sliding with
    // config.sliding_window and keeps each type's RoPE: the export writes the model's own
    // layer_types (every 6th layer global) and one local window. At 1024 tokens and budget 512:
    // 18 · 512 = 9216 entries, the 3 globals hold 3 · 1024, (9216 − 3072)/15 = 409.6 → 410.
    let p = plan(GEMMA);
    let e = exported(&p, Format::Vllm, 1024, 512);
    let v = json_file(&e, "config_override.json");
    let types: Vec<String> = serde_json::from_value(v["layer_types"].clone()).unwrap();
    let want: Vec<String> = (0..18)
        .map(|l| {
            if l % 6 == 5 {
                "full_attention"
            } else {
                "sliding_attention"
            }
            .to_string()
        })
        .collect();
    assert_eq!(types, want);
    assert_eq!(v["sliding_window"], 410);
    assert!(v.get("use_sliding_window").is_none(), "{v}");
    assert_eq!(e.manifest.honours.layers, "native-window-only");
    // Where the globals alone hold more than the plan: refused with the reason.
    let err = globals_over_the_plan(&p, Format::Vllm);
    assert!(err.contains("full global layers"), "{err}");
}
