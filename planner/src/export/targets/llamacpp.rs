//! `llamacpp`: llama.cpp's `--override-kv <arch>.attention.sliding_window=int:W`, the window of
//! the layers the architecture code marks sliding (Gemma 3: all but every 6th). The global
//! layers stay full and every layer keeps its RoPE; the local window is the one that keeps the
//! plan's bytes beside full global layers ([`crate::export::classes::native_only`]). Other
//! architectures are refused by the capability table.

use super::{bytes_note, file, prefill_note, reduce, Context, Writer, Written};
use crate::export::capability::{Capability, Engine};
use crate::{Error, Result};

/// The `llamacpp` target.
pub struct LlamaCpp;

impl Writer for LlamaCpp {
    fn engine(&self) -> Engine {
        Engine::LlamaCpp
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
            "serve: llama-server -m MODEL.gguf $(cat override_kv.txt)".to_string(),
        ];
        Ok(Written {
            files: vec![file("override_kv.txt", line.into_bytes())],
            notes,
            reduction: Some(summary),
            scores: None,
        })
    }
}
