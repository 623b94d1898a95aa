//! Observation of the forward pass (docs/design.md, "Observation").
//!
//! A forward pass takes `Option<&mut Observer>`; with `None` nothing below runs and nothing is
//! copied off the device. When attached, per layer and per forward call it records:
//! - the softmax attention of the last `attn_rows` query rows of every query head (a decode step
//!   is one row, so attaching with `attn_rows ≥ 1` records every decode step's attention), or,
//!   with `rows_end`, of the `attn_rows` rows that end just before that absolute position (an
//!   observation window placed at the end of a prompt's question rather than at its last token);
//! - on request, the pre-RoPE keys and the values of the new tokens.
//!
//! Only the requested rows are copied to the host; the full `[heads, n, n]` matrix never is.

/// What to record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObserveConfig {
    /// Record the attention of the last this-many query rows of each call (0 = none).
    pub attn_rows: usize,
    /// Where the recorded rows end (exclusive, an absolute position): the `attn_rows` rows before
    /// it, those of them the call runs. `None`: the call's last rows.
    pub rows_end: Option<usize>,
    /// Record pre-RoPE keys and values of each call's new tokens.
    pub keys_values: bool,
    /// Record, per query head, the attention each key received summed over *all* query rows of
    /// the call (H2O's accumulated attention), computed block by block during prefill.
    pub column_sums: bool,
    /// Layers to observe (`None` = all).
    pub layers: Option<Vec<usize>>,
}

/// Attention rows of one layer for one forward call.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionRows {
    /// Absolute positions of the observed query rows.
    pub query_positions: Vec<usize>,
    /// `[query_head][row][key]`: probabilities over the keys the head's KV head held, in storage
    /// order (see `key_positions`).
    pub probs: Vec<Vec<Vec<f32>>>,
    /// `[kv_head][key]`: original position of each key.
    pub key_positions: Vec<Vec<usize>>,
    /// `kv_of[query_head]`: the cache head (index into `key_positions`) whose keys the query
    /// head's rows cover — the geometry's query→KV map, or its unfolded copy.
    pub kv_of: Vec<usize>,
}

/// Pre-RoPE keys and values of one layer for one forward call: `[kv_head][token][dim]` flattened.
#[derive(Debug, Clone, PartialEq)]
pub struct KeysValues {
    /// Positions of the tokens.
    pub positions: Vec<usize>,
    /// `kv_heads × t × head_dim`, pre-RoPE keys.
    pub keys: Vec<f32>,
    /// `kv_heads × t × head_dim`, values.
    pub values: Vec<f32>,
}

/// Attention each key received, summed over all query rows of one forward call.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnSums {
    /// `[query_head][key]`, keys in the storage order of the head's KV head.
    pub sums: Vec<Vec<f32>>,
    /// `kv_of[query_head]`: the cache head whose keys the query head's sums cover.
    pub kv_of: Vec<usize>,
}

/// Everything recorded for one layer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerObservation {
    /// One entry per forward call that produced observed rows.
    pub attention: Vec<AttentionRows>,
    /// One entry per forward call, when `column_sums` is on.
    pub column_sums: Vec<ColumnSums>,
    /// One entry per forward call, when `keys_values` is on.
    pub keys_values: Vec<KeysValues>,
}

/// Collects observations across forward calls.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    /// What is recorded.
    pub config: ObserveConfig,
    /// Per layer.
    pub layers: Vec<LayerObservation>,
}

impl Observer {
    /// An observer recording what `config` asks for, for a model of `n_layers`.
    pub fn new(config: ObserveConfig, n_layers: usize) -> Self {
        Self {
            config,
            layers: vec![LayerObservation::default(); n_layers],
        }
    }

    /// The layer's record, if this layer is observed.
    pub fn layer(&mut self, layer: usize) -> Option<&mut LayerObservation> {
        let wanted = self
            .config
            .layers
            .as_ref()
            .is_none_or(|ls| ls.contains(&layer));
        if wanted {
            self.layers.get_mut(layer)
        } else {
            None
        }
    }

    /// Clears everything recorded so far (the configuration stays).
    pub fn clear(&mut self) {
        for l in &mut self.layers {
            *l = LayerObservation::default();
        }
    }
}
