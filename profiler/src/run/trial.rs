//! One needle trial: prefill the prompt, decode greedily while observing each decode step's
//! attention, score every head on those rows, check the answer.
//!
//! - Retrieval (Wu et al.): the prompt in `prompt_style`; as many decode steps as the answer
//!   statement has tokens; ROUGE-1 recall of the key.
//! - Retrieval-reasoning, as FYYFU/HeadKV `Important_Head/retrieval_head_detection_r2.py` (commit
//!   0862a0955fe82e9ff611d59541918e02c5def625) does it: the haystack, then "Based on the content of
//!   the book, Question: {q}\nAnswer:" as a raw completion (`reasoning_prompt_style`, plain unless
//!   the model cannot follow plain text); up to `reasoning_decode_tokens` = 50 greedy steps (its
//!   `self.decode(q_outputs, input_ids[:, -1], 50)`); a newline ends the answer (its `<0x0A>`
//!   stop); kept when QA-F1 against the whole answer statement exceeds 0.5 (its
//!   `qa_f1_score(response, self.answer) * 100 > 50`).
//!
//!   Two deliberate differences. (1) Its loop also breaks once `len(output) >= len(answer_tokens)`
//!   (line 255), so it decodes at most as many tokens as the statement has; a small model that
//!   restates the question first is then cut before it answers (42 of 50 SmolLM2 R2 responses in
//!   the earlier profile), so we decode the full 50. (2) A newline before any answer text is
//!   skipped rather than ending the answer ("Answer:\n Mary's …").
//!
//!   Head scores over those steps follow its `retrieval_calculate`: at every decode step, the
//!   attention weights of the head's top-N keys (N = the statement's span) that lie in the span,
//!   each divided by N, summed over the steps — the step that emits the stop token included, as
//!   its loop scores before it breaks. Its sum runs over at most N steps, so it stays ≤ 1; ours
//!   divides by max(N, steps decoded), which is its 1/N whenever the answer takes ≤ N steps and
//!   the mean per step otherwise, so a trial still gives at most 1.

use burn::tensor::backend::Backend;
use kvplan_planner::Trial;
use kvplan_runtime::generate::argmax as logits_argmax;
use kvplan_runtime::model::Logits;
use kvplan_runtime::observe::{ObserveConfig, Observer};
use kvplan_runtime::tokenizer::Tokenizer;

use super::{Kind, ProfileInputs, TrialSpec};
use crate::analysis::metrics::{names_only, qa_f1, rouge1_recall};
use crate::analysis::reasoning::mass_on_span;
use crate::analysis::retrieval::{copies_from_span, denominator};
use crate::config::longest_prompt;
use crate::needles::placement::{place, Frame, Placed};
use crate::needles::{frame_text, Check, PromptStyle};
use crate::partial::TrialOutcome;
use crate::samples::text_tokens;
use crate::{Error, Result};

/// An answer counts when its score exceeds this (both authors' codes: > 50 on a 0–100 scale).
pub const KEEP_ABOVE: f64 = 0.5;

/// The token ids before and after the haystack of a needle prompt asking `question` in
/// `style`: plain — BOS when the tokenizer adds one, then after the haystack
/// "\nBased on the content of the book, Question: {question}\nAnswer:" and nothing more (a raw
/// completion); chat — one user message in the model's template, the generation prompt last.
pub fn frame_ids(
    tok: &Tokenizer,
    style: PromptStyle,
    question: &str,
) -> Result<(Vec<u32>, Vec<u32>)> {
    // The chat frame only when the style asks for it: a base model has no chat template.
    let chat = match style {
        PromptStyle::Chat => Some(tok.user_frame()?),
        PromptStyle::Plain => None,
    };
    let render = |m: &str| match &chat {
        Some((pre, post)) => format!("{pre}{m}{post}"),
        None => m.to_string(),
    };
    let (before, after) = frame_text(style, question, render);
    // A chat template writes BOS itself when the model wants one; a plain prompt starts with it.
    let prefix = match style {
        PromptStyle::Chat => tok.encode(&before)?,
        PromptStyle::Plain => tok.encode_prompt(&before)?,
    };
    Ok((prefix, tok.encode(&after)?))
}

/// A trial's prompt without its haystack, in one style: the needle, its answer statement and
/// the frame around the haystack.
struct Parts {
    needle: Vec<u32>,
    answer: Vec<u32>,
    prefix: Vec<u32>,
    suffix: Vec<u32>,
}

impl Parts {
    fn of<B: Backend>(
        inp: &ProfileInputs<'_, B>,
        spec: &TrialSpec,
        style: PromptStyle,
    ) -> Result<Self> {
        let tok = inp.tokenizer;
        let ex = &spec.example;
        let (prefix, suffix) = frame_ids(tok, style, &ex.question)?;
        Ok(Parts {
            needle: tok.encode(&format!(" {}", ex.needle))?,
            answer: tok.encode(&format!(" {}", ex.answer))?,
            prefix,
            suffix,
        })
    }

    /// Whether `length` tokens leave room for some haystack beside them (`place`'s own test).
    fn fit(&self, length: usize) -> bool {
        length > self.prefix.len() + self.needle.len() + self.suffix.len()
    }
}

/// The error of a prompt length with no room for the trial's needle.
fn no_room(spec: &TrialSpec) -> Error {
    Error::Settings(format!(
        "a {}-token prompt has no room for the needle of {}: give longer --lengths",
        spec.length, spec.example.id
    ))
}

/// Builds the trial's prompt from the haystack corpus around its `parts`.
fn prompt<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    spec: &TrialSpec,
    parts: &Parts,
) -> Result<Placed> {
    let tok = inp.tokenizer;
    let frame = Frame {
        prefix: &parts.prefix,
        suffix: &parts.suffix,
    };
    let hay = text_tokens(tok, inp.haystack, spec.haystack_seed, spec.length, false)?;
    let is_end = |t: u32| tok.decode(&[t]).is_ok_and(|s| s.trim_end().ends_with('.'));
    place(
        &hay,
        &parts.needle,
        &parts.answer,
        frame,
        spec.length,
        spec.depth / 100.0,
        is_end,
    )
    .ok_or_else(|| no_room(spec))
}

/// What one kind of trial does: its decode budget and answer stop.
struct Protocol {
    budget: usize,
    /// Whether a newline after some answer text ends the answer (the R2 code's `<0x0A>` stop).
    newline_stops: bool,
}

impl Protocol {
    /// The protocol of `spec`'s trial and its prompt's parts in the kind's prompt style: a
    /// retrieval trial decodes as many tokens as its answer statement has (the parts' own
    /// tokens of it), a retrieval-reasoning trial the configured count.
    fn for_trial<B: Backend>(
        inp: &ProfileInputs<'_, B>,
        spec: &TrialSpec,
        kind: Kind,
    ) -> Result<(Self, Parts)> {
        let c = &inp.config;
        let style = match kind {
            Kind::Retrieval => c.prompt_style,
            Kind::Reasoning => c.reasoning_prompt_style,
        };
        let parts = Parts::of(inp, spec, style)?;
        let proto = match kind {
            Kind::Retrieval => Protocol {
                budget: parts.answer.len(),
                newline_stops: false,
            },
            Kind::Reasoning => Protocol {
                budget: c.reasoning_decode_tokens,
                newline_stops: true,
            },
        };
        Ok((proto, parts))
    }
}

/// The greedy answer and the heads' summed scores over its decode steps.
struct Decoded {
    out: Vec<u32>,
    scores: Vec<Vec<f64>>,
    steps: usize,
}

/// Decodes greedily from the prompt (the last prompt token is step 1, as in the authors' code:
/// `q_outputs = model(input_ids[:, :-1])`, then `decode(…, input_ids[:, -1])`), adding each
/// step's head scores of `kind`.
fn decode<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    placed: &Placed,
    kind: Kind,
    proto: &Protocol,
) -> Result<Decoded> {
    let (model, tok) = (inp.model, inp.tokenizer);
    let cfg = &model.config;
    let (ids, span) = (&placed.ids, &placed.answer_span);
    let n = ids.len();
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
    let mut steps = 0;
    while steps < proto.budget {
        obs.clear();
        let logits = model.forward(&[input], &mut cache, Some(&mut obs), Logits::Last)?;
        let row: Vec<f32> = logits.into_data().iter::<f32>().collect();
        let next = logits_argmax(&row[row.len() - cfg.vocab..]);
        steps += 1;
        for (l, layer) in obs.layers.iter().enumerate() {
            let Some(rows) = layer.attention.last() else {
                continue;
            };
            for (h, score) in scores[l].iter_mut().enumerate() {
                let probs = &rows.probs[h][0];
                let keys = &rows.key_positions[cfg.kv_head_of(h)];
                *score += match kind {
                    Kind::Retrieval => {
                        f64::from(u8::from(copies_from_span(probs, keys, span, ids, next)))
                    }
                    Kind::Reasoning => mass_on_span(probs, keys, span) / span.len().max(1) as f64,
                };
            }
        }
        // The authors also stop at Llama's newline token `<0x0A>`. For R2 we stop at any token
        // that writes a newline once the answer has begun; the retrieval trials, whose budget
        // is the answer's length, stop only at a stop id or the budget.
        if tok.stop_ids.contains(&next) {
            break;
        }
        let newline = proto.newline_stops
            && tok.decode(&[next])?.contains('\n')
            && !tok.decode(&out)?.trim().is_empty();
        out.push(next);
        if newline {
            break;
        }
        input = next;
    }
    Ok(Decoded { out, scores, steps })
}

/// Divides the summed head scores into a trial's scores in [0, 1]: retrieval by max(N, budget)
/// (each step adds 0 or 1); retrieval-reasoning, whose steps already carry the authors' 1/N, by
/// max(1, steps / N) — i.e. the sum over steps divided by max(N, steps), times N.
fn normalise(d: &mut Decoded, kind: Kind, span_len: usize, budget: usize) {
    let denom = match kind {
        Kind::Retrieval => denominator(span_len, budget),
        Kind::Reasoning => denominator(span_len, d.steps) / span_len.max(1) as f64,
    };
    for s in d.scores.iter_mut().flatten() {
        *s = (*s / denom).clamp(0.0, 1.0);
    }
}

/// Checks before any model call that every trial of `kind` can decode its whole budget inside
/// the model's context (a trial that cannot fails only after its prefill — minutes at 32K) and
/// that its length leaves room for its needle and frame (tokenizing those, not the haystack), so
/// that a length too short for a needle stops the run before the first trial, not after others.
pub(super) fn check_room<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    specs: &[TrialSpec],
    kind: Kind,
) -> Result<()> {
    let context = inp.model.config.context_len;
    for spec in specs {
        let (proto, parts) = Protocol::for_trial(inp, spec, kind)?;
        let budget = proto.budget;
        let most = longest_prompt(context, budget);
        if spec.length > most {
            return Err(Error::Settings(format!(
                "needle length {} leaves no room to decode: a {} trial ({}) decodes up to \
                 {budget} tokens after its prompt, past the model's context of {context}; \
                 give lengths of at most {most}",
                spec.length,
                kind.stage().trim_end_matches(" needles"),
                spec.example.id
            )));
        }
        if !parts.fit(spec.length) {
            return Err(no_room(spec));
        }
    }
    Ok(())
}

/// Runs one trial.
pub(super) fn run_trial<B: Backend>(
    inp: &ProfileInputs<'_, B>,
    spec: &TrialSpec,
    kind: Kind,
) -> Result<TrialOutcome> {
    let tok = inp.tokenizer;
    let (proto, parts) = Protocol::for_trial(inp, spec, kind)?;
    let placed = prompt(inp, spec, &parts)?;
    let mut decoded = decode(inp, &placed, kind, &proto)?;
    normalise(&mut decoded, kind, placed.answer_span.len(), proto.budget);
    let response = tok.decode(&decoded.out)?.trim().to_string();
    let score = match kind {
        Kind::Retrieval => rouge1_recall(&response, &spec.example.key),
        Kind::Reasoning => match &spec.example.check {
            Check::Statement => qa_f1(&response, &spec.example.answer),
            Check::OnlyKey(others) => {
                f64::from(u8::from(names_only(&response, &spec.example.key, others)))
            }
        },
    };
    Ok(TrialOutcome {
        index: spec.index,
        trial: Trial {
            example: spec.example.id.clone(),
            context_length: placed.ids.len(),
            depth_percent: spec.depth,
            needle_start: placed.needle_start,
            response,
            score,
            kept: score > KEEP_ABOVE,
        },
        scores: decoded.scores,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::longest_prompt;

    #[test]
    fn the_longest_prompt_leaves_the_decode_budget_inside_the_context() {
        // Context 100, 50 steps: a 51-token prompt puts step 1 (its last token) at position 50
        // and step 50 at 99, the last position there is; one token more puts step 50 at 100.
        assert_eq!(longest_prompt(100, 50), 51);
        let last_step = |length: usize, budget: usize| length - 2 + budget;
        assert_eq!(last_step(51, 50), 99);
        // One step decodes from the prompt's own last token: the whole context is usable.
        assert_eq!(longest_prompt(32_768, 1), 32_768);
        // The run that found this: a 32,768-token retrieval prompt with a multi-token answer.
        assert!(longest_prompt(32_768, 4) < 32_768);
        assert_eq!(
            longest_prompt(10, 0),
            10,
            "a zero budget counts as the one step"
        );
        assert_eq!(longest_prompt(10, 50), 0);
    }
}
