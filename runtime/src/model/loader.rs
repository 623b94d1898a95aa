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
//! | `blk.N.attn_q/k/v.bias`      | `[out]` (qwen2)     | `blocks[N].attention.bias` (fused)     |
//! | `blk.N.attn_q/k_norm.weight` | `[head_dim]` (gemma3) | `blocks[N].attention.q_norm` / `k_norm` |
//! | `blk.N.attn_output.weight`   | `[hidden, q_dim]`   | `blocks[N].attention.wo` (transposed)  |
//! | `blk.N.post_attention_norm.weight` | `[hidden]` (gemma3) | `blocks[N].post_attn_norm`     |
//! | `blk.N.ffn_norm.weight`      | `[hidden]`          | `blocks[N].ffn_norm.gamma`             |
//! | `blk.N.ffn_gate/up.weight`   | `[ffn, hidden]`     | `blocks[N].ffn.w_gate` / `w_up` (transposed) |
//! | `blk.N.ffn_down.weight`      | `[hidden, ffn]`     | `blocks[N].ffn.w_down` (transposed)    |
//! | `blk.N.post_ffw_norm.weight` | `[hidden]` (gemma3) | `blocks[N].post_ffn_norm`              |
//! | `output_norm.weight`         | `[hidden]`          | `norm.gamma`                           |
//! | `output.weight` (optional)   | `[vocab, hidden]`   | `output` (transposed)                  |
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
//! **Norm weights.** The stored RMSNorm weights are used as the multiplier as they are: llama.cpp's
//! converter already folds Gemma's `1 + w` into Gemma's norm weights (the parity test checks it).

use burn::module::Param;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use super::arch::RopeLayout;
use super::attention::Attention;
use super::block::Block;
use super::config::ModelConfig;
use super::feed_forward::FeedForward;
use super::transformer::Transformer;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;

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
    let half = head_dim / 2;
    let mut out = Vec::with_capacity(data.len());
    for h in 0..heads {
        for j in 0..head_dim {
            let src = if j < half { 2 * j } else { 2 * (j - half) + 1 };
            let row = h * head_dim + src;
            out.extend_from_slice(&data[row * cols..(row + 1) * cols]);
        }
    }
    out
}

/// A linear weight `[out, in]` from the file, as a `[in, out]` tensor.
fn linear<B: Backend>(
    data: Vec<f32>,
    out_f: usize,
    in_f: usize,
    device: &B::Device,
) -> Tensor<B, 2> {
    Tensor::from_data(
        TensorData::new(transpose(&data, out_f, in_f), [in_f, out_f]),
        device,
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

/// Rows of `attn_q` / `attn_k` (`heads` heads) in Hugging Face order.
fn qk_rows(gguf: &GgufFile, name: &str, heads: usize, c: &ModelConfig) -> Result<Vec<f32>> {
    let rows = read(gguf, name, &[heads * c.geometry.head_dim, c.hidden])?;
    Ok(match c.arch.rope_layout() {
        RopeLayout::Norm => unpermute_heads(&rows, heads, c.geometry.head_dim, c.hidden),
        RopeLayout::Neox => rows,
    })
}

/// The attention sub-layer of block `n`.
fn attention<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    n: usize,
    device: &B::Device,
) -> Result<Attention<B>> {
    let (h, d) = (c.hidden, c.geometry.head_dim);
    let (q_dim, kv_dim) = (c.geometry.q_heads * d, c.geometry.kv_heads * d);
    let name = |s: &str| format!("blk.{n}.{s}");
    let wq = qk_rows(gguf, &name("attn_q.weight"), c.geometry.q_heads, c)?;
    let wk = qk_rows(gguf, &name("attn_k.weight"), c.geometry.kv_heads, c)?;
    let wv = read(gguf, &name("attn_v.weight"), &[kv_dim, h])?;
    let wqkv = Tensor::cat(
        vec![
            linear(wq, q_dim, h, device),
            linear(wk, kv_dim, h, device),
            linear(wv, kv_dim, h, device),
        ],
        1,
    );
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
    let wo = read(gguf, &name("attn_output.weight"), &[h, q_dim])?;
    let qk_norm = |s: &str| {
        c.arch
            .qk_norm()
            .then(|| norm_of(gguf, &name(s), d, c, device))
            .transpose()
    };
    Ok(Attention {
        wqkv: Param::from_tensor(wqkv),
        wo: Param::from_tensor(linear(wo, h, q_dim, device)),
        bias,
        q_norm: qk_norm("attn_q_norm.weight")?,
        k_norm: qk_norm("attn_k_norm.weight")?,
        n_heads: c.geometry.q_heads,
        n_kv_heads: c.geometry.kv_heads,
        head_dim: d,
        query_scale: c.query_scale,
        window: c.window(n),
    })
}

fn block<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    n: usize,
    device: &B::Device,
) -> Result<Block<B>> {
    let h = c.hidden;
    let name = |s: &str| format!("blk.{n}.{s}.weight");
    let gate = read(gguf, &name("ffn_gate"), &[c.ffn, h])?;
    let up = read(gguf, &name("ffn_up"), &[c.ffn, h])?;
    let down = read(gguf, &name("ffn_down"), &[h, c.ffn])?;
    let post_norm = |s: &str| {
        c.arch
            .post_norms()
            .then(|| norm(gguf, &name(s), c, device))
            .transpose()
    };
    Ok(Block {
        attn_norm: norm(gguf, &name("attn_norm"), c, device)?,
        attention: attention(gguf, c, n, device)?,
        post_attn_norm: post_norm("post_attention_norm")?,
        ffn_norm: norm(gguf, &name("ffn_norm"), c, device)?,
        ffn: FeedForward {
            w_gate: Param::from_tensor(linear(gate, c.ffn, h, device)),
            w_up: Param::from_tensor(linear(up, c.ffn, h, device)),
            w_down: Param::from_tensor(linear(down, h, c.ffn, device)),
            activation: c.arch.activation(),
        },
        post_ffn_norm: post_norm("post_ffw_norm")?,
    })
}

/// Refuses a file holding a tensor the architecture does not read, naming it.
pub fn check_tensors(gguf: &GgufFile, c: &ModelConfig) -> Result<()> {
    let per_layer = c.arch.layer_tensors();
    let used = |name: &str| {
        if matches!(
            name,
            "token_embd.weight" | "output_norm.weight" | "output.weight"
        ) {
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

/// Loads every weight of a model of a supported architecture, after refusing unused tensors.
pub fn load_transformer<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    device: &B::Device,
) -> Result<Transformer<B>> {
    check_tensors(gguf, c)?;
    let embed = read(gguf, "token_embd.weight", &[c.vocab, c.hidden])?;
    let output = match gguf.tensor_info("output.weight") {
        Some(_) => read(gguf, "output.weight", &[c.vocab, c.hidden])?,
        None => embed.clone(),
    };
    let blocks = (0..c.geometry.layers)
        .map(|n| block(gguf, c, n, device))
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformer {
        embed: Param::from_tensor(Tensor::from_data(
            TensorData::new(embed, [c.vocab, c.hidden]),
            device,
        )),
        embed_scale: c.embed_scale,
        blocks,
        norm: norm(gguf, "output_norm.weight", c, device)?,
        output: Param::from_tensor(linear(output, c.vocab, c.hidden, device)),
    })
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
