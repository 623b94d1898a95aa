//! `headkv`: what HeadKV and KVCache-Factory read — the score file (`headkv_scores.json`, one
//! line `{"layer-head": [score]}` over query heads, layer-major) and the budgets themselves,
//! `head_capacity.json`: `head_capacity[l][q]`, `[layers, query heads]`, the entries head `q`
//! selects beyond the observation window — the plan's budget of its KV head minus `window_size`
//! (KVCache-Factory's HeadKV runs with a window of 8: `run_longbench.py`). Both packages compute
//! `head_capacity` from their own settings unless it is set: KVCache-Factory reads
//! `model.config.head_capacity` (a `[layers, query heads]` tensor, averaged over each KV head's
//! query heads in kv-head mode), HeadKV's `ReasonSnapKVCluster.head_capacity` (window 32) can
//! be assigned after construction. Llama only (the capability table says why).

use super::super::headkv_scores;
use super::{file, json, Context, Writer, Written};
use crate::export::capability::{Capability, Engine};
use crate::export::engines::scores;
use crate::Result;

/// KVCache-Factory's observation window for HeadKV (`window_sizes = 8`).
pub const WINDOW: usize = 8;

/// The `headkv` target.
pub struct HeadKv;

impl Writer for HeadKv {
    fn engine(&self) -> Engine {
        Engine::HeadKv
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let section = scores(cx.plan, cx.scores)?;
        let g = &cx.plan.model.geometry;
        let b = cx.plan.budgets(cx.method, cx.n, cx.target)?;
        let capacity: Vec<Vec<usize>> = b
            .per_layer_per_kv_head
            .iter()
            .map(|row| {
                g.q_to_kv
                    .iter()
                    .map(|&kv| row[kv].saturating_sub(WINDOW))
                    .collect()
            })
            .collect();
        let body = serde_json::json!({
            "window_size": WINDOW,
            "head_capacity": capacity,
        });
        let notes = vec![
            format!(
                "head_capacity: the {} plan's budgets at {} tokens per query head, minus the \
                 {WINDOW}-token window; {}",
                cx.method, cx.n, cap.note
            ),
            "KVCache-Factory: model.model.config.head_capacity = \
             torch.tensor(json.load(open('head_capacity.json'))['head_capacity']); HeadKV's \
             cluster uses a 32-token window: subtract 24 more"
                .to_string(),
        ];
        Ok(Written {
            files: vec![
                file(
                    "headkv_scores.json",
                    headkv_scores::to_headkv_json(&section.scores).into_bytes(),
                ),
                file("head_capacity.json", json(&body)?),
            ],
            notes,
            reduction: None,
            scores: Some(cx.scores.name()),
        })
    }
}
