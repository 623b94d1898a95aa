//! The integer prefill kernels (`--kernels int8`) against llama.cpp on the same files: every
//! tiny family's `Q8_0` GGUF (`tests/fixtures/<name>-tiny/`, converted and quantised by
//! llama.cpp's own tools), whose logits llama.cpp computed with its own `Q8_0` activations and
//! integer dot products (`llamacpp.json`, llama-cpp-python 0.3.36, f32 KV cache) — the same
//! activation rounding kvplan's integer kernels use (`quantize_row_q8_0`). Beside it, the cost of
//! the integer path against transformers on the dequantised weights (`logits-q8_0.json`, where
//! the f32 kernels are within 3e-5).
//!
//! Its own test binary: the kernel choice is per process (`quant::set_kernels`).

mod common;
mod parity_common;

use kvplan_runtime::generate::argmax;
use kvplan_runtime::gguf::GgmlType;
use kvplan_runtime::model::quant::{self, Kernels};
use parity_common::{all_logits, fixture, floats, ids, load, max_diff};

/// Families whose llama.cpp run has kvplan's semantics (Phi-3: llama.cpp always takes the long
/// LongRoPE factors, kvplan and transformers the short ones below the original context — those
/// two are held to transformers alone).
const SAME_SEMANTICS: &[&str] = &[
    "llama3",
    "llama-linear",
    "llama-yarn",
    "qwen2-yarn",
    "qwen3",
    "mistral",
    "gemma2",
    "olmo2",
    "smollm3",
    "gemma2-wide",
    "qwen3-wide",
    "olmo2-mha",
    "smollm3-8l",
    "llama3-tied",
];

/// Last-position logits against llama.cpp's, absolute: the same activations and products, so
/// only summation order and the odd rounding tie separate them (measured: 13 of 28 cases within
/// 1e-6, the largest 0.125 — a random tiny model amplifies a single flipped rounding).
const LLAMACPP_TOL: f32 = 0.15;
/// How much farther from transformers (on the dequantised weights) kvplan's integer path may
/// be than llama.cpp's own: both round the same activations to 8 bits, which on these random
/// models moves the last logits by 0.06–0.55 (llama.cpp) — the integer path's cost is that.
const BEYOND_LLAMACPP: f32 = 0.05;
/// Phi-3 (no llama.cpp reference with the same factors): distance to transformers, absolute
/// (measured 0.18–0.71).
const PHI3_TOL: f32 = 1.0;

/// The kernel choice is per process: the tests of this binary take it in turn.
static KERNELS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn int8_prefill_matches_llama_cpp_on_every_q8_0_file() {
    let _turn = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    if !quant::int8_available() {
        eprintln!("no AVX2 or AVX-512 VNNI on this CPU: the integer kernels are not built to run");
        return;
    }
    if !quant::int8_multiplies(GgmlType::Q8_0) {
        q8_0_keeps_the_f32_path();
        return;
    }
    quant::set_kernels(Kernels::Int8);
    let (mut identical, mut cases) = (0, 0);
    for (name, dir, model) in q8_0_models() {
        let hf = fixture(&dir, "logits-q8_0.json");
        let cpp = fixture(&dir, "llamacpp.json");
        for case in ["prompt", "long"] {
            let prompt = ids(&hf[case]["ids"]);
            let vocab = model.config.vocab;
            let flat = all_logits(&model, &prompt);
            let last = &flat[(prompt.len() - 1) * vocab..];
            let hf_last = floats(&hf[case]["last_logits"]);
            let to_hf = max_diff(last, &hf_last);
            if !SAME_SEMANTICS.contains(&name.as_str()) {
                eprintln!("{name} {case}: {to_hf} from transformers");
                assert!(to_hf < PHI3_TOL, "{name} {case}: {to_hf} from transformers");
                continue;
            }
            let c = &cpp["files"]["model-q8_0.gguf"]["cases"][case];
            let cpp_last = floats(&c["last_logits"]);
            let to_cpp = max_diff(last, &cpp_last);
            let cpp_to_hf = max_diff(&cpp_last, &hf_last);
            eprintln!(
                "{name} {case}: {to_cpp} from llama.cpp; from transformers {to_hf} \
                 (llama.cpp: {cpp_to_hf})"
            );
            assert!(
                to_cpp < LLAMACPP_TOL,
                "{name} {case}: {to_cpp} from llama.cpp"
            );
            assert!(
                to_hf <= cpp_to_hf + BEYOND_LLAMACPP,
                "{name} {case}: {to_hf} from transformers, llama.cpp {cpp_to_hf}"
            );
            let want = ids(&c["argmax_per_position"]);
            let got: Vec<u32> = flat.chunks_exact(vocab).map(argmax).collect();
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            eprintln!(
                "  argmax differs from llama.cpp's at {differ} of {} positions",
                want.len()
            );
            assert!(
                differ <= 2,
                "{name} {case}: argmax differs at {differ} positions"
            );
            cases += 1;
            identical += usize::from(to_cpp < 1e-5);
        }
    }
    // The same quantised activations as llama.cpp, bit for bit: most cases agree to f32 rounding
    // (argmax: at most 2 positions of 24–84 differ, measured, where two logits are within the
    // quantisation noise).
    eprintln!("{identical} of {cases} cases within 1e-5 of llama.cpp");
    assert!(
        identical * 3 >= cases,
        "only {identical} of {cases} cases agree with llama.cpp"
    );
}

/// Every tiny family's `Q8_0` file, loaded: `(name, fixture folder, model)`.
fn q8_0_models() -> impl Iterator<
    Item = (
        String,
        String,
        kvplan_runtime::model::Model<parity_common::B>,
    ),
> {
    SAME_SEMANTICS
        .iter()
        .chain(&["phi3", "phi3-4k"])
        .map(|name| {
            let dir = format!("{name}-tiny");
            let model = load(
                &std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/fixtures")
                    .join(&dir)
                    .join("model-q8_0.gguf"),
            );
            (name.to_string(), dir, model)
        })
}

/// On a CPU whose integer kernel does not multiply `Q8_0` (AVX2 alone: `quant::int8_multiplies`),
/// `--kernels int8` leaves every `Q8_0` matrix on the f32 path: the logits are the f32 kernels'
/// bit for bit, and within the f32 tolerance of transformers on the dequantised weights.
fn q8_0_keeps_the_f32_path() {
    quant::set_kernels(Kernels::Int8);
    eprintln!(
        "{}: Q8_0 has no integer kernel on this CPU; checking that it keeps the f32 path",
        quant::kernels_in_use()
    );
    for (name, dir, model) in q8_0_models() {
        let hf = fixture(&dir, "logits-q8_0.json");
        for case in ["prompt", "long"] {
            let prompt = ids(&hf[case]["ids"]);
            let vocab = model.config.vocab;
            quant::set_kernels(Kernels::F32);
            let f32_path = all_logits(&model, &prompt);
            quant::set_kernels(Kernels::Int8);
            let asked_int8 = all_logits(&model, &prompt);
            assert!(
                f32_path == asked_int8,
                "{name} {case}: int8 asked moved the logits by {}",
                max_diff(&f32_path, &asked_int8)
            );
            // The Mistral file as converted has no window (every layer global) and transformers
            // windows at 32: the long case differs by design (tests/parity_tiny.rs sets it).
            if (name.as_str(), case) == ("mistral", "long") {
                continue;
            }
            let last = &asked_int8[(prompt.len() - 1) * vocab..];
            let to_hf = max_diff(last, &floats(&hf[case]["last_logits"]));
            assert!(to_hf < 1e-3, "{name} {case}: {to_hf} from transformers");
        }
    }
}

/// The integer path's cost on the catalog's real models (their GGUFs, fetched: `kvplan fetch
/// --model M`), against transformers' float32 logits (`tests/fixtures/<model>/logits.json`) and
/// beside the f32 path: every position's argmax and the last position's logits. For scale,
/// llama.cpp's own integer path on the same files is 0.78 / 1.98 from transformers on SmolLM2's
/// two cases and 0.45 / 0.36 on Qwen 0.5B's, with its argmax off at 0 / 1 and 0 / 2 positions
/// (`tools/int8_llamacpp.py`, llama-cpp-python 0.3.36). Ignored in CI (models); run with
/// `cargo test --release --test int8_parity -- --ignored --nocapture`.
#[test]
#[ignore = "needs the catalog models (kvplan fetch)"]
fn int8_cost_on_the_catalog_models() {
    let _turn = KERNELS.lock().unwrap_or_else(|e| e.into_inner());
    if !quant::int8_available() {
        return;
    }
    for (model, fixture_dir) in [
        ("smollm2-135m-instruct", "smollm2"),
        ("qwen2.5-coder-0.5b-instruct", "qwen2.5-coder-0.5b-instruct"),
        ("gemma-3-270m", "gemma-3-270m"),
        ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-1.5b-instruct"),
    ] {
        let m = load(&common::catalog_model(model));
        let fx = fixture(fixture_dir, "logits.json");
        let vocab = m.config.vocab;
        for case in ["prompt", "chat"] {
            let prompt = ids(&fx[case]["ids"]);
            let want_last = floats(&fx[case]["last_logits"]);
            let top = fx[case]["top10_ids_per_position"]
                .as_array()
                .expect("top10");
            let want: Vec<u32> = top.iter().map(|r| r[0].as_u64().unwrap() as u32).collect();
            let mut line = format!("{model} {case} ({} tokens):", prompt.len());
            for k in [Kernels::F32, Kernels::Int8] {
                quant::set_kernels(k);
                let flat = all_logits(&m, &prompt);
                let last = &flat[(prompt.len() - 1) * vocab..];
                let d = max_diff(last, &want_last);
                let got: Vec<u32> = flat.chunks_exact(vocab).map(argmax).collect();
                let off = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                line += &format!(" {k}: last logits {d:.3}, argmax off at {off}");
                if k == Kernels::Int8 {
                    // Measured at most 2.10 and 1 position (SmolLM2's chat case; llama.cpp: 1.98
                    // and 1): a kernel that breaks lands far outside.
                    assert!(d < 3.0 && off <= 3, "{line}");
                } else {
                    assert!(d < 1e-2 && off == 0, "{line}");
                }
            }
            eprintln!("{line}");
        }
    }
}
