//! Partial results → [`Profile`]: means over kept trials and over samples, and the notes that
//! say how much the figures rest on.

use burn::tensor::backend::Backend;
use kvplan_planner::{
    ChanceTest, HeadScores, LayerFunnel, LayerRedundancy, LayerSimilarity, Profile, ProfileDetails,
    ProfileSettings, Wavelet, CHANCE_ALPHA, PROFILE_SCHEMA_VERSION,
};

use super::{trial_specs, Kind, ProfileInputs, KEEP_ABOVE};
use crate::analysis::chance::{chance_test, R2Answer};
use crate::config::ProfileConfig;
use crate::needles::{NeedleSet, PromptStyle};
use crate::partial::{Partial, SampleOutcome, TrialOutcome};
use crate::Result;

/// Fewer kept trials than this share of those run earns a caution note.
const FEW_TRIALS: f64 = 0.2;

fn head_scores(outcomes: &[TrialOutcome], layers: usize, heads: usize) -> HeadScores {
    let kept: Vec<&TrialOutcome> = outcomes.iter().filter(|o| o.trial.kept).collect();
    let mut scores = vec![vec![0.0; heads]; layers];
    for o in &kept {
        for (acc, row) in scores.iter_mut().zip(&o.scores) {
            acc.iter_mut().zip(row).for_each(|(a, x)| *a += x);
        }
    }
    if !kept.is_empty() {
        let n = kept.len() as f64;
        scores
            .iter_mut()
            .flatten()
            .for_each(|x| *x = (*x / n).clamp(0.0, 1.0));
    }
    HeadScores {
        trials_kept: kept.len(),
        trials_total: outcomes.len(),
        scores,
    }
}

fn trial_note(name: &str, right_when: &str, s: &HeadScores) -> Vec<String> {
    let (k, n) = (s.trials_kept, s.trials_total);
    let mut notes = vec![format!(
        "{name}: the model answered {k} of {n} trials ({right_when}); the head scores are the \
         mean over those {k}"
    )];
    if k == 0 {
        notes.push(format!(
            "{name}: no trial counted, so every {name} score is 0 — the model did not retrieve \
             these needles"
        ));
    } else if (k as f64) < FEW_TRIALS * n as f64 {
        notes.push(format!(
            "{name}: few trials counted ({k} of {n}): treat these scores as weak evidence"
        ));
    }
    notes
}

/// Element-wise mean of equally shaped matrices.
fn mean2(ms: impl Iterator<Item = Vec<Vec<f64>>>) -> Vec<Vec<f64>> {
    let mut acc: Vec<Vec<f64>> = Vec::new();
    let mut n = 0.0;
    for m in ms {
        if acc.is_empty() {
            acc = m;
        } else {
            for (a, r) in acc.iter_mut().zip(&m) {
                a.iter_mut().zip(r).for_each(|(x, y)| *x += y);
            }
        }
        n += 1.0;
    }
    acc.iter_mut().flatten().for_each(|x| *x /= n);
    acc
}

fn similarity(samples: &[SampleOutcome], heads: usize) -> Vec<Vec<Vec<f64>>> {
    (0..heads)
        .map(|h| {
            let m = mean2(samples.iter().map(|s| s.similarity[h].clone()));
            // Exact symmetry and clean bounds, whatever the rounding of the sums.
            let n = m.len();
            (0..n)
                .map(|a| {
                    (0..n)
                        .map(|b| match a.cmp(&b) {
                            std::cmp::Ordering::Equal => 1.0,
                            _ => m[a.min(b)][a.max(b)].clamp(0.0, 1.0),
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Per-layer means over the samples: PyramidKV's funnel (§3) and SpindleKV's redundancy (§3.2).
fn layer_means(s: &[SampleOutcome], layers: usize) -> (Vec<LayerFunnel>, Vec<LayerRedundancy>) {
    let n = s.len() as f64;
    let funnel = (0..layers)
        .map(|l| LayerFunnel {
            entropy: s.iter().map(|x| x.funnel[l].0).sum::<f64>() / n,
            top_k_mass: (s.iter().map(|x| x.funnel[l].1).sum::<f64>() / n).clamp(0.0, 1.0),
        })
        .collect();
    let kv_redundancy = (0..layers)
        .map(|l| LayerRedundancy {
            k_cos_fraction: s.iter().map(|x| x.redundancy[l].0).sum::<f64>() / n,
            v_cos_fraction: s.iter().map(|x| x.redundancy[l].1).sum::<f64>() / n,
            attention_sparsity: s.iter().map(|x| x.redundancy[l].2).sum::<f64>() / n,
        })
        .collect();
    (funnel, kv_redundancy)
}

/// Where the wavelet signal sits in every sample: `(step, edge, dropped)`.
fn wavelet_window(s: &[SampleOutcome]) -> (usize, usize, usize) {
    s.first().map_or((0, 0, 0), |x| {
        (x.wavelet_step, x.wavelet_edge, x.wavelet_dropped)
    })
}

/// The R2 answers against the copying rate: each trial's candidate count and needle from its
/// spec.
pub(super) fn reasoning_chance(c: &ProfileConfig, outcomes: &[TrialOutcome]) -> ChanceTest {
    let specs = trial_specs(c, Kind::Reasoning);
    let trials: Vec<R2Answer> = outcomes
        .iter()
        .map(|o| {
            let spec = specs.get(o.index);
            R2Answer {
                candidates: spec.map_or(2, |s| s.example.candidates),
                // A trial outside the grid (none is) counts as a needle of its own.
                needle: spec.map_or(specs.len() + o.index, |s| s.needle),
                right: o.trial.kept,
            }
        })
        .collect();
    match c.needles {
        NeedleSet::Calibrated { .. } => chance_test(&trials).of_variant("calibrated"),
        NeedleSet::Generated { .. } | NeedleSet::Classic => chance_test(&trials),
    }
}

/// What the notes say of the R2 answers against chance.
fn chance_notes(chance: &ChanceTest) -> Vec<String> {
    let mut notes = vec![chance.summary()];
    if !chance.above_chance {
        let why = if chance.p_value >= CHANCE_ALPHA {
            "(one-sided p ≥ 0.05): a model copying a random candidate statement would be right \
             this often"
        } else {
            "by needle (one-sided p ≥ 0.05 with the needle as the unit): the trials repeat \
             needles, and a model keeping one random candidate statement per needle would be \
             right this often"
        };
        notes.push(format!(
            "retrieval_reasoning: NOT above chance {why}, so the retrieval_reasoning head scores \
             (HeadKV's budgets) rest on answers that are not evidence of reasoning",
        ));
    }
    notes
}

/// The notes a reader of the profile needs: how each figure was measured.
fn notes(
    c: &ProfileConfig,
    s: &[SampleOutcome],
    retrieval: &HeadScores,
    reasoning: &HeadScores,
    chance: &ChanceTest,
) -> Vec<String> {
    let (step, edge, dropped) = wavelet_window(s);
    let style = |p: PromptStyle| match p {
        PromptStyle::Chat => "the model's chat template, one user message",
        PromptStyle::Plain => "plain text after BOS when the tokenizer adds one",
    };
    let mut notes = vec![format!(
        "needles: {}; retrieval prompts: {}; retrieval_reasoning prompts: {}, then \
         \"Based on the content of the book, Question: …\\nAnswer:\", up to {} greedy tokens \
         (a newline ends the answer)",
        c.needles.describe(),
        style(c.prompt_style),
        style(c.reasoning_prompt_style),
        c.reasoning_decode_tokens
    )];
    notes.extend(trial_note(
        "retrieval",
        &format!("ROUGE-1 recall, no stemmer > {KEEP_ABOVE}"),
        retrieval,
    ));
    let check = match c.needles {
        NeedleSet::Calibrated { .. } => String::from(
            "kvplan's calibrated check: the response names the answer's phrase word for word and \
             no other candidate's",
        ),
        NeedleSet::Generated { .. } | NeedleSet::Classic => {
            format!("QA-F1 against the answer statement > {KEEP_ABOVE}")
        }
    };
    notes.extend(trial_note("retrieval_reasoning", &check, reasoning));
    notes.extend(chance_notes(chance));
    let signal = step - dropped;
    let dropped_note = if dropped > 0 {
        format!(
            "; the {dropped} oldest positions were dropped to reach a multiple of 2^{}",
            c.wavelet_levels
        )
    } else {
        String::new()
    };
    notes.push(format!(
        "wavelet: s = a∘V at generation step {step} of {} teacher-forced text samples, {} Haar \
         levels (level 1 finest), magnitudes averaged over positions {edge}..{} of the {signal} \
         analysed{dropped_note}",
        s.len(),
        c.wavelet_levels,
        signal - edge,
    ));
    notes.push(format!(
        "layer_similarity: 1 − Jensen–Shannon divergence (log 2) of the last {} rows of {} text \
         samples of {} tokens",
        c.observation_rows,
        s.len(),
        c.sample_tokens
    ));
    notes.push(format!(
        "kv_redundancy: cosine pairs of pre-RoPE keys (> θ_K = {}) and values (> θ_V = {}) among \
         the first {} tokens of each sample; attention_sparsity = share of context tokens outside \
         the smallest set carrying {} of the accumulated attention of the last {} rows",
        c.theta_k, c.theta_v, c.redundancy_tokens, c.sparsity_mass, c.observation_rows
    ));
    // Last, so that a profile written before the needle-level test reads as this one's notes
    // up to their end (`kvplan_planner::compare`: an addition, not a change).
    if let Some(n) = &chance.by_needle {
        notes.push(format!("retrieval_reasoning by needle: {}", n.summary()));
    }
    notes
}

/// The settings the profile records (method, examples, lengths, seeds, data).
fn settings<B: Backend>(inp: &ProfileInputs<'_, B>) -> ProfileSettings {
    let c = &inp.config;
    let mut sources: Vec<&str> = inp.texts.iter().map(|t| t.source.as_str()).collect();
    sources.dedup();
    ProfileSettings {
        kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
        date: inp.date.clone(),
        seeds: vec![c.seed],
        haystack: format!(
            "needles: {}; text samples: {}",
            inp.haystack.source,
            sources.join(", ")
        ),
        examples: c.trials(),
        context_lengths: c.context_lengths.clone(),
        observation_rows: c.observation_rows,
        funnel_top_k: c.funnel_top_k,
        theta_k: c.theta_k,
        theta_v: c.theta_v,
        retrieval_reasoning_chance: None,
    }
}

/// Builds the profile from every trial and sample.
pub(super) fn build<B: Backend>(inp: &ProfileInputs<'_, B>, p: &Partial) -> Result<Profile> {
    let c = &inp.config;
    let g = &inp.model.config.geometry;
    let retrieval = head_scores(&p.retrieval, g.layers, g.q_heads);
    let reasoning = head_scores(&p.reasoning, g.layers, g.q_heads);
    let s = &p.samples;
    let (funnel, kv_redundancy) = layer_means(s, g.layers);
    let (step, edge, _) = wavelet_window(s);
    let chance = reasoning_chance(c, &p.reasoning);
    let notes = notes(c, s, &retrieval, &reasoning, &chance);
    let profile = Profile {
        schema_version: PROFILE_SCHEMA_VERSION,
        model: inp.identity.clone(),
        settings: ProfileSettings {
            retrieval_reasoning_chance: Some(chance),
            ..settings(inp)
        },
        retrieval,
        retrieval_reasoning: reasoning,
        layer_similarity: LayerSimilarity {
            samples: s.len(),
            per_head: similarity(s, g.q_heads),
        },
        wavelet: Wavelet {
            levels: c.wavelet_levels,
            magnitudes: mean2(s.iter().map(|x| x.wavelet.clone())),
        },
        funnel,
        kv_redundancy,
        details: Some(ProfileDetails {
            notes,
            retrieval_trials: p.retrieval.iter().map(|o| o.trial.clone()).collect(),
            retrieval_reasoning_trials: p.reasoning.iter().map(|o| o.trial.clone()).collect(),
            wavelet_step: step,
            wavelet_edge: edge,
            wavelet_by_position: mean2(s.iter().map(|x| x.wavelet_by_position.clone())),
        }),
    };
    profile.validate()?;
    Ok(profile)
}
