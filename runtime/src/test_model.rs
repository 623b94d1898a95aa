//! Tiny random-weight Llama models built as GGUF bytes in memory, shared by the unit tests of
//! the model, the presses and training (each picks its geometry, seed and weight scales).

use crate::generate::SplitMix64;
use crate::gguf::{GgufFile, GgufWriter, MetaValue};

/// RoPE base of every tiny model.
pub(crate) const THETA: f64 = 10_000.0;
/// RMSNorm ε of every tiny model.
pub(crate) const EPS: f64 = 1e-5;

/// Query heads of [`TinySpec::small`].
pub(crate) const NH: usize = 4;
/// KV heads of [`TinySpec::small`].
pub(crate) const NKV: usize = 2;
/// Dimensions of a head of [`TinySpec::small`].
pub(crate) const D: usize = 8;
/// Hidden size of [`TinySpec::small`].
pub(crate) const H: usize = 32;
/// Feed-forward size of [`TinySpec::small`].
pub(crate) const F: usize = 48;
/// Vocabulary of [`TinySpec::small`].
pub(crate) const V: usize = 50;

/// Geometry and weight draw of a tiny model.
pub(crate) struct TinySpec {
    pub seed: u64,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub hidden: usize,
    pub ffn: usize,
    pub vocab: usize,
    pub ctx: usize,
    /// Scale of the uniform draw of `attn_q` and `attn_k`.
    pub qk_scale: f64,
    /// Random norm weights (output norm in ±1, layer norms in 1 ± 0.5) instead of ones.
    pub random_norms: bool,
}

impl TinySpec {
    /// The tests' usual tiny Llama: `layers` layers of 4 query heads on 2 KV heads of 8
    /// dimensions, hidden 32, feed-forward 48, vocabulary 50, `ctx` positions, Q and K drawn
    /// in ±0.6, norm weights of one.
    pub(crate) fn small(seed: u64, layers: usize, ctx: usize) -> Self {
        Self {
            seed,
            layers,
            heads: NH,
            kv_heads: NKV,
            head_dim: D,
            hidden: H,
            ffn: F,
            vocab: V,
            ctx,
            qk_scale: 0.6,
            random_norms: false,
        }
    }
}

/// The rows of a `[rows, columns]` tensor, on the host.
pub(crate) fn rows<B: burn::tensor::backend::Backend>(
    t: burn::tensor::Tensor<B, 2>,
) -> Vec<Vec<f32>> {
    let [r, c] = t.dims();
    let flat: Vec<f32> = t.into_data().iter::<f32>().collect();
    (0..r).map(|i| flat[i * c..(i + 1) * c].to_vec()).collect()
}

/// The largest absolute difference between `a` and `b`.
pub(crate) fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `n` uniform draws in `[−scale, scale)`.
pub(crate) fn random(rng: &mut SplitMix64, n: usize, scale: f64) -> Vec<f32> {
    (0..n)
        .map(|_| ((rng.next_f64() * 2.0 - 1.0) * scale) as f32)
        .collect()
}

/// The GGUF file of `spec`.
pub(crate) fn tiny_gguf(spec: &TinySpec) -> GgufFile {
    let TinySpec {
        layers,
        heads,
        kv_heads,
        head_dim: d,
        hidden: h,
        ffn: f,
        vocab: v,
        ..
    } = *spec;
    let mut rng = SplitMix64::new(spec.seed);
    let u32_meta = |x: usize| MetaValue::U32(x as u32);
    let mut w = GgufWriter::new()
        .meta("general.architecture", MetaValue::String("llama".into()))
        .meta("llama.block_count", u32_meta(layers))
        .meta("llama.attention.head_count", u32_meta(heads))
        .meta("llama.attention.head_count_kv", u32_meta(kv_heads))
        .meta("llama.embedding_length", u32_meta(h))
        .meta("llama.feed_forward_length", u32_meta(f))
        .meta("llama.context_length", u32_meta(spec.ctx))
        .meta("llama.rope.freq_base", MetaValue::F32(THETA as f32))
        .meta(
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(EPS as f32),
        )
        .tensor_f32("token_embd.weight", &[v, h], &random(&mut rng, v * h, 1.0));
    let out_norm = if spec.random_norms {
        random(&mut rng, h, 1.0)
    } else {
        vec![1.0; h]
    };
    w = w.tensor_f32("output_norm.weight", &[h], &out_norm);
    for l in 0..layers {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        let norm: Vec<f32> = if spec.random_norms {
            random(&mut rng, h, 0.5).iter().map(|x| x + 1.0).collect()
        } else {
            vec![1.0; h]
        };
        let qs = spec.qk_scale;
        w = w
            .tensor_f32(&n("attn_norm"), &[h], &norm)
            .tensor_f32(
                &n("attn_q"),
                &[heads * d, h],
                &random(&mut rng, heads * d * h, qs),
            )
            .tensor_f32(
                &n("attn_k"),
                &[kv_heads * d, h],
                &random(&mut rng, kv_heads * d * h, qs),
            )
            .tensor_f32(
                &n("attn_v"),
                &[kv_heads * d, h],
                &random(&mut rng, kv_heads * d * h, 0.4),
            )
            .tensor_f32(
                &n("attn_output"),
                &[h, heads * d],
                &random(&mut rng, h * heads * d, 0.2),
            )
            .tensor_f32(&n("ffn_norm"), &[h], &norm)
            .tensor_f32(&n("ffn_gate"), &[f, h], &random(&mut rng, f * h, 0.3))
            .tensor_f32(&n("ffn_up"), &[f, h], &random(&mut rng, f * h, 0.3))
            .tensor_f32(&n("ffn_down"), &[h, f], &random(&mut rng, h * f, 0.3));
    }
    GgufFile::from_bytes(w.to_bytes()).expect("tiny GGUF")
}

/// `g` with its architecture renamed to `arch` (every `llama.` key moved), `meta` added and
/// `tensors` (f32, seeded values) appended.
pub(crate) fn rewrite(
    g: &GgufFile,
    arch: &str,
    meta: &[(&str, MetaValue)],
    tensors: &[(String, Vec<usize>)],
) -> GgufFile {
    rewrite_keeping(g, arch, meta, tensors, |_| true)
}

/// [`rewrite`], keeping only the tensors of `g` whose name `keep` accepts.
pub(crate) fn rewrite_keeping(
    g: &GgufFile,
    arch: &str,
    meta: &[(&str, MetaValue)],
    tensors: &[(String, Vec<usize>)],
    keep: impl Fn(&str) -> bool,
) -> GgufFile {
    let mut w = GgufWriter::new();
    for (k, v) in &g.metadata {
        let (k, v) = match (k.as_str(), k.strip_prefix("llama.")) {
            ("general.architecture", _) => (k.clone(), MetaValue::String(arch.into())),
            (_, Some(rest)) => (format!("{arch}.{rest}"), v.clone()),
            _ => (k.clone(), v.clone()),
        };
        w = w.meta(&k, v);
    }
    for (k, v) in meta {
        w = w.meta(k, v.clone());
    }
    for t in g.tensors.iter().filter(|t| keep(&t.name)) {
        let (data, shape) = g.tensor_f32(&t.name).expect("tiny tensor");
        w = w.tensor_f32(&t.name, &shape, &data);
    }
    let mut rng = crate::generate::SplitMix64::new(5);
    for (name, shape) in tensors {
        let n = shape.iter().product();
        w = w.tensor_f32(name, shape, &random(&mut rng, n, 0.5));
    }
    GgufFile::from_bytes(w.to_bytes()).expect("rewritten tiny GGUF")
}

/// `g` (a tiny Llama of `spec`) as a Qwen2 file: the same weights, seeded Q/K/V biases in every
/// layer (NEOX rows as GGUF stores them; the Llama file's rows are un-permuted at load, so the
/// two models differ).
pub(crate) fn as_qwen2(g: &GgufFile, spec: &TinySpec) -> GgufFile {
    let (nh, nkv, d) = (spec.heads, spec.kv_heads, spec.head_dim);
    let biases: Vec<(String, Vec<usize>)> = (0..spec.layers)
        .flat_map(|l| {
            [("q", nh), ("k", nkv), ("v", nkv)]
                .map(|(w, n)| (format!("blk.{l}.attn_{w}.bias"), vec![n * d]))
        })
        .collect();
    rewrite(g, "qwen2", &[], &biases)
}

/// `g` with every tensor of two dimensions whose rows are whole `Q8_0` blocks (32 weights)
/// stored as `Q8_0` (ggml's rounding: `d = max|w|/127`, `q = round(w/d)`), the rest as `f32`:
/// a tiny model whose projections the CPU backend holds as blocks, as it holds a real GGUF's.
pub(crate) fn as_q8_0(g: &GgufFile) -> GgufFile {
    use crate::gguf::GgmlType;
    let mut w = GgufWriter::new();
    for (k, v) in &g.metadata {
        w = w.meta(k, v.clone());
    }
    for t in &g.tensors {
        let (data, shape) = g.tensor_f32(&t.name).expect("tiny tensor");
        if shape.len() != 2 || shape[1] % 32 != 0 {
            w = w.tensor_f32(&t.name, &shape, &data);
            continue;
        }
        let mut bytes = Vec::with_capacity(data.len() / 32 * 34);
        for block in data.chunks_exact(32) {
            let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
            let d = amax / 127.0;
            let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
            bytes.extend(half::f16::from_f32(d).to_le_bytes());
            bytes.extend(block.iter().map(|x| (x * inv).round() as i8 as u8));
        }
        w = w.tensor_raw(&t.name, &shape, GgmlType::Q8_0, bytes);
    }
    GgufFile::from_bytes(w.to_bytes()).expect("Q8_0 tiny GGUF")
}
