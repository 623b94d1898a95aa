//! `headkv`: what HeadKV and KVCache-Factory read — the score file (`headkv_scores.json`, one
//! line `{"layer-head": [score]}` over query heads, layer-major) and the budgets themselves,
//! `head_capacity.json`: `head_capacity[l][q]`, `[layers, query heads]`, the entries head `q`
//! selects beyond the observation window — the plan's budget of its KV head minus
//! `window_size` — with the settings KVCache-Factory's `HeadKVCluster` needs to hold the plan.
//!
//! What the packages do (read at the commits the sources name, 2026-11-29):
//! - **KVCache-Factory** (`pyramidkv/pyramidkv_utils.py`: `init_headkv`, `HeadKVCluster`) reads
//!   `config.head_capacity` `[layers, query heads]` once, on the first forward. Each head keeps
//!   `head_capacity + window_size` entries — but only when `q_len ≥ max_capacity_prompt`
//!   (`base_capacity = max_capacity_prompt − window_size`; "not compress" when it exceeds the
//!   prompt's scored length), whose default 2048 would leave every prompt under ~2K whole: the
//!   file sets it to the plan's per-head budget. Its default `kv_cache_granularity =
//!   "query_head"` repeats K/V per query head before selecting (`maybe_repeat_kv_before_cache`),
//!   holding `num_key_value_groups`× the plan's bytes (3× on SmolLM2); `"kv_head"` averages each
//!   group's row (exact here: a group's query heads carry one budget) and holds the plan's bytes —
//!   it needs `head_capacity` as a tensor. The library path patches by architecture class
//!   (`replace_llama`, `replace_mistral`); its `run_longbench.py` sets `model_max_len` only for
//!   names containing llama2/llama3/mistral, so it fails on other names (SmolLM2).
//! - **HeadKV** (`headkv/snapkv_utils.py`: `ReasonSnapKVCluster`) picks its bundled score file by
//!   'llama' or 'mistral' in the model name (a bare `ValueError` otherwise) and reshapes it to
//!   `[layers, query heads]` — the bundled Llama-3-8B files hold 1024 entries, so any other
//!   shape fails; `head_capacity` can be assigned only after a construction that needs both.
//!   Not runnable on these models as shipped: the notes say so, and the files target
//!   KVCache-Factory.
//!
//! Llama only (the capability table says why).

use super::super::headkv_scores;
use crate::export::capability::{Arch, Capability, Engine, Refusal, Source};
use crate::export::manifest::{file, json};
use crate::export::score_set::scores;
use crate::export::target::{About, BudgetsOf, Context, ExportTarget, Written};
use crate::Result;

const HEADKV: &[Source] = &[
    Source {
        repo: "FYYFU/HeadKV",
        commit: "0862a0955fe82e9ff611d59541918e02c5def625",
        file: "headkv/snapkv_utils.py: ReasonSnapKVCluster.head_capacity [layers, heads]; score \
               file chosen by 'llama'/'mistral' in the model name",
    },
    Source {
        repo: "Zefan-Cai/KVCache-Factory",
        commit: "c97f9d706d63d1b56e980f8b81b2a924c21162b3",
        file: "run_longbench.py: model.config.head_capacity; pyramidkv/monkeypatch.py: \
               replace_llama, replace_mistral",
    },
];

/// KVCache-Factory's observation window for HeadKV (`window_sizes = 8`).
pub const WINDOW: usize = 8;

/// The `headkv` target.
pub struct HeadKv;

impl ExportTarget for HeadKv {
    fn about(&self) -> About {
        About {
            name: "headkv",
            files: &["headkv_scores.json", "head_capacity.json"],
            holds: "HeadKV scores and head_capacity [layers, query heads]",
            reader: "HeadKV and KVCache-Factory: head score file and head_capacity \
                     [layers, query heads]",
        }
    }

    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        match arch {
            Arch::Llama => Ok(Capability::package(
                Engine::HeadKv,
                arch,
                "HeadKV and KVCache-Factory run Llama and Mistral (monkeypatch, and the score file \
                 chosen by the model path)",
                HEADKV,
            )),
            _ => Err(Refusal::new(
                Engine::HeadKv,
                arch,
                "HeadKV picks its score file by 'llama' or 'mistral' in the model name (ValueError \
                 otherwise) and KVCache-Factory patches only LlamaAttention and MistralAttention, \
                 so neither runs this architecture.",
                "kvplan generate --method headkv-r runs the plan here; --to kvpress or --to trtllm \
                 for a serving engine.",
                HEADKV,
            )),
        }
    }

    fn budgets_of(&self) -> BudgetsOf {
        BudgetsOf::ScoreSet
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
        let per_head = cx.target.per_head(cx.n);
        let body = serde_json::json!({
            "window_size": WINDOW,
            "max_capacity_prompt": per_head,
            "kernel_size": 7,
            "pooling": "maxpool",
            "kv_cache_granularity": "kv_head",
            "gqa_score_agg": "mean",
            "head_capacity": capacity,
        });
        let groups = g.q_heads / g.kv_heads.max(1);
        let notes = vec![
            format!(
                "head_capacity: the {} plan's budgets at {} tokens per query head, minus the \
                 {WINDOW}-token window; {}",
                cx.method, cx.n, cap.note
            ),
            "KVCache-Factory: replace_llama('headkv'); then for every layer's self_attn.config \
             set each key of head_capacity.json (head_capacity as torch.tensor(..., \
             dtype=torch.int32)) before the first forward; batch size 1, flash-attn 2"
                .to_string(),
            format!(
                "max_capacity_prompt = {per_head} (the plan's per-head budget): KVCache-Factory \
                 compresses only prompts at least that long (its default 2048 would leave shorter \
                 prompts whole); kv_cache_granularity kv_head holds the plan's bytes — the \
                 default query_head holds {groups}× them (K/V repeated per query head)"
            ),
            "HeadKV's own repository cannot run this model as shipped: ReasonSnapKVCluster picks \
             its bundled score file by 'llama'/'mistral' in the model name and reshapes it to \
             [layers, query heads] (the bundled files are Llama-3-8B's 32 × 32)"
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
