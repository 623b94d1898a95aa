//! Profile → plan: fills the sections of the methods asked for, with the papers' defaults.
//! Pure: the same profile, methods, target and options always give the same plan (and bytes).
//!
//! The measurements a section carries only for readers and figures — PyramidKV's funnel
//! (`pyramidkv.md` §3), SpindleKV's redundancy (`spindlekv.md` §3.2), TreeKV's wavelet magnitudes
//! (`treekv.md` §3.3) — are written with [`EVIDENCE_DIGITS`] significant digits. They come from
//! float sums over thousands of attention rows, whose last digits move with the summation order
//! of a rebuilt runtime (seen: ~1e-9 relative); rounded, that noise rarely reaches the plan's
//! bytes (a value at a rounding boundary, or a count crossing a threshold, still can). Inputs of
//! the budget rules (head scores, layer similarities through PoD's blocks) are kept as measured.

use crate::alloc::pod;
use crate::budgets::Target;
use crate::plan::{Plan, Provenance, PLAN_SCHEMA_VERSION};
use crate::profile::{LayerFunnel, LayerRedundancy, Profile};
use crate::sections::*;
use crate::{Method, Result};

/// Significant digits of the measurements a plan carries for readers (see the module header).
pub const EVIDENCE_DIGITS: usize = 6;

/// `x` to [`EVIDENCE_DIGITS`] significant digits: the decimal rounding of its exact value, read
/// back as the nearest `f64`, so it prints as at most that many digits.
pub fn evidence(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{:.*e}", EVIDENCE_DIGITS - 1, x)
        .parse()
        .unwrap_or(x)
}

/// Options of [`build_plan`]; `Default` gives the papers' settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanOptions {
    /// kvplan version recorded in the provenance.
    pub kvplan_version: String,
    /// Date recorded in the provenance, `YYYY-MM-DD` (an input, so output is reproducible).
    pub date: String,
    /// Context length of the preview; `None` writes no preview.
    pub preview_context_len: Option<usize>,
    /// Observation window α of every SnapKV-style method (equal for all, DESIGN.md).
    pub window: usize,
    /// PyramidKV β.
    pub pyramid_beta: f64,
    /// HeadKV β and temperature.
    pub headkv_beta: f64,
    /// See `headkv_beta`.
    pub headkv_temperature: f64,
    /// SpindleKV β (α follows as (1 + β)/2).
    pub spindle_beta: f64,
    /// SpindleKV shallow/deep split: codebook only below this layer (`None`: every layer).
    pub spindle_split: Option<usize>,
    /// PoD δ; ignored when `pod_target_saving` is set.
    pub pod_delta: f64,
    /// Choose δ for this saving instead.
    pub pod_target_saving: Option<f64>,
    /// PoD τ.
    pub pod_tau: f64,
    /// TreeKV prefill block size b.
    pub treekv_block_size: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            kvplan_version: String::from(env!("CARGO_PKG_VERSION")),
            date: String::from("1970-01-01"),
            preview_context_len: None,
            window: DEFAULT_WINDOW,
            pyramid_beta: DEFAULT_PYRAMID_BETA,
            headkv_beta: DEFAULT_HEADKV_BETA,
            headkv_temperature: 1.0,
            spindle_beta: DEFAULT_SPINDLE_BETA,
            spindle_split: None,
            pod_delta: DEFAULT_POD_DELTA,
            pod_target_saving: None,
            pod_tau: DEFAULT_POD_TAU,
            treekv_block_size: DEFAULT_WINDOW,
        }
    }
}

/// Builds and validates a plan holding a section for each of `methods`.
pub fn build_plan(
    profile: &Profile,
    methods: &[Method],
    target: Target,
    opts: &PlanOptions,
) -> Result<Plan> {
    profile.validate()?;
    let mut sections = Sections::default();
    for &m in methods {
        add_section(&mut sections, profile, m, opts)?;
    }
    let mut plan = Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        model: profile.model.clone(),
        provenance: Provenance {
            kvplan_version: opts.kvplan_version.clone(),
            date: opts.date.clone(),
            profile: profile.settings.clone(),
        },
        target,
        sections,
        preview: None,
    };
    plan.validate()?;
    if let Some(n) = opts.preview_context_len {
        plan.preview = Some(plan.make_preview(n));
    }
    Ok(plan)
}

fn add_section(s: &mut Sections, p: &Profile, m: Method, o: &PlanOptions) -> Result<()> {
    let snap = SnapKvSection {
        window: o.window,
        kernel_size: DEFAULT_KERNEL,
        pooling: Pooling::Maxpool,
    };
    match m {
        Method::SnapKv => s.snapkv = Some(snap),
        Method::H2o => {
            s.h2o = Some(H2oSection {
                heavy_fraction: 0.5,
            })
        }
        Method::Streaming => {
            s.streaming = Some(StreamingSection {
                sinks: DEFAULT_SINKS,
            })
        }
        Method::Pyramid => {
            s.pyramid = Some(PyramidSection {
                window: o.window,
                beta: o.pyramid_beta,
                kernel_size: snap.kernel_size,
                pooling: snap.pooling,
                funnel: p
                    .funnel
                    .iter()
                    .map(|f| LayerFunnel {
                        entropy: evidence(f.entropy),
                        top_k_mass: evidence(f.top_k_mass),
                    })
                    .collect(),
            })
        }
        Method::HeadKv | Method::HeadKvR => {
            let (source, scores) = if m == Method::HeadKv {
                (ScoreSource::RetrievalReasoning, &p.retrieval_reasoning)
            } else {
                (ScoreSource::Retrieval, &p.retrieval)
            };
            let section = HeadKvSection {
                source,
                window: o.window,
                beta: o.headkv_beta,
                temperature: o.headkv_temperature,
                kernel_size: snap.kernel_size,
                pooling: snap.pooling,
                trials_kept: scores.trials_kept,
                trials_total: scores.trials_total,
                scores: scores.scores.clone(),
            };
            if m == Method::HeadKv {
                s.headkv = Some(section);
            } else {
                s.headkv_r = Some(section);
            }
        }
        Method::Spindle => {
            s.spindle = Some(SpindleSection {
                window: o.window,
                beta: o.spindle_beta,
                alpha: (1.0 + o.spindle_beta) / 2.0,
                theta_k: p.settings.theta_k,
                theta_v: p.settings.theta_v,
                split: o.spindle_split,
                redundancy: p
                    .kv_redundancy
                    .iter()
                    .map(|r| LayerRedundancy {
                        k_cos_fraction: evidence(r.k_cos_fraction),
                        v_cos_fraction: evidence(r.v_cos_fraction),
                        attention_sparsity: evidence(r.attention_sparsity),
                    })
                    .collect(),
            })
        }
        Method::Pod => {
            let g = &p.model.geometry;
            let sims = &p.layer_similarity.per_head;
            let delta = match o.pod_target_saving {
                Some(t) => pod::choose_delta(sims, g, t)?,
                None => o.pod_delta,
            };
            let blocks = pod::blocks(sims, delta);
            s.pod = Some(PodSection {
                delta,
                target_saving: o.pod_target_saving,
                saving: pod::saving(&blocks, g),
                sinks: DEFAULT_POD_SINKS,
                tau: o.pod_tau,
                blocks,
            })
        }
        Method::TreeKv => {
            s.treekv = Some(TreeKvSection {
                sinks: DEFAULT_SINKS,
                selected_fraction: 0.5,
                block_size: o.treekv_block_size,
                wavelet: p
                    .wavelet
                    .magnitudes
                    .iter()
                    .map(|row| row.iter().map(|&m| evidence(m)).collect())
                    .collect(),
            })
        }
    }
    Ok(())
}
