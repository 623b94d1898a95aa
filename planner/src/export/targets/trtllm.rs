//! `trtllm`: TensorRT-LLM's `KvCacheConfig` — `max_attention_window` (one entry per layer, all
//! L: full layers at the context and one window for the others), `sink_token_length` 0,
//! `tokens_per_block` — as JSON (`kv_cache_config.json`, for
//! `LLM(kv_cache_config=KvCacheConfig(**json))`) and nested under `kv_cache_config:` for
//! `trtllm-serve --extra_llm_api_options` (`extra_llm_api_options.yaml`). The same files serve
//! the PyTorch backend (no window in the kernel, freed blocks still read: `trtllm:<method>`
//! simulates the case where another request has taken them) and the legacy TensorRT engine
//! (windowed kernel: `trtllm-engine:<method>`).
//!
//! What TensorRT-LLM honours (the capability table's entries, at the commits each cites):
//!
//! - **PyTorch backend** (the default, [`Trtllm`]): `KvCacheConfig.max_attention_window` (one
//!   entry per layer, repeated if shorter) reaches the **block manager only**. `QwenAttention`
//!   and `LlamaAttention` pass no `attention_window_size`, and `trtllm.py` then gives the kernel
//!   `max_seq_len` (PR #12597 fixed this for Mistral/Mixtral only; issue #11244 shows it on
//!   Llama 3.1); `Gemma3Attention` passes the model's `sliding_window` for its local layers only.
//!   So prefill and every decode step attend over every position in the sequence's block
//!   table. The block manager (`kvCacheManager.cpp` at `b35ac1b6`, [`crate::export::blocks`])
//!   gives a request the whole prompt in every layer at admission; in decode `addToken` →
//!   `adjustBlocksIfNeeded` detaches a windowed layer's front block while
//!   `numTokens − removed·B ≥ W + B` and releases it to the free queue, but the block's id
//!   stays in the sequence's list and in the offsets the kernel reads (only
//!   `mNumFrontBlocksRemoved` moves): decode reads the detached blocks — their own keys and
//!   values until the pool hands them to another request (FIFO), that request's after.
//!   `Prefill::Unwindowed`; `kvplan eval --methods trtllm:<m>` runs the second case, the first
//!   is FullKV's computation. **One counter per sequence**: `getNumFrontBlocksRemoved()` takes no
//!   window, and `BlockManager::adjustBlocksIfNeeded` walks the window managers in ascending
//!   window order, so once the smallest window has detached its blocks no larger window's test
//!   passes: only the layers at the smallest window ever free a block. The export therefore
//!   writes **two classes** (full layers and one window, [`Layers::TwoClasses`]; on Gemma 3 the
//!   model's own 512), never one window per layer. Blocks of 32 tokens (`tokens_per_block`: not
//!   a `KvCacheConfig` field at `fcd3f316`; a later `KvCacheConfig` has it with default 32, and
//!   `py_executor_creator.py` at `bab0f2e6` reads `kv_cache_config.tokens_per_block`);
//!   `⌈min(n, W)/32⌉ + 1` blocks for a windowed layer in steady decode (`kSWAExtraBlock`). The
//!   pool is split in equal shares per distinct window unless `TRTLLM_WINDOW_SIZE_SHARES` is set
//!   (`calculateMaxNumBlocks`); the export writes it (`trtllm_env.sh`). RoPE untouched.
//! - **Legacy TensorRT engine** (`trtllm-build`, [`engine_capability`]): the same
//!   `max_attention_window` list reaches the GPT attention plugin (`HOST_MAX_ATTENTION_WINDOW`),
//!   which masks each layer to its window in context and generation, so prefill is windowed as
//!   well. Same block manager, same files.

use super::windows::{bytes_note, prefill_note, reduce};
use crate::export::blocks::{slots, Serving};
use crate::export::capability::{
    Arch, BlockRule, Capability, Engine, Layers, Prefill, Refusal, Source,
};
use crate::export::classes::LayerClass;
use crate::export::manifest::{file, json};
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::Result;

const TRT: &str = "NVIDIA/TensorRT-LLM";

const TRT_TORCH: &[Source] = &[
    Source {
        repo: TRT,
        commit: "87b279a9719cc257bb89d19ea794296857e2f83f",
        file: "tensorrt_llm/_torch/models/modeling_qwen.py: QwenAttention, no attention_window_size",
    },
    Source {
        repo: TRT,
        commit: "PR #12597, issue #11244",
        file: "sliding window reaches the kernel for Mistral/Mixtral only; Llama prefill stays dense",
    },
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file: "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window",
    },
    Source {
        repo: TRT,
        commit: "bab0f2e6 (py_executor_creator.py); KvCacheConfig.tokens_per_block default 32 in a later llm_args.py",
        file: "tensorrt_llm/_torch/pyexecutor/py_executor_creator.py: tokens_per_block = kv_cache_config.tokens_per_block",
    },
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file: "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: addSequence (whole prompt), \
               BlockManager::adjustBlocksIfNeeded (window managers in ascending order), \
               WindowBlockManager::adjustBlocksIfNeeded (detach at W + B, one \
               getNumFrontBlocksRemoved() per sequence), detachFrontBlock (released, id kept in \
               the block list), \
               calculateMaxBlockRequirementsPerBeam (+ kSWAExtraBlock), calculateMaxNumBlocks \
               (equal shares per window, TRTLLM_WINDOW_SIZE_SHARES)",
    },
];

const TRT_GEMMA3: &[Source] = &[
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file:
            "tensorrt_llm/_torch/models/modeling_gemma3.py: Gemma3Attention, attention_window_size \
               = sliding_window on local layers only",
    },
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file:
            "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window (tokens_per_block \
               is read from a later KvCacheConfig, default 32)",
    },
];

const TRT_ENGINE: &[Source] = &[
    Source {
        repo: TRT,
        commit: "fcd3f31682808ae56118ae43c1d7864a3a945e6f",
        file:
            "tensorrt_llm/llmapi/llm_args.py: KvCacheConfig.max_attention_window (\"only the last \
               tokens will be stored\")",
    },
    Source {
        repo: TRT,
        commit: "b35ac1b64368513d215c57d2ed01d62d910df8da",
        file: "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: cyclic window blocks",
    },
];

/// What the legacy TensorRT engine honours for `arch` (module header): the files of
/// [`Trtllm`] serve it too; `kvplan eval --methods trtllm-engine:<method>` simulates it.
pub fn engine_capability(arch: Arch) -> std::result::Result<Capability, Refusal> {
    if !arch.engines_read() {
        return Err(Refusal::unread(Engine::TrtllmEngine, arch));
    }
    Ok(Capability::windows(
        Engine::TrtllmEngine,
        arch,
        Layers::TwoClasses,
        Prefill::Windowed,
        BlockRule::Trtllm,
        TRT_ENGINE,
    ))
}

/// The `trtllm` target.
pub struct Trtllm;

impl ExportTarget for Trtllm {
    fn about(&self) -> About {
        About {
            name: "trtllm",
            files: &[
                "kv_cache_config.json",
                "extra_llm_api_options.yaml",
                "trtllm_env.sh",
            ],
            holds: "max_attention_window (one per layer: full layers and one window), \
                    sink_token_length, tokens_per_block, for the PyTorch backend and the legacy \
                    engine",
            reader: "TensorRT-LLM: KvCacheConfig(max_attention_window=..., sink_token_length=..., \
                     tokens_per_block=...); trtllm-serve --extra_llm_api_options",
        }
    }

    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        let sources = match arch {
            Arch::Llama | Arch::Qwen2 => TRT_TORCH,
            Arch::Gemma3 => TRT_GEMMA3,
            _ => return Err(Refusal::unread(Engine::Trtllm, arch)),
        };
        Ok(Capability::windows(
            Engine::Trtllm,
            arch,
            Layers::TwoClasses,
            Prefill::Unwindowed,
            BlockRule::Trtllm,
            sources,
        ))
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let (r, summary) = reduce(cx, cap)?;
        let windows: Vec<usize> = r.layers.iter().map(|c| c.held(cx.n)).collect();
        let mut distinct = windows.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let block = summary.block_size;
        let body = serde_json::json!({
            "max_attention_window": windows,
            "sink_token_length": 0,
            "tokens_per_block": block,
        });
        let list: Vec<String> = windows.iter().map(ToString::to_string).collect();
        let yaml = format!(
            "kv_cache_config:\n  max_attention_window: [{}]\n  sink_token_length: 0\n  \
             tokens_per_block: {block}\n",
            list.join(", ")
        );
        let shares = window_shares(&r.layers, &windows, cx.n, block, &summary.serving);
        let env = format!("export TRTLLM_WINDOW_SIZE_SHARES={shares}\n");
        let mut notes = vec![
            format!(
                "{} distinct windows (TensorRT-LLM keeps one pool per window); {}",
                distinct.len(),
                bytes_note(&summary, cx.n)
            ),
            format!(
                "TensorRT-LLM splits its KV pool in equal shares per distinct window unless \
                 TRTLLM_WINDOW_SIZE_SHARES is set (BaseKVCacheManager::calculateMaxNumBlocks); \
                 trtllm_env.sh sets it to {shares} (ascending windows), each window's share of \
                 the bytes a request takes at admission — every layer holds the whole prompt \
                 then (addSequence), windows free blocks only once decode passes W + a block"
            ),
            prefill_note(cap),
        ];
        if let Ok(legacy) = engine_capability(cx.arch) {
            notes.push(prefill_note(&legacy));
        }
        notes.push(
            "serve: source trtllm_env.sh; trtllm-serve MODEL --extra_llm_api_options \
             extra_llm_api_options.yaml; LLM API: KvCacheConfig(**json.load(open('kv_cache_config.json')))"
                .to_string(),
        );
        Ok(Written {
            files: vec![
                file("kv_cache_config.json", json(&body)?),
                file("extra_llm_api_options.yaml", yaml.into_bytes()),
                file("trtllm_env.sh", env.into_bytes()),
            ],
            notes,
            reduction: Some(summary),
            scores: None,
        })
    }
}

/// `TRTLLM_WINDOW_SIZE_SHARES`: per distinct window (ascending, as
/// `BaseKVCacheManager::calculateMaxNumBlocks` assigns them) the share of a request's bytes at
/// admission its layers take, to 4 decimals (the engine normalises them to sum 1).
fn window_shares(
    layers: &[LayerClass],
    windows: &[usize],
    n: usize,
    block: usize,
    serving: &Serving,
) -> String {
    let mut by_window = std::collections::BTreeMap::<usize, usize>::new();
    for (&class, &w) in layers.iter().zip(windows) {
        *by_window.entry(w).or_default() +=
            slots(BlockRule::Trtllm, class, n, block, serving).admission;
    }
    let total: usize = by_window.values().sum();
    let shares: Vec<String> = by_window
        .values()
        .map(|&x| format!("{:.4}", x as f64 / total.max(1) as f64))
        .collect();
    shares.join(",")
}
