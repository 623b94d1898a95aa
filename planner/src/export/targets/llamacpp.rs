//! `llamacpp`: llama.cpp's `--override-kv <arch>.attention.sliding_window=int:W`, the window of
//! the layers the architecture code marks sliding (Gemma 3: all but every 6th). The global
//! layers stay full and every layer keeps its RoPE; the local window is the one that keeps the
//! plan's bytes beside full global layers ([`crate::export::classes::native_only`]). Other
//! architectures are refused by the capability table.
//!
//! What llama.cpp honours (the capability table's entries): for Gemma 3 the local layers are
//! every layer but each 6th (`set_swa_pattern(6)`), their window `n_swa` read from
//! `gemma3.attention.sliding_window`, which `--override-kv gemma3.attention.sliding_window=int:W`
//! replaces; the global layers stay full, every layer keeps its RoPE. Other architectures have
//! no windowed layers to override: refused.

use super::windows::{bytes_note, prefill_note, reduce};
use crate::export::capability::{
    Arch, BlockRule, Capability, Engine, Layers, Prefill, Refusal, Source,
};
use crate::export::manifest::file;
use crate::export::target::{About, Context, ExportTarget, Written};
use crate::{Error, Result};

const LLAMACPP: &[Source] = &[
    Source {
        repo: "ggml-org/llama.cpp",
        commit: "a5410f046c01d01330c8a42f13b64a211fedf2c3",
        file: "src/llama-model.cpp: LLM_ARCH_GEMMA3, set_swa_pattern(6), n_swa from \
               gemma3.attention.sliding_window",
    },
    Source {
        repo: "llama-cpp-python",
        commit: "0.3.36 (its vendored llama.cpp)",
        file: "src/llama-kv-cache-iswa.cpp: size_swa = GGML_PAD(min(size_base, n_swa·(unified ? \
               n_seq_max : 1) + n_ubatch), 256), size_base when swa_full; src/llama-context.cpp: \
               n_ctx padded to 256, swa_full true in llama_context_default_params; \
               common/common.h: swa_full = false, n_ubatch = 512",
    },
];

/// The `llamacpp` target.
pub struct LlamaCpp;

impl ExportTarget for LlamaCpp {
    fn about(&self) -> About {
        About {
            name: "llamacpp",
            files: &["override_kv.txt"],
            holds: "--override-kv <arch>.attention.sliding_window=int:W",
            reader: "llama.cpp: --override-kv <arch>.attention.sliding_window=int:W",
        }
    }

    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal> {
        match arch {
            Arch::Gemma3 => Ok(Capability::windows(
                Engine::LlamaCpp,
                arch,
                Layers::NativeWindowOnly,
                Prefill::Windowed,
                BlockRule::LlamaCpp,
                LLAMACPP,
            )),
            a if !a.engines_read() => Err(Refusal::unread(Engine::LlamaCpp, a)),
            _ => Err(Refusal::new(
                Engine::LlamaCpp,
                arch,
                "llama.cpp windows only the layers its architecture code marks sliding (a fixed \
                 pattern per architecture); this one has none, so --override-kv changes no window.",
                "--to trtllm (full layers and one window) or --to vllm.",
                LLAMACPP,
            )),
        }
    }

    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written> {
        let (r, summary) = reduce(cx, cap)?;
        let w = r.window().ok_or_else(|| {
            Error::invalid("layers", "a windowed layer for --override-kv", "none")
        })?;
        let line = format!(
            "--override-kv {}.attention.sliding_window=int:{w}\n",
            cx.plan.model.architecture
        );
        let notes = vec![
            format!(
                "the model's windowed layers at {w} (the global layers full); {}",
                bytes_note(&summary, cx.n)
            ),
            prefill_note(cap),
            format!(
                "serve: llama-server -m MODEL.gguf -c {n} -ub {ub} -np 1 $(cat override_kv.txt) \
                 (the bytes above assume these: a sliding layer holds pad256(min(n_ctx, W + \
                 n_ubatch)) cells, made with the context)",
                n = cx.n,
                ub = summary.serving.n_ubatch
            ),
            "llama-cpp-python and other callers of the library: pass swa_full=False \
             (Llama(..., swa_full=False)); the library's default (llama_context_default_params) \
             is a full-size cache in every layer, which keeps none of these bytes. llama-server \
             and llama-cli default to swa_full off (without --swa-full)"
                .to_string(),
        ];
        Ok(Written {
            files: vec![file("override_kv.txt", line.into_bytes())],
            notes,
            reduction: Some(summary),
            scores: None,
        })
    }
}
