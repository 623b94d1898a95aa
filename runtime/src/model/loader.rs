//! Builds the burn [`Transformer`] from GGUF tensors.
//!
//! Weight names (llama.cpp) and where they go (`rows` = the architecture adds them, see
//! [`super::arch`]):
//!
//! | GGUF tensor                  | shape (row-major)   | module field                           |
//! |------------------------------|---------------------|----------------------------------------|
//! | `token_embd.weight`          | `[vocab, hidden]`   | `embed`; transposed into `output` when tied |
//! | `blk.N.attn_norm.weight`     | `[hidden]`          | `blocks[N].attn_norm.gamma`            |
//! | `blk.N.attn_q/k/v.weight`    | `[out, hidden]`     | `blocks[N].attention.wqkv` (transposed, fused) |
//! | `blk.N.attn_qkv.weight`      | `[q+2kv, hidden]` (phi3) | `blocks[N].attention.wqkv` (transposed) |
//! | `blk.N.attn_q/k/v.bias`      | `[out]` (qwen2)     | `blocks[N].attention.bias` (fused)     |
//! | `blk.N.attn_q/k_norm.weight` | `[head_dim]` (qwen3, gemma3); `[q]`/`[kv]` (olmo2) | `blocks[N].attention.q_norm` / `k_norm` |
//! | `blk.N.attn_output.weight`   | `[hidden, q_dim]`   | `blocks[N].attention.wo` (transposed)  |
//! | `blk.N.post_attention_norm.weight` | `[hidden]` (gemma3) | `blocks[N].post_attn_norm`     |
//! | `blk.N.ffn_norm.weight`      | `[hidden]`          | `blocks[N].ffn_norm.gamma`             |
//! | `blk.N.ffn_gate/up.weight`   | `[ffn, hidden]`     | `blocks[N].ffn.w_gate` / `w_up` (transposed) |
//! | `blk.N.ffn_up.weight`        | `[2·ffn, hidden]` (phi3) | rows `..ffn` → `w_gate`, `ffn..` → `w_up` |
//! | `blk.N.ffn_down.weight`      | `[hidden, ffn]`     | `blocks[N].ffn.w_down` (transposed)    |
//! | `blk.N.post_ffw_norm.weight` | `[hidden]` (gemma3) | `blocks[N].post_ffn_norm`              |
//! | `output_norm.weight`         | `[hidden]`          | `norm.gamma`                           |
//! | `output.weight` (optional)   | `[vocab, hidden]`   | `output` (transposed)                  |
//! | `rope_freqs.weight` (optional) | `[head_dim/2]`    | the RoPE frequencies ([`super::config`]) |
//!
//! Any other tensor in the file is refused by name ([`check_tensors`]): a tensor the runtime
//! would ignore (Llama 3.1's `rope_freqs.weight`, a vision tower, an extra block) means it
//! would run the model wrongly.
//!
//! **RoPE convention.** Keys and queries are in Hugging Face order and rotated by halves
//! ([`super::rope`]). llama.cpp stores the rows of `attn_q`/`attn_k` of a `llama` file permuted for
//! its NORM RoPE, which rotates adjacent pairs `(2i, 2i+1)`; those rows are un-permuted on load —
//! row `j` of a head takes GGUF row `perm[j]`, `perm = [0, 2, 4, …, d−2, 1, 3, …, d−1]`. Files of
//! NEOX architectures (`qwen2`, `gemma3`) already hold HF order and are read as they are. Keys,
//! queries and observed pre-RoPE keys are therefore directly comparable with transformers' outputs.
//!
//! **Storage** ([`WeightStorage`]). Projections, the embedding and the output are kept as f32
//! tensors, as f16 tensors (GPU backends: half the memory; each product upcasts its weights,
//! [`super::linear`]) or, on the CPU backend, as the file's quantised blocks ([`super::quant`];
//! the RoPE un-permutation above then moves whole rows of blocks, and a tied output shares the
//! embedding's blocks). A tensor whose rows are not whole blocks stays f32. f16 tensors are
//! converted on the host and uploaded as f16: no f32 copy of them reaches the device.
//!
//! **Norm weights.** The stored RMSNorm weights are used as the multiplier as they are: llama.cpp's
//! converter already folds Gemma's `1 + w` into Gemma's norm weights (the parity test checks it).

use burn::module::Param;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Tensor, TensorCreationOptions, TensorData};

#[cfg(feature = "flex")]
use std::sync::Arc;

use super::arch::{QkNorm, RopeLayout};
use super::attention::Attention;
use super::block::Block;
use super::config::ModelConfig;
use super::feed_forward::FeedForward;
use super::linear::{Embedding, Linear};
use super::quant::{QuantMatrix, QuantRows};
use super::transformer::Transformer;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// How a model's projections, embedding and output are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightStorage {
    /// f32 tensors: any backend, trainable, what `--weights` applies to.
    Dense,
    /// f16 tensors, upcast to f32 by each product (GPU backends): half of `Dense`'s memory, the
    /// weights rounded to f16 (11 significant bits).
    Half,
    /// The GGUF's own blocks, multiplied on the host (CPU backend; elsewhere it means `Dense`).
    Quantised,
}

impl WeightStorage {
    /// The dtype of the tensors this storage uploads (`Quantised` keeps f32 for what it cannot
    /// keep as blocks).
    fn dtype(self) -> DType {
        match self {
            Self::Half => DType::F16,
            Self::Dense | Self::Quantised => DType::F32,
        }
    }
}

/// One GGUF tensor, or a run of its rows, read as rows of a projection.
struct Part {
    /// Tensor name.
    name: String,
    /// Rows (output features) taken.
    rows: usize,
    /// Query/key heads whose rows llama.cpp permuted for its RoPE (`None`: read as stored).
    heads: Option<usize>,
    /// `(first row taken, rows of the tensor)` for part of a fused tensor; `None`: all of it.
    within: Option<(usize, usize)>,
}

impl Part {
    fn plain(name: String, rows: usize) -> Self {
        Self {
            name,
            rows,
            heads: None,
            within: None,
        }
    }

    /// Rows `from..from + rows` of a tensor of `total` rows.
    fn slice(name: String, from: usize, rows: usize, total: usize) -> Self {
        Self {
            within: Some((from, total)),
            ..Self::plain(name, rows)
        }
    }

    /// The shape the tensor must have for `cols` inputs.
    fn tensor_shape(&self, cols: usize) -> [usize; 2] {
        [self.within.map_or(self.rows, |(_, total)| total), cols]
    }
}

/// Reads tensor `name`, checking its row-major shape.
fn read(gguf: &GgufFile, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
    let info = gguf
        .tensor_info(name)
        .ok_or_else(|| Error::Model(format!("missing tensor {name}")))?;
    if info.shape() != shape {
        return Err(Error::Model(format!(
            "tensor {name}: expected shape {shape:?}, found {:?}",
            info.shape()
        )));
    }
    Ok(gguf.tensor_f32(name)?.0)
}

/// `[rows, cols]` → `[cols, rows]`.
fn transpose(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; data.len()];
    for (r, row) in data.chunks_exact(cols).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out[c * rows + r] = v;
        }
    }
    out
}

/// Un-permutes the rows of each head from llama.cpp's interleaved RoPE order to HF order.
fn unpermute_heads(data: &[f32], heads: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    unpermuted_order(heads, head_dim)
        .into_iter()
        .flat_map(|r| &data[r * cols..(r + 1) * cols])
        .copied()
        .collect()
}

/// A linear weight `[out, in]` from the file, as a `[in, out]` tensor of `dtype`.
fn linear<B: Backend>(
    data: &[f32],
    out_f: usize,
    in_f: usize,
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, 2> {
    upload(transpose(data, out_f, in_f), [in_f, out_f], dtype, device)
}

/// Host f32 values as a device tensor of `dtype` (converted on the host first).
fn upload<B: Backend>(
    data: Vec<f32>,
    shape: [usize; 2],
    dtype: DType,
    device: &B::Device,
) -> Tensor<B, 2> {
    let data = TensorData::new(data, shape).convert_dtype(dtype);
    Tensor::from_data(
        data,
        TensorCreationOptions::new(device.clone()).with_dtype(dtype),
    )
}

/// An RMSNorm over `dim` features from tensor `name`.
fn norm_of<B: Backend>(
    gguf: &GgufFile,
    name: &str,
    dim: usize,
    c: &ModelConfig,
    device: &B::Device,
) -> Result<RmsNorm<B>> {
    let gamma = read(gguf, name, &[dim])?;
    Ok(RmsNorm {
        gamma: Param::from_tensor(Tensor::from_data(TensorData::new(gamma, [dim]), device)),
        epsilon: c.rms_eps,
    })
}

/// An RMSNorm over the hidden features from tensor `name`.
fn norm<B: Backend>(
    gguf: &GgufFile,
    name: &str,
    c: &ModelConfig,
    device: &B::Device,
) -> Result<RmsNorm<B>> {
    norm_of(gguf, name, c.hidden, c, device)
}

/// The rows of `attn_q` / `attn_k` (`heads` heads), to be read in Hugging Face order.
fn qk_part(name: String, heads: usize, c: &ModelConfig) -> Part {
    let permuted = c.arch.rope_layout() == RopeLayout::Norm;
    Part {
        name,
        rows: heads * c.geometry.head_dim,
        heads: permuted.then_some(heads),
        within: None,
    }
}

/// Source row of each row of `heads` heads of `head_dim` rows in Hugging Face order
/// ([`unpermute_heads`]'s permutation as indices).
fn unpermuted_order(heads: usize, head_dim: usize) -> Vec<usize> {
    let half = head_dim / 2;
    (0..heads)
        .flat_map(|h| {
            (0..head_dim)
                .map(move |j| h * head_dim + if j < half { 2 * j } else { 2 * (j - half) + 1 })
        })
        .collect()
}

/// The parts' rows stacked along the output features, `cols` inputs each, as `storage` says.
fn projection<B: Backend>(
    gguf: &GgufFile,
    parts: &[Part],
    cols: usize,
    c: &ModelConfig,
    storage: WeightStorage,
    device: &B::Device,
) -> Result<Linear<B>> {
    #[cfg(feature = "flex")]
    if storage == WeightStorage::Quantised {
        if let Some(q) = quantised(gguf, parts, cols, c)? {
            return Ok(Linear::quantised(Arc::new(q)));
        }
    }
    // The parts' rows stacked on the host `[Σ rows, cols]`, then transposed once: the same as
    // concatenating the transposed parts along the output features.
    let mut stacked = Vec::new();
    for p in parts {
        let rows = read(gguf, &p.name, &p.tensor_shape(cols))?;
        let rows = match p.within {
            Some((from, _)) => rows[from * cols..(from + p.rows) * cols].to_vec(),
            None => rows,
        };
        stacked.extend(match p.heads {
            Some(h) => unpermute_heads(&rows, h, c.geometry.head_dim, cols),
            None => rows,
        });
    }
    let out_f = stacked.len() / cols;
    Ok(Linear::dense(linear(
        &stacked,
        out_f,
        cols,
        storage.dtype(),
        device,
    )))
}

/// The parts as one quantised matrix; `None` when a part's rows are not whole blocks.
#[cfg_attr(not(feature = "flex"), allow(dead_code))]
fn quantised(
    gguf: &GgufFile,
    parts: &[Part],
    cols: usize,
    c: &ModelConfig,
) -> Result<Option<QuantMatrix>> {
    let mut stacked = Vec::with_capacity(parts.len());
    for p in parts {
        let info = gguf
            .tensor_info(&p.name)
            .ok_or_else(|| Error::Model(format!("missing tensor {}", p.name)))?;
        let shape = p.tensor_shape(cols);
        if info.shape() != shape {
            return Err(Error::Model(format!(
                "tensor {}: expected shape {:?}, found {:?}",
                p.name,
                shape,
                info.shape()
            )));
        }
        let bytes = gguf.tensor_data(&p.name)?;
        let Ok(rows) = QuantRows::new(info.ggml_type, shape[0], cols, bytes) else {
            return Ok(None);
        };
        let rows = match p.within {
            Some((from, _)) => rows.rows_range(from, p.rows),
            None => rows,
        };
        stacked.push(match p.heads {
            Some(h) => rows.permuted(&unpermuted_order(h, c.geometry.head_dim)),
            None => rows,
        });
    }
    QuantMatrix::stack(stacked).map(Some).map_err(Error::Model)
}

/// The attention sub-layer of block `n`.
fn attention<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    n: usize,
    storage: WeightStorage,
    device: &B::Device,
) -> Result<Attention<B>> {
    let (h, d) = (c.hidden, c.geometry.head_dim);
    let (q_dim, kv_dim) = (c.geometry.q_heads * d, c.geometry.kv_heads * d);
    let name = |s: &str| format!("blk.{n}.{s}");
    let qkv = match c.arch.fused_qkv() {
        // Q, then K, then V rows, as the fused projection takes them (NEOX: no permutation).
        true => vec![Part::plain(name("attn_qkv.weight"), q_dim + 2 * kv_dim)],
        false => vec![
            qk_part(name("attn_q.weight"), c.geometry.q_heads, c),
            qk_part(name("attn_k.weight"), c.geometry.kv_heads, c),
            Part::plain(name("attn_v.weight"), kv_dim),
        ],
    };
    let wqkv = projection(gguf, &qkv, h, c, storage, device)?;
    let bias = if c.arch.qkv_bias() {
        let mut b = read(gguf, &name("attn_q.bias"), &[q_dim])?;
        b.extend(read(gguf, &name("attn_k.bias"), &[kv_dim])?);
        b.extend(read(gguf, &name("attn_v.bias"), &[kv_dim])?);
        let width = b.len();
        Some(Param::from_tensor(Tensor::from_data(
            TensorData::new(b, [width]),
            device,
        )))
    } else {
        None
    };
    let wo = [Part::plain(name("attn_output.weight"), h)];
    let qk_norm = |s: &str, whole: usize| match c.arch.qk_norm() {
        QkNorm::None => Ok(None),
        QkNorm::PerHead => norm_of(gguf, &name(s), d, c, device).map(Some),
        QkNorm::Whole => norm_of(gguf, &name(s), whole, c, device).map(Some),
    };
    Ok(Attention {
        wqkv,
        wo: projection(gguf, &wo, q_dim, c, storage, device)?,
        bias,
        q_norm: qk_norm("attn_q_norm.weight", q_dim)?,
        k_norm: qk_norm("attn_k_norm.weight", kv_dim)?,
        n_heads: c.geometry.q_heads,
        n_kv_heads: c.geometry.kv_heads,
        head_dim: d,
        query_scale: c.query_scale,
        window: c.window(n),
        softcap: c.attn_softcap,
    })
}

fn block<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    n: usize,
    storage: WeightStorage,
    device: &B::Device,
) -> Result<Block<B>> {
    let h = c.hidden;
    let name = |s: &str| format!("blk.{n}.{s}.weight");
    let proj = |s: &str, rows: usize, cols: usize| {
        projection(
            gguf,
            &[Part::plain(name(s), rows)],
            cols,
            c,
            storage,
            device,
        )
    };
    let norm_if =
        |s: &str, present: bool| present.then(|| norm(gguf, &name(s), c, device)).transpose();
    let (pre, post) = (c.arch.pre_norms(), c.arch.post_norms());
    let (w_gate, w_up) = match c.arch.fused_gate_up() {
        // `ffn_up` holds gate ‖ up (transformers `gate_up_proj(x).chunk(2)`: gate first).
        true => {
            let half = |from: usize| {
                let part = Part::slice(name("ffn_up"), from, c.ffn, 2 * c.ffn);
                projection(gguf, &[part], h, c, storage, device)
            };
            (half(0)?, half(c.ffn)?)
        }
        false => (proj("ffn_gate", c.ffn, h)?, proj("ffn_up", c.ffn, h)?),
    };
    Ok(Block {
        attn_norm: norm_if("attn_norm", pre)?,
        attention: attention(gguf, c, n, storage, device)?,
        post_attn_norm: norm_if("post_attention_norm", post)?,
        ffn_norm: norm_if("ffn_norm", pre)?,
        ffn: FeedForward {
            w_gate,
            w_up,
            w_down: proj("ffn_down", h, c.ffn)?,
            activation: c.arch.activation(),
        },
        post_ffn_norm: norm_if("post_ffw_norm", post)?,
    })
}

/// Refuses a file holding a tensor the architecture does not read, naming it.
pub fn check_tensors(gguf: &GgufFile, c: &ModelConfig) -> Result<()> {
    let per_layer = c.arch.layer_tensors();
    let used = |name: &str| {
        if matches!(
            name,
            "token_embd.weight" | "output_norm.weight" | "output.weight"
        ) || c.arch.global_tensors().contains(&name)
        {
            return true;
        }
        let Some(rest) = name.strip_prefix("blk.") else {
            return false;
        };
        let Some((layer, tensor)) = rest.split_once('.') else {
            return false;
        };
        // `blk.N.` with N written as the loader writes it (no sign, no leading zero).
        let in_range = layer
            .parse::<usize>()
            .is_ok_and(|l| l < c.geometry.layers && l.to_string() == layer);
        in_range && per_layer.contains(&tensor)
    };
    match gguf.tensors.iter().find(|t| !used(&t.name)) {
        Some(t) => Err(Error::Model(format!(
            "tensor {} is not used by architecture {} ({} layers): kvplan would ignore it and run \
             the model wrongly",
            t.name, c.architecture, c.geometry.layers
        ))),
        None => Ok(()),
    }
}

/// Loads every weight of a model of a supported architecture, after refusing unused tensors,
/// held as `storage` says.
pub fn load_transformer<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    storage: WeightStorage,
    device: &B::Device,
) -> Result<Transformer<B>> {
    check_tensors(gguf, c)?;
    let (embed, output) = embedding_and_output(gguf, c, storage, device)?;
    let blocks = (0..c.geometry.layers)
        .map(|n| block(gguf, c, n, storage, device))
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformer {
        embed,
        embed_scale: c.embed_scale,
        blocks,
        norm: norm(gguf, "output_norm.weight", c, device)?,
        output,
        final_softcap: c.final_softcap,
    })
}

/// The token embedding and the output projection (the embedding's rows when the file has no
/// `output.weight`: tied, and shared when quantised).
fn embedding_and_output<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    storage: WeightStorage,
    device: &B::Device,
) -> Result<(Embedding<B>, Linear<B>)> {
    let tied = gguf.tensor_info("output.weight").is_none();
    let embed_part = [Part::plain("token_embd.weight".into(), c.vocab)];
    #[cfg(feature = "flex")]
    if storage == WeightStorage::Quantised {
        if let Some(e) = quantised(gguf, &embed_part, c.hidden, c)? {
            let e = Arc::new(e);
            let output = if tied {
                Linear::quantised(e.clone())
            } else {
                let out = [Part::plain("output.weight".into(), c.vocab)];
                projection(gguf, &out, c.hidden, c, storage, device)?
            };
            return Ok((Embedding::quantised(e), output));
        }
    }
    let _ = &embed_part;
    // `Quantised` here means rows that are not whole blocks: f32, like `Dense`.
    let dtype = storage.dtype();
    let embed = read(gguf, "token_embd.weight", &[c.vocab, c.hidden])?;
    let output = if tied {
        Linear::dense(linear(&embed, c.vocab, c.hidden, dtype, device))
    } else {
        let out = [Part::plain("output.weight".into(), c.vocab)];
        let out_storage = match storage {
            WeightStorage::Half => WeightStorage::Half,
            _ => WeightStorage::Dense,
        };
        projection(gguf, &out, c.hidden, c, out_storage, device)?
    };
    let embed = Embedding::dense(upload(embed, [c.vocab, c.hidden], dtype, device));
    Ok((embed, output))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_row_major() {
        assert_eq!(
            transpose(&[1., 2., 3., 4., 5., 6.], 2, 3),
            vec![1., 4., 2., 5., 3., 6.]
        );
    }

    #[test]
    fn unpermutes_interleaved_rope_rows() {
        // One head, head_dim 4, one column: GGUF rows [a0, b0, a1, b1] (pairs (2i, 2i+1))
        // become HF rows [a0, a1, b0, b1] (halves).
        assert_eq!(
            unpermute_heads(&[0., 1., 2., 3.], 1, 4, 1),
            vec![0., 2., 1., 3.]
        );
        // Two heads are permuted independently.
        let two = unpermute_heads(&[0., 1., 2., 3., 4., 5., 6., 7.], 2, 4, 1);
        assert_eq!(two, vec![0., 2., 1., 3., 4., 6., 5., 7.]);
    }
}
