//! Architectures from GGUF metadata: refusals named by key or tensor, the per-architecture rules
//! of the loader (RoPE row order, biases), Gemma 3's windows and bases, and the sliding-window
//! mask in both attention kernels. Files are tiny models built in memory.

use burn::backend::Flex;
use burn::tensor::{Tensor, TensorData};

use super::*;
use crate::generate::argmax;
use crate::gguf::{GgufWriter, MetaValue};
use crate::test_model::{rewrite, tiny_gguf, TinySpec};

type B = Flex;

const D: usize = 8;
const NH: usize = 4;
const NKV: usize = 2;
const H: usize = NH * D;
const V: usize = 20;

fn spec(layers: usize) -> TinySpec {
    TinySpec {
        seed: 77,
        layers,
        heads: NH,
        kv_heads: NKV,
        head_dim: D,
        hidden: H,
        ffn: 24,
        vocab: V,
        ctx: 64,
        qk_scale: 0.5,
        random_norms: true,
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
        ("rope_freqs.weight", vec![D / 2]),
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
        ("llama.rope.scaling.type", MetaValue::String("yarn".into())),
        ("llama.rope.scale_linear", MetaValue::F32(2.0)),
        ("llama.rope.dimension_count", MetaValue::U32((D / 2) as u32)),
        (
            "llama.attention.value_length",
            MetaValue::U32((2 * D) as u32),
        ),
        ("llama.attention.sliding_window", MetaValue::U32(4)),
        ("llama.final_logit_softcapping", MetaValue::F32(30.0)),
    ];
    for (key, value) in cases {
        let err = load_err(&rewrite(&g, "llama", &[(key, value)], &[]));
        assert!(err.contains(key), "{key}: {err}");
    }
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
        err.contains("\"mamba\"") && err.contains("llama, qwen2, gemma3"),
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
