//! Architectures from GGUF metadata: refusals named by key or tensor, the per-architecture rules
//! of the loader (RoPE row order, biases), Gemma 3's windows and bases, and the sliding-window
//! mask in both attention kernels. Files are tiny models built in memory.

use burn::backend::Flex;
use burn::tensor::{Tensor, TensorData};

use super::*;
use crate::generate::argmax;
use crate::gguf::{GgufWriter, MetaValue};
use crate::test_model::{rewrite, tiny_gguf, TinySpec, D, H, NH, NKV};

type B = Flex;

/// The vocabulary of [`spec`]'s models (smaller than [`TinySpec::small`]'s).
const V: usize = 20;

fn spec(layers: usize) -> TinySpec {
    TinySpec {
        ffn: 24,
        vocab: V,
        qk_scale: 0.5,
        random_norms: true,
        ..TinySpec::small(77, layers, 64)
    }
}

fn load(g: &GgufFile) -> Result<Model<B>> {
    Model::from_gguf(g, &Default::default())
}

fn load_err(g: &GgufFile) -> String {
    match load(g) {
        Ok(_) => panic!("the file was accepted"),
        Err(e) => e.to_string(),
    }
}

fn per_layer(layers: usize, names: &[&str], dim: usize) -> Vec<(String, Vec<usize>)> {
    (0..layers)
        .flat_map(|l| {
            names
                .iter()
                .map(move |n| (format!("blk.{l}.{n}"), vec![dim]))
        })
        .collect()
}

#[test]
fn refuses_tensors_the_architecture_does_not_use() {
    let g = tiny_gguf(&spec(2));
    for (name, shape) in [
        ("rope_factors_long.weight", vec![D / 2]),
        ("blk.0.attn_qkv.weight", vec![(NH + 2 * NKV) * D, H]),
        ("blk.2.attn_q.weight", vec![NH * D, H]),
        ("blk.0.attn_q.bias", vec![NH * D]),
        ("blk.00.attn_norm.weight", vec![H]),
        ("blk.1.attn_q_norm.weight", vec![D]),
    ] {
        let bad = rewrite(&g, "llama", &[], &[(name.to_string(), shape)]);
        let err = load_err(&bad);
        assert!(
            err.contains(&format!("tensor {name} is not used by architecture llama")),
            "{name}: {err}"
        );
    }
}

#[test]
fn refuses_metadata_the_runtime_would_run_wrongly() {
    let g = tiny_gguf(&spec(1));
    let cases = [
        (
            "llama.rope.scaling.type",
            MetaValue::String("longrope".into()),
        ),
        ("llama.rope.scale_linear", MetaValue::F32(-2.0)),
        ("llama.rope.dimension_count", MetaValue::U32((D / 2) as u32)),
        (
            "llama.attention.value_length",
            MetaValue::U32((2 * D) as u32),
        ),
        ("llama.final_logit_softcapping", MetaValue::F32(30.0)),
    ];
    for (key, value) in cases {
        let err = load_err(&rewrite(&g, "llama", &[(key, value)], &[]));
        assert!(err.contains(key), "{key}: {err}");
    }
    // A scaling type without the keys it needs names the missing key.
    let yarn = [("llama.rope.scaling.type", MetaValue::String("yarn".into()))];
    let err = load_err(&rewrite(&g, "llama", &yarn, &[]));
    assert!(err.contains("llama.rope.scaling.factor"), "{err}");
    // Gemma's local layers rotate unscaled: any scaling there is refused by name.
    let freqs = [("rope_freqs.weight".to_string(), vec![D / 2])];
    let gemma_meta = [("gemma3.attention.sliding_window", MetaValue::U32(4))];
    let err = load_err(&rewrite(&g, "gemma3", &gemma_meta, &freqs));
    assert!(err.contains("rope_freqs.weight"), "{err}");
    let qwen = rewrite(
        &g,
        "qwen2",
        &[("qwen2.attention.sliding_window", MetaValue::U32(4))],
        &[],
    );
    assert!(load_err(&qwen).contains("qwen2.attention.sliding_window"));
    // The harmless values of the same keys load.
    let fine = [
        ("llama.rope.scaling.type", MetaValue::String("none".into())),
        ("llama.rope.scale_linear", MetaValue::F32(1.0)),
        ("llama.rope.dimension_count", MetaValue::U32(D as u32)),
        ("llama.attention.key_length", MetaValue::U32(D as u32)),
        ("llama.attention.value_length", MetaValue::U32(D as u32)),
    ];
    load(&rewrite(&g, "llama", &fine, &[])).unwrap();
}

#[test]
fn unknown_architecture_lists_the_supported_ones() {
    let g = rewrite(&tiny_gguf(&spec(1)), "mamba", &[], &[]);
    let err = load_err(&g);
    assert!(
        err.contains("\"mamba\"")
            && err.contains("llama, qwen2, qwen3, olmo2, phi3, gemma2, gemma3, smollm3"),
        "{err}"
    );
    // A known family kvplan does not run says what it lacks, in the same one line.
    let err = load_err(&rewrite(&tiny_gguf(&spec(1)), "qwen3moe", &[], &[]));
    assert!(
        err.contains("\"qwen3moe\" (mixture-of-experts") && err.contains("kvplan runs llama"),
        "{err}"
    );
}

/// Column `c` of the fused projection of `m`'s layer 0: `project(e_c)`.
fn projected_unit(m: &Model<B>, c: usize) -> Vec<f32> {
    let mut x = vec![0f32; H];
    x[c] = 1.0;
    let x = Tensor::<B, 2>::from_data(TensorData::new(x, [1, H]), m.device());
    let a = &m.transformer.blocks[0].attention;
    a.project(x).into_data().iter::<f32>().collect()
}

#[test]
fn qwen2_keeps_gguf_row_order_and_adds_biases_llama_unpermutes() {
    let g = tiny_gguf(&spec(1));
    let biases = [
        ("blk.0.attn_q.bias".to_string(), vec![NH * D]),
        ("blk.0.attn_k.bias".to_string(), vec![NKV * D]),
        ("blk.0.attn_v.bias".to_string(), vec![NKV * D]),
    ];
    let qwen_file = rewrite(&g, "qwen2", &[], &biases);
    let (qwen, llama) = (load(&qwen_file).unwrap(), load(&g).unwrap());
    let raw = |n: &str| qwen_file.tensor_f32(n).unwrap().0;
    let rows: Vec<f32> = [raw("blk.0.attn_q.weight"), raw("blk.0.attn_k.weight")].concat();
    let v_rows = raw("blk.0.attn_v.weight");
    let bias: Vec<f32> = biases.iter().flat_map(|(n, _)| raw(n)).collect();
    let c = 3;
    let (q_out, l_out) = (projected_unit(&qwen, c), projected_unit(&llama, c));
    for j in 0..(NH + NKV) * D {
        // NEOX: output j is GGUF row j. NORM: within a head, output j takes GGUF row perm[j].
        let (head, i) = (j / D, j % D);
        let src = if i < D / 2 {
            2 * i
        } else {
            2 * (i - D / 2) + 1
        };
        assert_eq!(q_out[j], rows[j * H + c] + bias[j], "qwen2 output {j}");
        assert_eq!(l_out[j], rows[(head * D + src) * H + c], "llama output {j}");
    }
    for j in 0..NKV * D {
        let at = (NH + NKV) * D + j;
        assert_eq!(q_out[at], v_rows[j * H + c] + bias[at], "qwen2 value {j}");
    }
    let no_bias = rewrite(&g, "qwen2", &[], &biases[1..]);
    assert!(load_err(&no_bias).contains("missing tensor blk.0.attn_q.bias"));
}

/// A metadata-only Gemma 3 file of `layers` layers with window 4 and `extra` keys.
fn gemma_meta(layers: usize, extra: &[(&str, MetaValue)]) -> Result<ModelConfig> {
    let mut w = GgufWriter::new()
        .meta("general.architecture", MetaValue::String("gemma3".into()))
        .meta("gemma3.block_count", MetaValue::U32(layers as u32))
        .meta("gemma3.attention.head_count", MetaValue::U32(NH as u32))
        .meta("gemma3.attention.head_count_kv", MetaValue::U32(1))
        .meta("gemma3.attention.key_length", MetaValue::U32(D as u32))
        .meta("gemma3.embedding_length", MetaValue::U32(H as u32))
        .meta("gemma3.feed_forward_length", MetaValue::U32(24))
        .meta("gemma3.context_length", MetaValue::U32(64))
        .meta("gemma3.rope.freq_base", MetaValue::F32(1e6))
        .meta(
            "gemma3.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-6),
        )
        .meta("gemma3.attention.sliding_window", MetaValue::U32(4))
        .tensor_f32("token_embd.weight", &[V, H], &[0.0; V * H]);
    for (k, v) in extra {
        w = w.meta(k, v.clone());
    }
    ModelConfig::from_gguf(&GgufFile::from_bytes(w.to_bytes()).unwrap())
}

#[test]
fn gemma3_windows_bases_and_scales_follow_the_architecture() {
    let c = gemma_meta(12, &[]).unwrap();
    let globals: Vec<usize> = (0..12).filter(|&l| c.window(l).is_none()).collect();
    assert_eq!(globals, vec![5, 11]);
    assert_eq!(c.window(0), Some(4));
    for l in 0..12 {
        let want = if globals.contains(&l) { 1e6 } else { 1e4 };
        assert_eq!(c.rope_bases[l], want, "layer {l}");
    }
    assert_eq!(c.query_scale, 1.0 / (D as f64).sqrt());
    assert_eq!(c.embed_scale, (H as f64).sqrt());
    // Keys win over the constants: a period of 3, a local base of 500.
    let c = gemma_meta(
        6,
        &[
            ("gemma3.attention.sliding_window_pattern", MetaValue::U32(3)),
            ("gemma3.rope.freq_base_swa", MetaValue::F32(500.0)),
        ],
    )
    .unwrap();
    let windows: Vec<Option<usize>> = (0..6).map(|l| c.window(l)).collect();
    let w = Some(4);
    assert_eq!(windows, vec![w, w, None, w, w, None]);
    assert_eq!(c.rope_bases, vec![500.0, 500.0, 1e6, 500.0, 500.0, 1e6]);
    // One bool per layer, true = windowed.
    let pattern = [true, false, false].map(MetaValue::Bool).to_vec();
    let key = "gemma3.attention.sliding_window_pattern";
    let c = gemma_meta(3, &[(key, MetaValue::Array(pattern))]).unwrap();
    assert_eq!(c.layer_windows, vec![w, None, None]);
    let err = gemma_meta(3, &[(key, MetaValue::U32(0))]).unwrap_err();
    assert!(err.to_string().contains(key), "{err}");
    let err = gemma_meta(
        3,
        &[("gemma3.attn_logit_softcapping", MetaValue::F32(50.0))],
    )
    .unwrap_err();
    assert!(err.to_string().contains("gemma3.attn_logit_softcapping"));
}

/// Last-position logits of `ids`, generic kernel or host kernel.
fn last_logits(m: &mut Model<B>, ids: &[u32], generic: bool) -> Vec<f32> {
    m.set_generic_attention(generic);
    let out = m
        .forward(ids, &mut m.new_cache(), None, Logits::Last)
        .unwrap();
    out.into_data().iter::<f32>().collect()
}

fn close(a: &[f32], b: &[f32], tol: f32) -> bool {
    a.iter().zip(b).all(|(x, y)| (x - y).abs() <= tol)
}

#[test]
fn one_windowed_layer_sees_exactly_its_last_window_in_both_kernels() {
    // With one layer and relative RoPE, the last row of a layer with window w over n tokens
    // attends exactly as the same layer without window over the last w tokens alone.
    let g = tiny_gguf(&spec(1));
    let (mut windowed, mut plain) = (load(&g).unwrap(), load(&g).unwrap());
    let w = 5;
    windowed.transformer.blocks[0].attention.window = Some(w);
    let ids: Vec<u32> = (0..13).map(|i| (i * 7 % V) as u32).collect();
    let tail = &ids[ids.len() - w..];
    for generic in [false, true] {
        let want = last_logits(&mut plain, tail, generic);
        let got = last_logits(&mut windowed, &ids, generic);
        assert!(
            close(&got, &want, 1e-4),
            "generic {generic}: {got:?} vs {want:?}"
        );
        let full = last_logits(&mut plain, &ids, generic);
        assert!(!close(&full, &want, 1e-3), "the window changed nothing");
        // Decoding the last token after a cached prefill masks the same keys.
        let mut cache = windowed.new_cache();
        let (head, last) = ids.split_at(ids.len() - 1);
        windowed
            .forward(head, &mut cache, None, Logits::Last)
            .unwrap();
        let step: Vec<f32> = windowed
            .forward(last, &mut cache, None, Logits::Last)
            .unwrap()
            .into_data()
            .iter::<f32>()
            .collect();
        assert!(close(&step, &want, 1e-4), "generic {generic}: decode step");
    }
}

#[test]
fn tiny_gemma3_runs_alike_in_both_kernels() {
    // Q/K norms, post-norms, GeGLU, scaled embeddings, a window of 3 on layer 0 (layer 1 global):
    // the generic and host kernels agree over a prompt longer than the window.
    let g = tiny_gguf(&spec(2));
    let norms = per_layer(2, &["attn_q_norm.weight", "attn_k_norm.weight"], D);
    let post = per_layer(
        2,
        &["post_attention_norm.weight", "post_ffw_norm.weight"],
        H,
    );
    let meta = [
        ("gemma3.attention.sliding_window", MetaValue::U32(3)),
        ("gemma3.attention.sliding_window_pattern", MetaValue::U32(2)),
    ];
    let file = rewrite(&g, "gemma3", &meta, &[norms, post].concat());
    let mut m = load(&file).unwrap();
    assert_eq!(m.config.layer_windows, vec![Some(3), None]);
    assert_eq!(m.transformer.embed_scale, (H as f64).sqrt());
    let ids: Vec<u32> = (0..9).map(|i| (i * 3 % V) as u32).collect();
    let host = last_logits(&mut m, &ids, false);
    let generic = last_logits(&mut m, &ids, true);
    assert!(close(&host, &generic, 1e-4), "{host:?} vs {generic:?}");
    assert_eq!(argmax(&host), argmax(&generic));
}

/// The config of `g` renamed to `arch` with `meta` and extra `tensors`.
fn config_of(
    arch: &str,
    meta: &[(&str, MetaValue)],
    tensors: &[(String, Vec<usize>)],
) -> ModelConfig {
    let g = rewrite(&tiny_gguf(&spec(8)), arch, meta, tensors);
    ModelConfig::from_gguf(&g).unwrap_or_else(|e| panic!("{arch}: {e}"))
}

#[test]
fn rope_scaling_is_read_as_llama_cpp_writes_it() {
    use super::rope::RopeScaling;
    let s = |v: &str| MetaValue::String(v.into());
    let c = config_of("llama", &[], &[]);
    assert_eq!(c.rope_scaling, RopeScaling::None);
    let linear = [
        ("llama.rope.scaling.type", s("linear")),
        ("llama.rope.scaling.factor", MetaValue::F32(2.0)),
    ];
    let c = config_of("llama", &linear, &[]);
    assert_eq!(c.rope_scaling, RopeScaling::Linear { factor: 2.0 });
    // The older key alone means the same.
    let c = config_of(
        "llama",
        &[("llama.rope.scale_linear", MetaValue::F32(4.0))],
        &[],
    );
    assert_eq!(c.rope_scaling, RopeScaling::Linear { factor: 4.0 });
    let yarn = [
        ("qwen2.rope.scaling.type", s("yarn")),
        ("qwen2.rope.scaling.factor", MetaValue::F32(4.0)),
        (
            "qwen2.rope.scaling.original_context_length",
            MetaValue::U32(32),
        ),
        ("qwen2.rope.scaling.yarn_beta_fast", MetaValue::F32(16.0)),
    ];
    let biases: Vec<(String, Vec<usize>)> = (0..8)
        .flat_map(|l| {
            [("q", NH), ("k", NKV), ("v", NKV)]
                .map(|(w, n)| (format!("blk.{l}.attn_{w}.bias"), vec![n * D]))
        })
        .collect();
    let c = config_of("qwen2", &yarn, &biases);
    assert_eq!(
        c.rope_scaling,
        RopeScaling::Yarn {
            factor: 4.0,
            original_context: 32,
            beta_fast: 16.0,
            beta_slow: 1.0,
            attn_factor: 1.0
        }
    );
    let zero = [
        ("llama.rope.scaling.type", s("yarn")),
        ("llama.rope.scaling.factor", MetaValue::F32(4.0)),
        (
            "llama.rope.scaling.original_context_length",
            MetaValue::U32(0),
        ),
    ];
    let err = load_err(&rewrite(&tiny_gguf(&spec(1)), "llama", &zero, &[]));
    assert!(
        err.contains("llama.rope.scaling.original_context_length"),
        "{err}"
    );
    // Llama 3.x: the factors come from the file's `rope_freqs.weight`, as stored.
    let stored = vec![1.0f32, 1.5, 4.0, 8.0];
    let mut w = GgufWriter::new();
    let tiny = tiny_gguf(&spec(2));
    for (k, v) in &tiny.metadata {
        w = w.meta(k, v.clone());
    }
    for t in &tiny.tensors {
        let (data, shape) = tiny.tensor_f32(&t.name).unwrap();
        w = w.tensor_f32(&t.name, &shape, &data);
    }
    let g = GgufFile::from_bytes(
        w.tensor_f32("rope_freqs.weight", &[D / 2], &stored)
            .to_bytes(),
    )
    .unwrap();
    let c = ModelConfig::from_gguf(&g).unwrap();
    assert_eq!(
        c.rope_scaling,
        RopeScaling::FreqFactors {
            factors: stored.clone()
        }
    );
    let plain = super::rope::Frequencies::new(D, c.rope_theta);
    let scaled = c.rope();
    for (j, (f, s)) in plain.inv_freq().iter().zip(&stored).enumerate() {
        assert_eq!(scaled.layer(1).inv_freq()[j], f / s, "pair {j}");
    }
}

#[test]
fn smollm3_leaves_every_fourth_layer_unrotated() {
    let c = config_of("smollm3", &[], &[]);
    let rotates: Vec<bool> = (0..8).map(|l| c.rope().layer(l).rotates()).collect();
    assert_eq!(rotates, [true, true, true, false, true, true, true, false]);
    let c = config_of(
        "smollm3",
        &[("smollm3.no_rope_layer_step", MetaValue::U32(2))],
        &[],
    );
    assert_eq!(
        c.rope_layers,
        [true, false, true, false, true, false, true, false]
    );
    // A NoPE layer caches its keys as projected: the cached keys are the observed pre-RoPE keys.
    let g = rewrite(&tiny_gguf(&spec(4)), "smollm3", &[], &[]);
    let m = load(&g).unwrap();
    let config = crate::observe::ObserveConfig {
        keys_values: true,
        ..Default::default()
    };
    let mut obs = crate::observe::Observer::new(config, 4);
    let mut cache = m.new_cache();
    let ids = [3u32, 9, 1, 4, 7];
    m.forward(&ids, &mut cache, Some(&mut obs), Logits::Last)
        .unwrap();
    for l in [2, 3] {
        let pre = &obs.layers[l].keys_values[0].keys; // [kv][t][d]
        let (k, _) = cache.layers[l].head(0).unwrap();
        let cached: Vec<f32> = k.into_data().iter::<f32>().collect();
        let same = close(&cached, &pre[..ids.len() * D], 0.0);
        assert_eq!(
            same,
            l == 3,
            "layer {l}: cached keys equal the pre-RoPE keys"
        );
    }
}

#[test]
fn olmo2_normalises_the_whole_projection_and_has_no_pre_norms() {
    let g = tiny_gguf(&spec(1));
    let add = [
        ("blk.0.attn_q_norm.weight".to_string(), vec![NH * D]),
        ("blk.0.attn_k_norm.weight".to_string(), vec![NKV * D]),
        ("blk.0.post_attention_norm.weight".to_string(), vec![H]),
        ("blk.0.post_ffw_norm.weight".to_string(), vec![H]),
    ];
    let pre = |n: &str| n.ends_with("attn_norm.weight") || n.ends_with("ffn_norm.weight");
    let file = crate::test_model::rewrite_keeping(&g, "olmo2", &[], &add, |n| !pre(n));
    let m = load(&file).unwrap();
    let b = &m.transformer.blocks[0];
    assert!(b.attn_norm.is_none() && b.ffn_norm.is_none());
    assert!(b.post_attn_norm.is_some() && b.post_ffn_norm.is_some());
    // project(e_c): the raw column, RMS-normalised over all heads at once, times the weight
    // (NEOX: rows as stored).
    let c = 5;
    let raw = |n: &str| file.tensor_f32(n).unwrap().0;
    let eps = m.config.rms_eps;
    let by_hand = |rows: &[f32], gamma: &[f32]| -> Vec<f32> {
        let col: Vec<f64> = (0..gamma.len()).map(|j| rows[j * H + c] as f64).collect();
        let rms = (col.iter().map(|x| x * x).sum::<f64>() / col.len() as f64 + eps).sqrt();
        col.iter()
            .zip(gamma)
            .map(|(x, g)| (x / rms * *g as f64) as f32)
            .collect()
    };
    let q = by_hand(
        &raw("blk.0.attn_q.weight"),
        &raw("blk.0.attn_q_norm.weight"),
    );
    let k = by_hand(
        &raw("blk.0.attn_k.weight"),
        &raw("blk.0.attn_k_norm.weight"),
    );
    let got = projected_unit(&m, c);
    assert!(
        close(&got[..NH * D], &q, 1e-5),
        "{:?} vs {q:?}",
        &got[..NH * D]
    );
    assert!(close(&got[NH * D..(NH + NKV) * D], &k, 1e-5));
    // A file that still has the pre-norms is refused by tensor name.
    let with_pre = rewrite(&g, "olmo2", &[], &add);
    assert!(
        load_err(&with_pre).contains("blk.0.attn_norm.weight is not used by architecture olmo2")
    );
}

#[test]
fn phi3_fused_tensors_run_as_the_separate_ones() {
    // The same weights as a Qwen2 file with zero biases (both NEOX: rows as stored), Q/K/V as one
    // `attn_qkv` and gate ‖ up as one `ffn_up`: the same logits.
    let g = tiny_gguf(&spec(2));
    let mut w = GgufWriter::new();
    let mut q2 = GgufWriter::new();
    for (k, v) in &g.metadata {
        let k2 = |a: &str| match k.strip_prefix("llama.") {
            Some(rest) => format!("{a}.{rest}"),
            None => k.clone(),
        };
        let (v3, v2) = match k.as_str() {
            "general.architecture" => (
                MetaValue::String("phi3".into()),
                MetaValue::String("qwen2".into()),
            ),
            _ => (v.clone(), v.clone()),
        };
        w = w.meta(&k2("phi3"), v3);
        q2 = q2.meta(&k2("qwen2"), v2);
    }
    let t = |n: &str| g.tensor_f32(n).unwrap();
    for name in ["token_embd.weight", "output_norm.weight", "output.weight"] {
        if g.tensor_info(name).is_some() {
            let (d, s) = t(name);
            w = w.tensor_f32(name, &s, &d);
            q2 = q2.tensor_f32(name, &s, &d);
        }
    }
    for l in 0..2 {
        let n = |s: &str| format!("blk.{l}.{s}");
        let qkv: Vec<f32> = ["attn_q.weight", "attn_k.weight", "attn_v.weight"]
            .iter()
            .flat_map(|s| t(&n(s)).0)
            .collect();
        w = w.tensor_f32(&n("attn_qkv.weight"), &[(NH + 2 * NKV) * D, H], &qkv);
        let gate_up: Vec<f32> = [t(&n("ffn_gate.weight")).0, t(&n("ffn_up.weight")).0].concat();
        w = w.tensor_f32(&n("ffn_up.weight"), &[2 * 24, H], &gate_up);
        // Qwen2 takes every tensor as it is; Phi-3 all but those it holds fused (above).
        let fused = [
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
        ];
        let unfused = [
            "attn_output.weight",
            "ffn_down.weight",
            "attn_norm.weight",
            "ffn_norm.weight",
        ];
        for s in unfused.iter().chain(&fused) {
            let (d, sh) = t(&n(s));
            if !fused.contains(s) {
                w = w.tensor_f32(&n(s), &sh, &d);
            }
            q2 = q2.tensor_f32(&n(s), &sh, &d);
        }
        for (b, heads) in [("q", NH), ("k", NKV), ("v", NKV)] {
            q2 = q2.tensor_f32(
                &n(&format!("attn_{b}.bias")),
                &[heads * D],
                &vec![0.0; heads * D],
            );
        }
    }
    let phi = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let qwen = GgufFile::from_bytes(q2.to_bytes()).unwrap();
    let ids: Vec<u32> = (0..7).map(|i| (i * 5 % V) as u32).collect();
    for generic in [false, true] {
        let a = last_logits(&mut load(&phi).unwrap(), &ids, generic);
        let b = last_logits(&mut load(&qwen).unwrap(), &ids, generic);
        assert!(close(&a, &b, 1e-5), "generic {generic}: {a:?} vs {b:?}");
    }
    // Quantised storage splits the fused rows by blocks: the same logits again.
    let a = last_logits(
        &mut load(&crate::test_model::as_q8_0(&phi)).unwrap(),
        &ids,
        false,
    );
    let b = last_logits(
        &mut load(&crate::test_model::as_q8_0(&qwen)).unwrap(),
        &ids,
        false,
    );
    assert!(close(&a, &b, 1e-5), "q8_0: {a:?} vs {b:?}");
}

#[test]
fn gemma2_caps_scores_and_logits_and_alternates_windows() {
    let g = tiny_gguf(&spec(2));
    let post = per_layer(
        2,
        &["post_attention_norm.weight", "post_ffw_norm.weight"],
        H,
    );
    let meta = |attn: f32, fin: f32| {
        vec![
            ("gemma2.attention.sliding_window", MetaValue::U32(3)),
            ("gemma2.attn_logit_softcapping", MetaValue::F32(attn)),
            ("gemma2.final_logit_softcapping", MetaValue::F32(fin)),
        ]
    };
    let mut m = load(&rewrite(&g, "gemma2", &meta(0.5, 0.25), &post)).unwrap();
    assert_eq!(m.config.layer_windows, vec![Some(3), None]);
    assert_eq!(
        (m.config.attn_softcap, m.config.final_softcap),
        (Some(0.5), Some(0.25))
    );
    assert_eq!(m.transformer.embed_scale, (H as f64).sqrt());
    let ids: Vec<u32> = (0..9).map(|i| (i * 3 % V) as u32).collect();
    let host = last_logits(&mut m, &ids, false);
    let generic = last_logits(&mut m, &ids, true);
    assert!(close(&host, &generic, 1e-5), "{host:?} vs {generic:?}");
    assert!(host.iter().all(|z| z.abs() <= 0.25), "final cap: {host:?}");
    // Loose caps change the logits: each cap is applied.
    let mut loose = load(&rewrite(&g, "gemma2", &meta(1e4, 0.25), &post)).unwrap();
    assert!(
        !close(&last_logits(&mut loose, &ids, false), &host, 1e-4),
        "the score cap did nothing"
    );
}
