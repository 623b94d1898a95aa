//! The decoder of every supported architecture: its geometry and metadata (`config.rs`, read from
//! the GGUF file; `arch.rs`, what differs by architecture), attention, feed-forward, block and
//! transformer as burn modules built by the loader from the file's tensors (no Config→Module
//! pairs: the file is the config), and [`Model`], which ties the module to its RoPE tables and
//! query→KV head order.

#[cfg(feature = "flex")]
#[macro_use]
mod multiversion;

pub mod arch;
pub mod attention;
pub mod block;
pub mod config;
pub mod feed_forward;
pub(crate) mod gemm;
#[cfg(feature = "flex")]
pub mod host_attention;
#[cfg(feature = "flex")]
pub mod host_ffn;
pub mod linear;
pub mod loader;
#[cfg(feature = "flex")]
mod prefetch;
pub mod quant;
pub mod query_order;
pub mod rope;
#[cfg(feature = "flex")]
mod softmax;
pub mod transformer;

use std::path::Path;

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

pub use attention::ForwardCtx;
pub use config::ModelConfig;
pub use loader::WeightStorage;
pub use transformer::{last_row, Logits, Transformer};

use crate::cache::KvCache;
use crate::error::{Error, Result};
use crate::gguf::GgufFile;
use crate::observe::Observer;
use query_order::QueryOrder;
use rope::{Rope, RopeSet};

/// A loaded model ready to run.
#[derive(Debug)]
pub struct Model<B: Backend> {
    /// Geometry.
    pub config: ModelConfig,
    /// The burn module (weights).
    pub transformer: Transformer<B>,
    rope: Rope<B>,
    rope_set: RopeSet,
    /// LongRoPE's tables past its original context: `(original context, tables, frequencies)`.
    long_rope: Option<(usize, Rope<B>, RopeSet)>,
    order: QueryOrder,
    device: B::Device,
    host_kernel: bool,
}

/// True when `B` is the plain CPU backend, whose attention runs in the fused host kernel.
// Without the backend's feature the answer is `false` whatever `B` is.
#[cfg_attr(not(feature = "flex"), allow(clippy::extra_unused_type_parameters))]
fn host_kernel_for<B: Backend>() -> bool {
    #[cfg(feature = "flex")]
    {
        std::any::TypeId::of::<B>() == std::any::TypeId::of::<burn::backend::Flex>()
    }
    #[cfg(not(feature = "flex"))]
    {
        false
    }
}

/// True when `B` is burn's CUDA backend (inference on a GPU, no autodiff).
#[cfg_attr(not(feature = "cuda"), allow(clippy::extra_unused_type_parameters))]
fn gpu_for<B: Backend>() -> bool {
    #[cfg(feature = "cuda")]
    {
        std::any::TypeId::of::<B>() == std::any::TypeId::of::<burn::backend::Cuda>()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

impl WeightStorage {
    /// Quantised on the plain CPU backend (the host kernels' backend), f16 tensors on the CUDA
    /// backend (f32 there in exact mode, [`crate::precision`]), f32 tensors on every other
    /// (LibTorch, autodiff for training).
    pub fn default_for<B: Backend>() -> Self {
        if host_kernel_for::<B>() {
            Self::Quantised
        } else if gpu_for::<B>() && !crate::precision::exact() {
            Self::Half
        } else {
            Self::Dense
        }
    }
}

impl<B: Backend> Model<B> {
    /// Loads a GGUF file from disk, weights held as [`WeightStorage::default_for`] says.
    pub fn load(path: impl AsRef<Path>, device: &B::Device) -> Result<Self> {
        Self::from_gguf(&GgufFile::open(path)?, device)
    }

    /// Builds the model from a parsed GGUF file, weights held as
    /// [`WeightStorage::default_for`] says.
    pub fn from_gguf(gguf: &GgufFile, device: &B::Device) -> Result<Self> {
        Self::from_gguf_with(gguf, device, WeightStorage::default_for::<B>())
    }

    /// Builds the model from a parsed GGUF file, weights held as `storage` says.
    pub fn from_gguf_with(
        gguf: &GgufFile,
        device: &B::Device,
        storage: WeightStorage,
    ) -> Result<Self> {
        let config = ModelConfig::from_gguf(gguf)?;
        let transformer = loader::load_transformer(gguf, &config, storage, device)?;
        Ok(Self::from_parts(config, transformer, device))
    }

    /// Wraps an existing module (e.g. after training) with fresh RoPE tables.
    pub fn from_parts(
        config: ModelConfig,
        transformer: Transformer<B>,
        device: &B::Device,
    ) -> Self {
        let rope_set = config.rope();
        let rope = Rope::from_set(&rope_set, config.context_len, device);
        let long_rope = config.rope_scaling.switches_after().map(|from| {
            let set = config.rope_for(from + 1);
            (from, Rope::from_set(&set, config.context_len, device), set)
        });
        let order = QueryOrder::new(&config.geometry);
        Self {
            config,
            transformer,
            rope,
            rope_set,
            long_rope,
            order,
            device: device.clone(),
            host_kernel: host_kernel_for::<B>(),
        }
    }

    /// Forces the generic burn-ops attention (`true`) or restores the default kernel choice.
    /// Both compute the same thing; tests run both.
    pub fn set_generic_attention(&mut self, generic: bool) {
        self.host_kernel = !generic && host_kernel_for::<B>();
    }

    /// The RoPE frequencies of every layer, for presses that rotate cached keys (of sequences
    /// within LongRoPE's original context: [`Self::rope_set_for`]).
    pub fn rope_set(&self) -> &RopeSet {
        &self.rope_set
    }

    /// The RoPE frequencies a forward call ending at position `end` (exclusive) rotates with.
    pub fn rope_set_for(&self, end: usize) -> &RopeSet {
        match &self.long_rope {
            Some((from, _, set)) if end > *from => set,
            _ => &self.rope_set,
        }
    }

    /// The RoPE tables of a forward call ending at position `end` (exclusive).
    fn rope_for(&self, end: usize) -> &Rope<B> {
        match &self.long_rope {
            Some((from, rope, _)) if end > *from => rope,
            _ => &self.rope,
        }
    }

    /// The device the weights live on.
    pub fn device(&self) -> &B::Device {
        &self.device
    }

    /// An empty cache for this model.
    pub fn new_cache(&self) -> KvCache<B> {
        KvCache::new(
            self.config.geometry.layers,
            self.config.geometry.kv_heads,
            self.config.geometry.head_dim,
        )
    }

    /// Runs `ids` after what `cache` holds, at positions `cache.next_position..`, extending the
    /// cache; records into `observer` when one is attached.
    ///
    /// # Shapes
    /// - ids: `t` tokens → `[1, vocab]` ([`Logits::Last`]) or `[t, vocab]` ([`Logits::All`])
    pub fn forward(
        &self,
        ids: &[u32],
        cache: &mut KvCache<B>,
        observer: Option<&mut Observer>,
        logits: Logits,
    ) -> Result<Tensor<B, 2>> {
        let (start, end) = self.check_ids(ids, cache)?;
        let positions: Vec<usize> = (start..end).collect();
        let mut ctx = self.context(&positions, observer.as_deref());
        let out = self
            .transformer
            .forward(ids, &mut ctx, cache, observer, logits);
        cache.next_position = end;
        Ok(out)
    }

    /// The context of a call adding tokens at `positions`, recording what `observer` asks.
    fn context<'c>(
        &'c self,
        positions: &'c [usize],
        observer: Option<&Observer>,
    ) -> ForwardCtx<'c, B> {
        let end = positions.last().map_or(0, |p| p + 1);
        let rope = self.rope_for(end);
        let mut ctx = ForwardCtx::new(rope, &self.order, positions, &self.device);
        ctx.host_kernel = self.host_kernel;
        if let Some(o) = observer {
            ctx.obs_rows = o.config.attn_rows;
            ctx.obs_end = o.config.rows_end;
            ctx.obs_kv = o.config.keys_values;
            ctx.obs_colsum = o.config.column_sums;
        }
        ctx
    }

    /// The positions `ids` would take after `cache`, or the error [`Self::forward`] gives for
    /// them: no tokens, an id outside the vocabulary, positions past the context.
    fn check_ids(&self, ids: &[u32], cache: &KvCache<B>) -> Result<(usize, usize)> {
        if ids.is_empty() {
            return Err(Error::Request("no tokens to run".into()));
        }
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.config.vocab) {
            return Err(Error::Request(format!(
                "token id {bad} is outside the vocabulary of {}",
                self.config.vocab
            )));
        }
        let start = cache.next_position;
        let end = start + ids.len();
        if end > self.rope.max_positions() {
            return Err(Error::Request(format!(
                "positions up to {end} exceed the model's context of {} tokens",
                self.rope.max_positions()
            )));
        }
        Ok((start, end))
    }

    /// Whether [`Self::forward_many`] gives every sequence exactly the logits [`Self::forward`]
    /// gives it alone: on the host kernel with every projection held quantised, whose fused dot
    /// products give an activation row the same numbers in any company
    /// ([`quant::QuantMatrix::matmul`] up to [`quant::FUSED_MAX_ROWS`] rows).
    pub fn forward_many_is_exact(&self) -> bool {
        let t = &self.transformer;
        self.host_kernel
            && t.output.quant.is_some()
            && t.blocks.iter().all(|b| {
                let (a, f) = (&b.attention, &b.ffn);
                [&a.wqkv, &a.wo, &f.w_gate, &f.w_up, &f.w_down]
                    .iter()
                    .all(|l| l.quant.is_some())
            })
    }

    /// One decode step of several independent sequences: `ids[i]` after `caches[i]`, observed
    /// into `observers[i]` (`observers` empty: none); returns each sequence's next-token logits
    /// on the host, in order. The projections of up to [`quant::FUSED_MAX_ROWS`] sequences run
    /// as one matrix product, which reads every weight once for all of them; where that would
    /// not give each sequence its own [`Self::forward`]'s numbers bit for bit
    /// ([`Self::forward_many_is_exact`]), each runs alone.
    ///
    /// # Errors
    /// As [`Self::forward`], for the first sequence that fails; `caches` and `observers` of
    /// different lengths than `ids`.
    pub fn forward_many(
        &self,
        ids: &[u32],
        caches: &mut [&mut KvCache<B>],
        observers: &mut [Option<&mut Observer>],
    ) -> Result<Vec<Vec<f32>>> {
        let n = ids.len();
        let observed = !observers.is_empty();
        if caches.len() != n || (observed && observers.len() != n) {
            return Err(Error::Request(format!(
                "forward_many: {n} tokens for {} caches and {} observers",
                caches.len(),
                observers.len()
            )));
        }
        let mut none: Vec<Option<&mut Observer>> = (0..n).map(|_| None).collect();
        let observers = if observed { observers } else { &mut none[..] };
        if !self.forward_many_is_exact() || n == 1 {
            let mut out = Vec::with_capacity(n);
            for ((&id, cache), obs) in ids.iter().zip(caches.iter_mut()).zip(observers.iter_mut()) {
                let logits = self.forward(&[id], cache, obs.as_deref_mut(), Logits::Last)?;
                out.push(last_row(logits));
            }
            return Ok(out);
        }
        let mut positions = Vec::with_capacity(n);
        for (&id, cache) in ids.iter().zip(caches.iter()) {
            positions.push([self.check_ids(&[id], cache)?.0]);
        }
        let mut out = Vec::with_capacity(n);
        let rows = quant::FUSED_MAX_ROWS;
        for (((ids, caches), observers), positions) in ids
            .chunks(rows)
            .zip(caches.chunks_mut(rows))
            .zip(observers.chunks_mut(rows))
            .zip(positions.chunks(rows))
        {
            let mut ctxs: Vec<ForwardCtx<'_, B>> = positions
                .iter()
                .zip(observers.iter())
                .map(|(p, o)| self.context(p, o.as_deref()))
                .collect();
            let logits = self
                .transformer
                .forward_many(ids, &mut ctxs, caches, observers);
            let [m, vocab] = logits.dims();
            let host: Vec<f32> = logits.into_data().iter::<f32>().collect();
            out.extend(host.chunks_exact(vocab).take(m).map(<[f32]>::to_vec));
            for c in caches.iter_mut() {
                c.next_position += 1;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod arch_tests;
#[cfg(test)]
mod repeat_tests;
#[cfg(test)]
mod tests;
