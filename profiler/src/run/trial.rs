//! One needle trial: prefill the prompt, decode greedily as many tokens as the answer has while
//! observing each decode step's attention, score every head on those rows, check the answer.

use burn::tensor::backend::Backend;
use kvplan_planner::Trial;
use kvplan_runtime::generate::argmax as logits_argmax;
use kvplan_runtime::model::Logits;
use kvplan_runtime::observe::{ObserveConfig, Observer};

use super::{Kind, ProfileInputs, TrialSpec};
use crate::analysis::metrics::{qa_f1, rouge1_recall};
use crate::analysis::reasoning::mass_on_span;
use crate::analysis::retrieval::{copies_from_span, denominator};
use crate::needles::placement::{place, Frame, Placed};
use crate::needles::{frame_text, PromptStyle};
use crate::partial::TrialOutcome;
use crate::samples::text_tokens;
use crate::{Error, Result};

/// An answer counts when its score exceeds this (both authors' codes: > 50 on a 0–100 scale).
pub const KEEP_ABOVE: f64 = 0.5;

/// Builds the trial's prompt from the haystack corpus.
fn prompt<B: Backend>(inp: &ProfileInputs<'_, B>, spec: &TrialSpec) -> Result<(Placed, usize)> {
    let tok = inp.tokenizer;
    let ex = &spec.example;
    let needle = tok.encode(&format!(" {}", ex.needle))?;
    let answer = tok.encode(&format!(" {}", ex.answer))?;
    // The chat frame only when the style asks for it: a base model has no chat template.
    let chat = match inp.config.prompt_style {
        PromptStyle::Chat => Some(tok.user_frame()?),
        PromptStyle::Plain => None,
    };
    let render = |m: &str| match &chat {
        Some((pre, post)) => format!("{pre}{m}{post}"),
        None => m.to_string(),
    };
    let (before, after) = frame_text(inp.config.prompt_style, &ex.question, render);
    // A chat template writes BOS itself when the model wants one; a plain prompt starts with it.
    let prefix = match inp.config.prompt_style {
        PromptStyle::Chat => tok.encode(&before)?,
        PromptStyle::Plain => tok.encode_prompt(&before)?,
    };
    let suffix = tok.encode(&after)?;
    let frame = Frame {
        prefix: &prefix,
        suffix: &suffix,
    };
    let hay = text_tokens(tok, inp.haystack, spec.haystack_seed, spec.length, false)?;
    let is_end = |t: u32| tok.decode(&[t]).is_ok_and(|s| s.trim_end().ends_with('.'));
    let placed = place(
        &hay,
        &needle,
        &answer,
        frame,
        spec.length,
        spec.depth / 100.0,
        is_end,
    )
    .ok_or_else(|| {
        Error::Settings(format!(
            "a {}-token prompt has no room for the needle of {}",
            spec.length, ex.id
        ))
    })?;
    Ok((placed, answer.len()))
}

/// Runs one trial.
pub(super) fn run_trial<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    spec: &TrialSpec,
    kind: Kind,
) -> Result<TrialOutcome> {
    let (model, tok) = (inp.model, inp.tokenizer);
    let cfg = &model.config;
    let (placed, budget) = prompt(inp, spec)?;
    let ids = &placed.ids;
    let n = ids.len();
    let span = placed.answer_span.clone();
    // Prefill all but the last prompt token; decoding that token is step 1, as in the authors'
    // code (`q_outputs = model(input_ids[:, :-1])`, then `decode(…, input_ids[:, -1])`).
    let mut cache = model.new_cache();
    model.forward(&ids[..n - 1], &mut cache, None, Logits::Last)?;
    let obs_config = ObserveConfig {
        attn_rows: 1,
        ..ObserveConfig::default()
    };
    let mut obs = Observer::new(obs_config, cfg.geometry.layers);
    let mut scores = vec![vec![0.0; cfg.geometry.q_heads]; cfg.geometry.layers];
    let mut out = Vec::new();
    let mut input = ids[n - 1];
    for _ in 0..budget {
        obs.clear();
        let logits = model.forward(&[input], &mut cache, Some(&mut obs), Logits::Last)?;
        let row: Vec<f32> = logits.into_data().iter::<f32>().collect();
        let next = logits_argmax(&row[row.len() - cfg.vocab..]);
        for (l, layer) in obs.layers.iter().enumerate() {
            let Some(rows) = layer.attention.last() else {
                continue;
            };
            for (h, score) in scores[l].iter_mut().enumerate() {
                let probs = &rows.probs[h][0];
                let keys = &rows.key_positions[cfg.kv_head_of(h)];
                *score += match kind {
                    Kind::Retrieval => {
                        f64::from(u8::from(copies_from_span(probs, keys, &span, ids, next)))
                    }
                    Kind::Reasoning => mass_on_span(probs, keys, &span),
                };
            }
        }
        let stop = tok.stop_ids.contains(&next);
        if !stop {
            out.push(next);
        }
        // The authors also stop at Llama's newline token `<0x0A>`; a byte-level BPE vocabulary
        // has none, so, as their code would with it, we stop only at a stop id or the budget.
        if stop {
            break;
        }
        input = next;
    }
    let denom = denominator(span.len(), budget);
    for s in scores.iter_mut().flatten() {
        *s = (*s / denom).clamp(0.0, 1.0);
    }
    let text = tok.decode(&out)?;
    let response = text.trim().to_string();
    let score = match kind {
        Kind::Retrieval => rouge1_recall(&response, &spec.example.key),
        Kind::Reasoning => qa_f1(&response, &spec.example.key),
    };
    Ok(TrialOutcome {
        index: spec.index,
        trial: Trial {
            example: spec.example.id.clone(),
            context_length: n,
            depth_percent: spec.depth,
            needle_start: placed.needle_start,
            response,
            score,
            kept: score > KEEP_ABOVE,
        },
        scores,
    })
}
