//! Generation: run the model on a prompt under a KV method and hand the continuation out as it
//! grows.
//!
//! The method is a press from the registry (`full`: none), configured from the plan (the one
//! given, else the model's, [`crate::model::plan_for_methods`]) at the prompt's length, under the
//! plan's target or the request's re-target. What comes back is the run's counts, times and
//! memory: the KV bytes held, the bytes the real FullKV cache of the model's KV heads would hold,
//! and after prefill the plan's own figure. The stop token itself is never handed out.

use std::path::PathBuf;

use kvplan_planner::Target;
use kvplan_runtime::backend::Selected;
use kvplan_runtime::generate::{GenerateConfig, Sampling};
use kvplan_runtime::press::from_plan::PressRequest;
use kvplan_runtime::press::options::PressOptions;
use kvplan_runtime::press::registry::build_press_with;
use kvplan_runtime::press::{generate_pressed, MemoryReport};
use kvplan_runtime::tokenizer::Tokenizer;

use crate::methods::methods_or_all;
use crate::model::{load_model, plan_for_methods, ModelSource};

/// What to generate, and under which method.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    /// The prompt.
    pub prompt: String,
    /// Wrap the prompt as a user message in the model's chat template.
    pub chat: bool,
    /// Most new tokens.
    pub max_new_tokens: usize,
    /// Greedy or seeded top-p.
    pub sampling: Sampling,
    /// KV-cache method (a press registry name).
    pub method: String,
    /// The plan file; `None`: the model's plan.
    pub plan: Option<PathBuf>,
    /// Re-target of the plan; `None`: its own target.
    pub target: Option<Target>,
    /// The press switches beyond the plan.
    pub press: PressOptions,
    /// The model.
    pub model: ModelSource,
    /// Weights from `kvplan train-pod` applied over the GGUF's.
    pub weights: Option<PathBuf>,
}

/// What a generation did.
#[derive(Debug)]
pub struct Generated {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// New tokens (the stop token included when one came).
    pub new_tokens: usize,
    /// Seconds of the prefill.
    pub prefill_secs: f64,
    /// Seconds of the decode steps.
    pub decode_secs: f64,
    /// Decode steps run.
    pub decode_steps: usize,
    /// Memory right after the prompt was compressed.
    pub after_prefill: MemoryReport,
    /// Memory after the last step.
    pub at_end: MemoryReport,
    /// The KV bytes the plan's budgets give at the prompt's length (methods with budgets).
    pub planned_bytes: Option<u64>,
    /// The first error of the text sink; nothing more was handed to it after it.
    pub sink_error: Option<std::io::Error>,
}

impl Generated {
    /// Decode speed in tokens per second (0 when nothing was decoded).
    pub fn tokens_per_s(&self) -> f64 {
        if self.decode_secs > 0.0 {
            self.decode_steps as f64 / self.decode_secs
        } else {
            0.0
        }
    }
}

/// Generates as `req` asks, handing each new piece of text to `sink` as soon as it is whole
/// UTF-8.
pub fn generate(
    req: &GenerateRequest,
    sink: &mut dyn FnMut(&str) -> std::io::Result<()>,
) -> anyhow::Result<Generated> {
    let method = methods_or_all(Some(std::slice::from_ref(&req.method)))?;
    let path = req.model.resolve()?;
    let (tok, model) = load_model(&path, req.weights.as_deref())?;
    let prompt = if req.chat {
        tok.encode_chat(&req.prompt)?
    } else {
        tok.encode_prompt(&req.prompt)?
    };
    let plan = plan_for_methods(&method, req.plan.as_deref(), &path, &model)?;
    let request = PressRequest {
        plan: plan.as_ref(),
        context_len: prompt.len(),
        target: req.target,
        options: req.press,
    };
    let mut spec = build_press_with::<Selected>(method[0], &request, &model.config)?;
    let config = GenerateConfig {
        max_new_tokens: req.max_new_tokens,
        sampling: req.sampling,
        stop_ids: tok.stop_ids.clone(),
    };
    let mut out = StreamedText::default();
    let run = generate_pressed(&model, &prompt, &config, spec.press.as_mut(), |id| {
        if !config.stop_ids.contains(&id) {
            out.push(&tok, id, sink);
        }
    })?;
    let head_dim = model.config.geometry.head_dim;
    Ok(Generated {
        prompt_tokens: prompt.len(),
        new_tokens: run.ids.len(),
        prefill_secs: run.prefill_secs,
        decode_secs: run.decode_secs,
        decode_steps: run.decode_steps,
        after_prefill: run.after_prefill,
        at_end: run.at_end,
        planned_bytes: spec.budgets.as_ref().map(|b| b.kv_bytes(head_dim, 4)),
        sink_error: out.write_err,
    })
}

/// The continuation, handed out as it grows.
#[derive(Default)]
struct StreamedText {
    ids: Vec<u32>,
    shown: String,
    /// The first sink error; nothing more is handed out after it.
    write_err: Option<std::io::Error>,
}

impl StreamedText {
    /// Adds `id`, decodes everything so far and hands out what is new, holding back an
    /// incomplete UTF-8 sequence (shown as U+FFFD) until the next token completes it.
    fn push(
        &mut self,
        tok: &Tokenizer,
        id: u32,
        sink: &mut dyn FnMut(&str) -> std::io::Result<()>,
    ) {
        if self.write_err.is_some() {
            return;
        }
        self.ids.push(id);
        let Ok(text) = tok.decode(&self.ids) else {
            return;
        };
        if let Some(new) = new_text(&self.shown, &text) {
            if let Err(e) = sink(new) {
                self.write_err = Some(e);
            }
            self.shown = text;
        }
    }
}

/// What `text` adds to `shown`, or nothing while it ends in an incomplete sequence (U+FFFD) or
/// does not extend it.
fn new_text<'a>(shown: &str, text: &'a str) -> Option<&'a str> {
    if text.ends_with('\u{FFFD}') || text.len() <= shown.len() || !text.starts_with(shown) {
        return None;
    }
    Some(&text[shown.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_text_past_what_was_shown_is_handed_out() {
        assert_eq!(new_text("Hel", "Hello"), Some("lo"));
        assert_eq!(new_text("", "a"), Some("a"));
    }

    #[test]
    fn an_incomplete_sequence_or_a_rewrite_is_held_back() {
        assert_eq!(new_text("Hel", "Hel\u{FFFD}"), None);
        assert_eq!(new_text("Hello", "Hello"), None);
        assert_eq!(new_text("Hello", "Help me"), None);
    }
}
