//! Builds the burn [`Transformer`] from GGUF tensors.
//!
//! Weight names (llama.cpp) and where they go:
//!
//! | GGUF tensor                  | shape (row-major)   | module field                           |
//! |------------------------------|---------------------|----------------------------------------|
//! | `token_embd.weight`          | `[vocab, hidden]`   | `embed`; transposed into `output` when tied |
//! | `blk.N.attn_norm.weight`     | `[hidden]`          | `blocks[N].attn_norm.gamma`            |
//! | `blk.N.attn_q/k/v.weight`    | `[out, hidden]`     | `blocks[N].attention.wqkv` (transposed, fused) |
//! | `blk.N.attn_output.weight`   | `[hidden, q_dim]`   | `blocks[N].attention.wo` (transposed)  |
//! | `blk.N.ffn_norm.weight`      | `[hidden]`          | `blocks[N].ffn_norm.gamma`             |
//! | `blk.N.ffn_gate/up.weight`   | `[ffn, hidden]`     | `blocks[N].ffn.w_gate` / `w_up` (transposed) |
//! | `blk.N.ffn_down.weight`      | `[hidden, ffn]`     | `blocks[N].ffn.w_down` (transposed)    |
//! | `output_norm.weight`         | `[hidden]`          | `norm.gamma`                           |
//! | `output.weight` (optional)   | `[vocab, hidden]`   | `output` (transposed)                  |
//!
//! **RoPE convention.** llama.cpp stores the rows of `attn_q`/`attn_k` of each head permuted for
//! its RoPE, which rotates adjacent pairs `(2i, 2i+1)`. We un-permute them on load into Hugging
//! Face order — row `j` of a head takes GGUF row `perm[j]`, `perm = [0, 2, 4, …, d−2, 1, 3, …, d−1]`
//! — and rotate halves ([`super::rope`]). Keys, queries and observed pre-RoPE keys are therefore
//! in Hugging Face order, directly comparable with transformers' outputs.

use burn::module::Param;
use burn::nn::RmsNorm;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

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

fn norm<B: Backend>(
    gguf: &GgufFile,
    name: &str,
    c: &ModelConfig,
    device: &B::Device,
) -> Result<RmsNorm<B>> {
    let gamma = read(gguf, name, &[c.hidden])?;
    Ok(RmsNorm {
        gamma: Param::from_tensor(Tensor::from_data(
            TensorData::new(gamma, [c.hidden]),
            device,
        )),
        epsilon: c.rms_eps,
    })
}

fn block<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    n: usize,
    device: &B::Device,
) -> Result<Block<B>> {
    let (h, d, q_dim, kv_dim) = (
        c.hidden,
        c.head_dim,
        c.n_heads * c.head_dim,
        c.n_kv_heads * c.head_dim,
    );
    let name = |s: &str| format!("blk.{n}.{s}.weight");
    let wq = unpermute_heads(&read(gguf, &name("attn_q"), &[q_dim, h])?, c.n_heads, d, h);
    let wk = unpermute_heads(
        &read(gguf, &name("attn_k"), &[kv_dim, h])?,
        c.n_kv_heads,
        d,
        h,
    );
    let wv = read(gguf, &name("attn_v"), &[kv_dim, h])?;
    let wqkv = Tensor::cat(
        vec![
            linear(wq, q_dim, h, device),
            linear(wk, kv_dim, h, device),
            linear(wv, kv_dim, h, device),
        ],
        1,
    );
    let wo = linear(
        read(gguf, &name("attn_output"), &[h, q_dim])?,
        h,
        q_dim,
        device,
    );
    let gate = linear(
        read(gguf, &name("ffn_gate"), &[c.ffn, h])?,
        c.ffn,
        h,
        device,
    );
    let up = linear(read(gguf, &name("ffn_up"), &[c.ffn, h])?, c.ffn, h, device);
    let down = linear(
        read(gguf, &name("ffn_down"), &[h, c.ffn])?,
        h,
        c.ffn,
        device,
    );
    Ok(Block {
        attn_norm: norm(gguf, &name("attn_norm"), c, device)?,
        attention: Attention {
            wqkv: Param::from_tensor(wqkv),
            wo: Param::from_tensor(wo),
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: d,
        },
        ffn_norm: norm(gguf, &name("ffn_norm"), c, device)?,
        ffn: FeedForward {
            w_gate: Param::from_tensor(gate),
            w_up: Param::from_tensor(up),
            w_down: Param::from_tensor(down),
        },
    })
}

/// Loads every weight of a Llama-family model.
pub fn load_transformer<B: Backend>(
    gguf: &GgufFile,
    c: &ModelConfig,
    device: &B::Device,
) -> Result<Transformer<B>> {
    let embed = read(gguf, "token_embd.weight", &[c.vocab, c.hidden])?;
    let output = match gguf.tensor_info("output.weight") {
        Some(_) => read(gguf, "output.weight", &[c.vocab, c.hidden])?,
        None => embed.clone(),
    };
    let blocks = (0..c.n_layers)
        .map(|n| block(gguf, c, n, device))
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformer {
        embed: Param::from_tensor(Tensor::from_data(
            TensorData::new(embed, [c.vocab, c.hidden]),
            device,
        )),
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
