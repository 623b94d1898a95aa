//! KV cache: plain state outside the model's `Module`, one [`LayerCache`] per layer.
//!
//! Each layer stores, per KV head, post-RoPE keys, values and each entry's original position.
//! While every head holds the same number of entries the storage is one `[kv_heads, len, d]`
//! tensor (batched attention); once a press keeps a different number of entries per head it
//! becomes one `[len_h, d]` tensor per head — no padding, no masking, so memory really shrinks.
//! Position bookkeeping lives apart from the tensors.
//!
//! A layer normally stores the model's KV heads. [`LayerCache::repeat_heads`] unfolds GQA: each
//! KV head becomes `h_n` consecutive copies, one per query head of its group (SpindleKV's repeat
//! variant, `docs/papers/spindlekv.md` §3.3), after which each query head's entries can be evicted
//! on their own. Attention derives the group from the head count the layer holds, so both layouts
//! run.
//!
//! A sliding-window layer (Gemma 3's local layers) need hold only its window: under a press (the
//! press driver, after each forward call) it drops the entries that left it
//! ([`LayerCache::slide`]), so the layer keeps the last `window` positions, one contiguous run,
//! and its memory stays bounded. The model's own forward keeps whatever it appends (its mask
//! windows the attention; the profiler reads rows aligned across layers). [`window_span`] is the
//! rule for how many entries a layer holds; FullKV counts a windowed layer at the same span
//! (the planner's `budgets::full_kv_bytes`, over the geometry's `layer_windows`).
//!
//! **Where the entries live.** The CPU attention kernel ([`crate::model::host_attention`]) keeps a
//! layer on the host ([`HostKv`]: one growing `[len_h][head_dim]` run per head), so a decode step
//! appends its row in place instead of concatenating and copying the whole cache twice (a 2K
//! SmolLM2 cache is 47 MB a token). Everything else sees burn tensors: [`LayerCache::store`] and
//! [`LayerCache::head`] make them from the host rows on first use (kept until the next change),
//! and burn-side changes (the generic attention's append, a press's `replace`) move the layer to
//! tensors. Eviction ([`LayerCache::retain`], [`LayerCache::slide`]) works in place on either.

use std::sync::OnceLock;

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};

/// Bytes of one stored number: keys and values are kept in f32.
pub const BYTES_PER_ELEMENT: usize = 4;

/// The tensors of one layer's cache.
#[derive(Debug, Clone)]
pub enum KvStore<B: Backend> {
    /// All heads hold the same number of entries: `[kv_heads, len, head_dim]`.
    Uniform {
        /// Keys (post-RoPE).
        keys: Tensor<B, 3>,
        /// Values.
        values: Tensor<B, 3>,
    },
    /// Heads hold different numbers of entries: one `[len_h, head_dim]` pair per head.
    PerHead {
        /// Keys per head (post-RoPE).
        keys: Vec<Tensor<B, 2>>,
        /// Values per head.
        values: Vec<Tensor<B, 2>>,
    },
}

impl<B: Backend> KvStore<B> {
    /// The device the tensors are on.
    fn device(&self) -> B::Device {
        match self {
            KvStore::Uniform { keys, .. } => keys.device(),
            KvStore::PerHead { keys, .. } => keys[0].device(),
        }
    }

    /// One `[len_h, head_dim]` key and value tensor per head: stacked into [`KvStore::Uniform`]
    /// when every head holds the same number of entries, else kept [`KvStore::PerHead`].
    ///
    /// # Shapes
    /// - keys, values: one `[len_h, head_dim]` per head
    pub fn from_heads(keys: Vec<Tensor<B, 2>>, values: Vec<Tensor<B, 2>>) -> Self {
        let uniform = keys.windows(2).all(|w| w[0].dims()[0] == w[1].dims()[0]);
        if uniform {
            KvStore::Uniform {
                keys: Tensor::stack(keys, 0),
                values: Tensor::stack(values, 0),
            }
        } else {
            KvStore::PerHead { keys, values }
        }
    }
}

/// One layer's keys and values on the host: per head, `[len_h][head_dim]` row-major, in storage
/// order (the rows of [`LayerCache::positions`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostKv {
    /// Keys per head (post-RoPE).
    pub keys: Vec<Vec<f32>>,
    /// Values per head.
    pub values: Vec<Vec<f32>>,
}

impl HostKv {
    /// Takes `store`'s tensors to the host (no copy where burn hands its buffer over).
    fn of_store<B: Backend>(store: KvStore<B>) -> Self {
        let split = |t: Tensor<B, 3>| -> Vec<Vec<f32>> {
            let [heads, len, d] = t.dims();
            let all = host_vec(t);
            if heads == 1 {
                return vec![all];
            }
            all.chunks_exact(len * d).map(<[f32]>::to_vec).collect()
        };
        match store {
            KvStore::Uniform { keys, values } => Self {
                keys: split(keys),
                values: split(values),
            },
            KvStore::PerHead { keys, values } => Self {
                keys: keys.into_iter().map(host_vec).collect(),
                values: values.into_iter().map(host_vec).collect(),
            },
        }
    }

    /// The same entries as burn tensors.
    fn to_store<B: Backend>(&self, head_dim: usize, device: &B::Device) -> KvStore<B> {
        let tensor = |rows: &[f32]| {
            Tensor::<B, 2>::from_data(
                TensorData::new(rows.to_vec(), [rows.len() / head_dim, head_dim]),
                device,
            )
        };
        let uniform = self.keys.windows(2).all(|w| w[0].len() == w[1].len());
        if uniform {
            let (heads, len) = (self.keys.len(), self.keys[0].len() / head_dim);
            let stacked = |per_head: &[Vec<f32>]| {
                Tensor::<B, 3>::from_data(
                    TensorData::new(per_head.concat(), [heads, len, head_dim]),
                    device,
                )
            };
            KvStore::Uniform {
                keys: stacked(&self.keys),
                values: stacked(&self.values),
            }
        } else {
            KvStore::PerHead {
                keys: self.keys.iter().map(|k| tensor(k)).collect(),
                values: self.values.iter().map(|v| tensor(v)).collect(),
            }
        }
    }

    /// Keeps each head's rows at the sorted storage indices `keep[h]`.
    fn gather(&mut self, keep: &[Vec<usize>], head_dim: usize) {
        let pick = |rows: &mut Vec<f32>, ids: &[usize]| {
            let mut kept = Vec::with_capacity(ids.len() * head_dim);
            for &i in ids {
                kept.extend_from_slice(&rows[i * head_dim..(i + 1) * head_dim]);
            }
            *rows = kept;
        };
        for (h, ids) in keep.iter().enumerate() {
            pick(&mut self.keys[h], ids);
            pick(&mut self.values[h], ids);
        }
    }
}

/// A tensor's values on the host as f32.
pub(crate) fn host_vec<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .expect("converted to f32")
}

/// Where a layer's entries are held.
#[derive(Debug, Clone)]
enum Held<B: Backend> {
    /// Burn tensors (the generic attention, the presses, GPU backends).
    Tensors(KvStore<B>),
    /// Host rows (the CPU attention kernel), with the device their tensors are made on.
    Host { kv: HostKv, device: B::Device },
}

/// One layer's cache.
#[derive(Debug, Clone)]
pub struct LayerCache<B: Backend> {
    held: Option<Held<B>>,
    /// The tensors of a host-held layer, made on first use, cleared by every change.
    view: OnceLock<KvStore<B>>,
    positions: Vec<Vec<usize>>,
    head_dim: usize,
    window: Option<usize>,
}

impl<B: Backend> LayerCache<B> {
    /// An empty cache for `kv_heads` heads of `head_dim`.
    pub fn new(kv_heads: usize, head_dim: usize) -> Self {
        Self {
            held: None,
            view: OnceLock::new(),
            positions: vec![Vec::new(); kv_heads],
            head_dim,
            window: None,
        }
    }

    /// The same layer with sliding window `window` (`None`: global).
    pub fn with_window(mut self, window: Option<usize>) -> Self {
        self.window = window;
        self
    }

    /// The layer's sliding window in positions (`None`: it attends globally or was never slid).
    pub fn window(&self) -> Option<usize> {
        self.window
    }

    /// Records the layer's `window` and, for a windowed layer, keeps only each head's last
    /// `window` entries: the model's mask lets the newest row (slot `a`) see slots
    /// `a − window < j ≤ a`, so older entries are never read again. A windowed layer is one
    /// contiguous run of positions (no press evicts there), so its last entries in storage order
    /// are its last positions.
    pub fn slide(&mut self, window: Option<usize>) {
        self.window = window;
        let Some(w) = window else { return };
        let lens: Vec<usize> = self.positions.iter().map(Vec::len).collect();
        if lens.iter().all(|&n| n <= w) {
            return;
        }
        let d = self.head_dim;
        if let Some(Held::Host { kv, .. }) = &mut self.held {
            // Host rows: drop each head's oldest rows in place.
            for (h, &n) in lens.iter().enumerate() {
                let drop = n.saturating_sub(w) * d;
                kv.keys[h].drain(..drop);
                kv.values[h].drain(..drop);
            }
            self.view = OnceLock::new();
        } else if lens.iter().any(|&n| n > 2 * w) {
            // Far past the window (after a prefill): gather the kept rows into new tensors, so
            // the old ones are freed now; a narrowed view could keep them until the next append.
            let keep: Vec<Vec<usize>> = lens
                .iter()
                .map(|&n| (n.saturating_sub(w)..n).collect())
                .collect();
            self.retain(&keep);
            return;
        } else {
            let store = self.take_tensors().map(|store| match store {
                KvStore::Uniform { keys, values } => {
                    let [_, len, _] = keys.dims();
                    let from = len.saturating_sub(w);
                    KvStore::Uniform {
                        keys: keys.narrow(1, from, len - from),
                        values: values.narrow(1, from, len - from),
                    }
                }
                KvStore::PerHead { keys, values } => {
                    let last = |t: Tensor<B, 2>| {
                        let len = t.dims()[0];
                        let from = len.saturating_sub(w);
                        t.narrow(0, from, len - from)
                    };
                    KvStore::PerHead {
                        keys: keys.into_iter().map(last).collect(),
                        values: values.into_iter().map(last).collect(),
                    }
                }
            });
            self.held = store.map(Held::Tensors);
        }
        for p in &mut self.positions {
            let n = p.len().saturating_sub(w);
            p.drain(..n);
        }
    }

    /// Number of heads stored: the model's KV heads, or its query heads once GQA is unfolded
    /// ([`LayerCache::repeat_heads`]).
    pub fn kv_heads(&self) -> usize {
        self.positions.len()
    }

    /// Entries held by KV head `h`.
    pub fn len(&self, h: usize) -> usize {
        self.positions[h].len()
    }

    /// True when no head holds any entry.
    pub fn is_empty(&self) -> bool {
        self.positions.iter().all(Vec::is_empty)
    }

    /// Original positions of KV head `h`'s entries, in storage order.
    pub fn positions(&self, h: usize) -> &[usize] {
        &self.positions[h]
    }

    /// The tensors, if any entry is held (made from the host rows of a host-held layer on first
    /// use, then kept until the layer changes).
    pub fn store(&self) -> Option<&KvStore<B>> {
        match self.held.as_ref()? {
            Held::Tensors(store) => Some(store),
            Held::Host { kv, device } => {
                Some(self.view.get_or_init(|| kv.to_store(self.head_dim, device)))
            }
        }
    }

    /// The host rows, when the layer is held on the host (the CPU kernel's appends).
    pub fn host(&self) -> Option<&HostKv> {
        match self.held.as_ref()? {
            Held::Host { kv, .. } => Some(kv),
            Held::Tensors(_) => None,
        }
    }

    /// Takes the entries as tensors (moving host rows into tensors), leaving nothing held.
    fn take_tensors(&mut self) -> Option<KvStore<B>> {
        let view = self.view.take();
        match self.held.take()? {
            Held::Tensors(store) => Some(store),
            Held::Host { kv, device } => {
                Some(view.unwrap_or_else(|| kv.to_store(self.head_dim, &device)))
            }
        }
    }

    /// Takes the entries as host rows (moving tensors to the host) with their device, leaving
    /// nothing held.
    fn take_host(&mut self) -> Option<(HostKv, B::Device)> {
        self.view = OnceLock::new();
        match self.held.take()? {
            Held::Host { kv, device } => Some((kv, device)),
            Held::Tensors(store) => {
                let device = store.device();
                Some((HostKv::of_store(store), device))
            }
        }
    }

    /// Bytes of K and V held: entries × head_dim × [`BYTES_PER_ELEMENT`] × 2.
    pub fn bytes(&self) -> usize {
        self.positions.iter().map(Vec::len).sum::<usize>() * self.head_dim * BYTES_PER_ELEMENT * 2
    }

    /// Appends `t` new entries to every head.
    ///
    /// # Shapes
    /// - keys, values: `[kv_heads, t, head_dim]`; `positions.len() == t`
    pub fn append(&mut self, keys: Tensor<B, 3>, values: Tensor<B, 3>, positions: &[usize]) {
        for p in &mut self.positions {
            p.extend_from_slice(positions);
        }
        let store = match self.take_tensors() {
            None => KvStore::Uniform { keys, values },
            Some(KvStore::Uniform { keys: k, values: v }) => KvStore::Uniform {
                keys: Tensor::cat(vec![k, keys], 1),
                values: Tensor::cat(vec![v, values], 1),
            },
            Some(KvStore::PerHead {
                keys: ks,
                values: vs,
            }) => {
                let n = ks.len();
                let (mut nk, mut nv) = (Vec::with_capacity(n), Vec::with_capacity(n));
                for (h, (k, v)) in ks.into_iter().zip(vs).enumerate() {
                    let add_k = keys.clone().narrow(0, h, 1).squeeze_dim(0);
                    let add_v = values.clone().narrow(0, h, 1).squeeze_dim(0);
                    nk.push(Tensor::cat(vec![k, add_k], 0));
                    nv.push(Tensor::cat(vec![v, add_v], 0));
                }
                KvStore::PerHead {
                    keys: nk,
                    values: nv,
                }
            }
        };
        self.held = Some(Held::Tensors(store));
    }

    /// Appends `t` new entries to every head on the host, in place; a layer held as tensors
    /// moves to the host first (once).
    ///
    /// # Shapes
    /// - keys, values: `[kv_heads][t][head_dim]`; `positions.len() == t`
    pub fn append_host(
        &mut self,
        keys: &[f32],
        values: &[f32],
        positions: &[usize],
        device: &B::Device,
    ) {
        let (heads, block) = (self.kv_heads(), positions.len() * self.head_dim);
        assert_eq!(keys.len(), heads * block, "append_host: keys size");
        assert_eq!(values.len(), heads * block, "append_host: values size");
        for p in &mut self.positions {
            p.extend_from_slice(positions);
        }
        let mut kv = match self.take_host() {
            Some((kv, _)) => kv,
            None => HostKv {
                keys: vec![Vec::new(); heads],
                values: vec![Vec::new(); heads],
            },
        };
        for h in 0..heads {
            kv.keys[h].extend_from_slice(&keys[h * block..(h + 1) * block]);
            kv.values[h].extend_from_slice(&values[h * block..(h + 1) * block]);
        }
        self.held = Some(Held::Host {
            kv,
            device: device.clone(),
        });
    }

    /// Keys and values of head `h`.
    ///
    /// # Shapes
    /// - returns `([len_h, head_dim], [len_h, head_dim])`
    pub fn head(&self, h: usize) -> Option<(Tensor<B, 2>, Tensor<B, 2>)> {
        match self.store()? {
            KvStore::Uniform { keys, values } => Some((
                keys.clone().narrow(0, h, 1).squeeze_dim(0),
                values.clone().narrow(0, h, 1).squeeze_dim(0),
            )),
            KvStore::PerHead { keys, values } => Some((keys[h].clone(), values[h].clone())),
        }
    }

    /// Unfolds GQA: head `h` becomes heads `h·times .. (h+1)·times`, each a copy of its entries
    /// and positions, so every query head of a group gets its own entry set.
    pub fn repeat_heads(&mut self, times: usize) {
        assert!(times >= 1, "repeat_heads: at least one copy");
        if times == 1 {
            return;
        }
        self.positions = self
            .positions
            .iter()
            .flat_map(|p| std::iter::repeat_n(p, times).cloned())
            .collect();
        let copies = |ts: Vec<Tensor<B, 2>>| -> Vec<Tensor<B, 2>> {
            ts.into_iter()
                .flat_map(|t| std::iter::repeat_n(t, times))
                .collect()
        };
        let store = self.take_tensors().map(|store| match store {
            KvStore::Uniform { keys, values } => KvStore::Uniform {
                keys: repeat_heads(keys, times),
                values: repeat_heads(values, times),
            },
            KvStore::PerHead { keys, values } => KvStore::PerHead {
                keys: copies(keys),
                values: copies(values),
            },
        });
        self.held = store.map(Held::Tensors);
    }

    /// Switches to one tensor per head (what a per-head press produces), keeping every entry.
    pub fn to_per_head(&mut self) {
        let store = self.take_tensors().map(|store| match store {
            KvStore::Uniform { keys, values } => {
                let n = self.kv_heads();
                let split = |t: Tensor<B, 3>| -> Vec<Tensor<B, 2>> {
                    (0..n)
                        .map(|h| t.clone().narrow(0, h, 1).squeeze_dim(0))
                        .collect()
                };
                KvStore::PerHead {
                    keys: split(keys),
                    values: split(values),
                }
            }
            per_head => per_head,
        });
        self.held = store.map(Held::Tensors);
    }

    /// Replaces the tensors and positions wholesale, for presses that rewrite entries in place
    /// (TreeKV re-assigning positions, SpindleKV reconstructing from its codebook). The store
    /// must hold `positions[h].len()` entries for head `h`.
    pub fn replace(&mut self, store: Option<KvStore<B>>, positions: Vec<Vec<usize>>) {
        assert_eq!(
            positions.len(),
            self.kv_heads(),
            "replace: one position list per KV head"
        );
        self.view = OnceLock::new();
        self.held = store.map(Held::Tensors);
        self.positions = positions;
    }

    /// [`Self::replace`] with host rows: the layer is then held on the host, as the CPU kernel
    /// appends to it (SpindleKV restoring its codebook entries each step).
    pub fn replace_host(&mut self, kv: HostKv, positions: Vec<Vec<usize>>, device: &B::Device) {
        assert_eq!(
            positions.len(),
            self.kv_heads(),
            "replace_host: one position list per KV head"
        );
        let rows = |h: usize| positions[h].len() * self.head_dim;
        assert!(
            (0..positions.len())
                .all(|h| kv.keys[h].len() == rows(h) && kv.values[h].len() == rows(h)),
            "replace_host: one row of head_dim per position"
        );
        self.view = OnceLock::new();
        self.held = Some(Held::Host {
            kv,
            device: device.clone(),
        });
        self.positions = positions;
    }

    /// Moves head `h`'s entries to positions `new[h]` (one per entry, storage order), turning
    /// each head's key rows with `turn(rows, old, new)` (`[len_h][head_dim]`, in place). The
    /// layer is then held on the host: a host-held layer is turned where it is, a tensor-held one
    /// comes to the host once (TreeKV re-assigning positions after every eviction).
    pub fn move_keys(
        &mut self,
        new: Vec<Vec<usize>>,
        turn: impl Fn(&mut [f32], &[usize], &[usize]),
    ) {
        assert_eq!(
            new.len(),
            self.kv_heads(),
            "move_keys: one position list per KV head"
        );
        let Some((mut kv, device)) = self.take_host() else {
            return;
        };
        for (h, to) in new.iter().enumerate() {
            assert_eq!(to.len(), self.positions[h].len(), "move_keys: head {h}");
            turn(&mut kv.keys[h], &self.positions[h], to);
        }
        self.held = Some(Held::Host { kv, device });
        self.positions = new;
    }

    /// A copy of the entries on the host (storage order, as [`Self::positions`]).
    pub fn host_copy(&self) -> HostKv {
        match (&self.held, self.store()) {
            (Some(Held::Host { kv, .. }), _) => kv.clone(),
            (_, Some(store)) => HostKv::of_store(store.clone()),
            _ => HostKv {
                keys: vec![Vec::new(); self.kv_heads()],
                values: vec![Vec::new(); self.kv_heads()],
            },
        }
    }

    /// Overwrites every entry at a position below `end` with `other`'s row at the same position
    /// (`other` holding positions `0..` in order, one row per position, as a FullKV prefill
    /// leaves them); positions `other` does not reach keep their rows. Returns the rows
    /// overwritten. The layer is then held on the host.
    pub fn overwrite_below(&mut self, end: usize, other: &HostKv) -> usize {
        let d = self.head_dim;
        if end == 0 || self.is_empty() {
            return 0;
        }
        let Some((mut kv, device)) = self.take_host() else {
            return 0;
        };
        let mut rows = 0;
        for (h, positions) in self.positions.iter().enumerate() {
            let (Some(ok), Some(ov)) = (other.keys.get(h), other.values.get(h)) else {
                continue;
            };
            for (i, &p) in positions.iter().enumerate() {
                if p < end && (p + 1) * d <= ok.len() {
                    kv.keys[h][i * d..(i + 1) * d].copy_from_slice(&ok[p * d..(p + 1) * d]);
                    kv.values[h][i * d..(i + 1) * d].copy_from_slice(&ov[p * d..(p + 1) * d]);
                    rows += 1;
                }
            }
        }
        self.held = Some(Held::Host { kv, device });
        rows
    }

    /// Head dimension.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Keeps, for each head, only the entries at `keep[h]` (storage indices, any order; they are
    /// kept in ascending storage order). Heads whose lists have different lengths switch the
    /// layer to per-head storage.
    pub fn retain(&mut self, keep: &[Vec<usize>]) {
        assert_eq!(
            keep.len(),
            self.kv_heads(),
            "retain: one index list per KV head"
        );
        let mut sorted: Vec<Vec<usize>> = keep.to_vec();
        for s in &mut sorted {
            s.sort_unstable();
            s.dedup();
        }
        for (h, ids) in sorted.iter().enumerate() {
            self.positions[h] = ids.iter().map(|&i| self.positions[h][i]).collect();
        }
        if let Some(Held::Host { kv, .. }) = &mut self.held {
            kv.gather(&sorted, self.head_dim);
            self.view = OnceLock::new();
            return;
        }
        let Some(store) = self.take_tensors() else {
            return;
        };
        let device = store.device();
        let index = |ids: &[usize]| {
            let ids: Vec<i64> = ids.iter().map(|&i| i as i64).collect();
            let n = ids.len();
            Tensor::<B, 1, Int>::from_data(TensorData::new(ids, [n]), &device)
        };
        let uniform = sorted.windows(2).all(|w| w[0].len() == w[1].len());
        let (mut nk, mut nv) = (Vec::new(), Vec::new());
        for (h, ids) in sorted.iter().enumerate() {
            let (k, v) = match &store {
                KvStore::Uniform { keys, values } => (
                    keys.clone().narrow(0, h, 1).squeeze_dim::<2>(0),
                    values.clone().narrow(0, h, 1).squeeze_dim::<2>(0),
                ),
                KvStore::PerHead { keys, values } => (keys[h].clone(), values[h].clone()),
            };
            nk.push(k.select(0, index(ids)));
            nv.push(v.select(0, index(ids)));
        }
        self.held = Some(Held::Tensors(if uniform {
            KvStore::Uniform {
                keys: Tensor::stack(nk, 0),
                values: Tensor::stack(nv, 0),
            }
        } else {
            KvStore::PerHead {
                keys: nk,
                values: nv,
            }
        }));
    }
}

/// Repeats every head `times` times: head `h` copied to `h·times .. (h+1)·times`.
///
/// # Shapes
/// - t: `[heads, len, d]` → `[heads·times, len, d]`
pub fn repeat_heads<B: Backend>(t: Tensor<B, 3>, times: usize) -> Tensor<B, 3> {
    if times == 1 {
        return t;
    }
    let [h, len, d] = t.dims();
    t.unsqueeze_dim::<4>(1)
        .repeat_dim(1, times)
        .reshape([h * times, len, d])
}

/// The whole model's cache: one [`LayerCache`] per layer and the next position to assign.
#[derive(Debug, Clone)]
pub struct KvCache<B: Backend> {
    /// Per-layer caches.
    pub layers: Vec<LayerCache<B>>,
    /// Position the next token will take.
    pub next_position: usize,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `n_layers` layers.
    pub fn new(n_layers: usize, kv_heads: usize, head_dim: usize) -> Self {
        Self {
            layers: (0..n_layers)
                .map(|_| LayerCache::new(kv_heads, head_dim))
                .collect(),
            next_position: 0,
        }
    }

    /// Total bytes of K and V held.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(LayerCache::bytes).sum()
    }
}

/// Entries a layer of sliding window `window` holds per head after `tokens` tokens: every token
/// for a global layer (`None`), at most the window for a windowed one.
pub fn window_span(window: Option<usize>, tokens: usize) -> usize {
    window.map_or(tokens, |w| w.min(tokens))
}

#[cfg(all(test, feature = "flex"))]
mod tests {
    use burn::backend::Flex;

    use super::*;

    type B = Flex;

    /// `[heads][t][d]` rows whose values name their head, position and dimension.
    fn rows(heads: usize, positions: &[usize], d: usize, salt: f32) -> Vec<f32> {
        let mut out = Vec::new();
        for h in 0..heads {
            for &p in positions {
                out.extend((0..d).map(|i| salt + (h * 1000 + p * 10 + i) as f32));
            }
        }
        out
    }

    fn per_head(cache: &LayerCache<B>) -> Vec<(Vec<f32>, Vec<f32>)> {
        (0..cache.kv_heads())
            .map(|h| {
                let (k, v) = cache.head(h).expect("entries");
                (host_vec(k), host_vec(v))
            })
            .collect()
    }

    /// The same appends and evictions on a host-held and a tensor-held layer leave the same
    /// entries, positions and bytes; host rows stay on the host through retain and slide.
    #[test]
    fn host_and_tensor_layers_hold_the_same_entries() {
        let (heads, d) = (2, 3);
        let device = Default::default();
        let tensor = |v: Vec<f32>, t: usize| {
            Tensor::<B, 3>::from_data(TensorData::new(v, [heads, t, d]), &device)
        };
        let mut host = LayerCache::<B>::new(heads, d);
        let mut burn = LayerCache::<B>::new(heads, d);
        let steps: [&[usize]; 3] = [&[0, 1, 2, 3, 4], &[5], &[6, 7]];
        for (i, pos) in steps.iter().enumerate() {
            let (k, v) = (rows(heads, pos, d, 0.0), rows(heads, pos, d, 0.5));
            host.append_host(&k, &v, pos, &device);
            burn.append(tensor(k, pos.len()), tensor(v, pos.len()), pos);
            if i == 0 {
                // Uneven lists: per-head storage on the tensor side.
                host.retain(&[vec![4, 0, 2], vec![1, 3]]);
                burn.retain(&[vec![4, 0, 2], vec![1, 3]]);
            }
        }
        assert!(host.host().is_some(), "retain keeps host rows on the host");
        assert_eq!(host.positions(0), &[0, 2, 4, 5, 6, 7]);
        assert_eq!(host.positions(1), &[1, 3, 5, 6, 7]);
        assert_eq!(per_head(&host), per_head(&burn));
        host.slide(Some(4));
        burn.slide(Some(4));
        assert!(host.host().is_some(), "slide keeps host rows on the host");
        assert_eq!(host.positions(0), &[4, 5, 6, 7]);
        assert_eq!(host.positions(1), &[3, 5, 6, 7]);
        assert_eq!(per_head(&host), per_head(&burn));
        assert_eq!(host.bytes(), burn.bytes());
        // A burn-side append moves the host rows to tensors, with nothing lost.
        let pos = [8];
        host.append(
            tensor(rows(heads, &pos, d, 0.0), 1),
            tensor(rows(heads, &pos, d, 0.5), 1),
            &pos,
        );
        burn.append_host(
            &rows(heads, &pos, d, 0.0),
            &rows(heads, &pos, d, 0.5),
            &pos,
            &device,
        );
        assert!(host.host().is_none() && burn.host().is_some());
        assert_eq!(per_head(&host), per_head(&burn));
        // The head rows are the ones appended: head 1, position 8, dims 0..3.
        assert_eq!(per_head(&burn)[1].0[12..], [1080.0, 1081.0, 1082.0]);
    }
}
