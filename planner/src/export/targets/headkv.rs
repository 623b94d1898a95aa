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
use crate::export::capability::{Arch, Capability, Engine, Refusal, Source};
use crate::export::manifest::{file, json};
use crate::export::score_set::scores;
use crate::export::target::{BudgetsOf, Context, ExportTarget, Written};
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
    fn name(&self) -> &'static str {
        "headkv"
    }

    fn files(&self) -> &'static [&'static str] {
        &["headkv_scores.json", "head_capacity.json"]
    }

    fn holds(&self) -> &'static str {
        "HeadKV scores and head_capacity [layers, query heads]"
    }

    fn reader(&self) -> &'static str {
        "HeadKV and KVCache-Factory: head score file and head_capacity [layers, query heads]"
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
