//! The profile: what the profiler measures and the planner reads (`<model>.profile.json`).
//!
//! Every per-head figure is per *query* head (`[layer][q_head]`), as measured; the planner maps
//! onto KV heads where the cache needs it. Loading validates strictly: unknown schema version,
//! missing or extra fields, NaN or negative numbers and shapes the geometry cannot hold are errors
//! naming the JSON path.

use crate::chance::ChanceTest;
use crate::geometry::{Geometry, ModelIdentity};
use crate::{io, validate, Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the profile schema this build reads and writes.
pub const PROFILE_SCHEMA_VERSION: u32 = 2;

/// A model's attention profile.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Always [`PROFILE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The model profiled.
    pub model: ModelIdentity,
    /// How the figures were produced.
    pub settings: ProfileSettings,
    /// Retrieval-head scores (HeadKV eq. 1, Wu et al.'s retrieval heads).
    pub retrieval: HeadScores,
    /// Retrieval-reasoning (R2) head scores (HeadKV eq. 2).
    pub retrieval_reasoning: HeadScores,
    /// Per-head similarity of attention between layers (PoD eq. 2, as 1 − JS).
    pub layer_similarity: LayerSimilarity,
    /// Haar wavelet magnitudes of the a∘V signal (TreeKV §3.3).
    pub wavelet: Wavelet,
    /// Attention funnelling per layer (PyramidKV §3), one entry per layer.
    pub funnel: Vec<LayerFunnel>,
    /// KV redundancy and attention sparsity per layer (SpindleKV §3.2), one entry per layer.
    pub kv_redundancy: Vec<LayerRedundancy>,
    /// What the profiler recorded beyond the figures above (every needle trial, notes, the
    /// wavelet magnitudes by position); absent from hand-made profiles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<ProfileDetails>,
}

/// Records that explain the figures of a measured profile.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileDetails {
    /// Remarks on how far the figures can be trusted (e.g. how few trials the model answered).
    pub notes: Vec<String>,
    /// Every retrieval needle trial, kept or not, in the order run.
    pub retrieval_trials: Vec<Trial>,
    /// Every retrieval-reasoning needle trial, kept or not, in the order run.
    pub retrieval_reasoning_trials: Vec<Trial>,
    /// Generation step t of the wavelet signal s = a(t) ∘ V(t) (TreeKV §3.3).
    pub wavelet_step: usize,
    /// Positions left out at each end of the wavelet signal (the paper: 32).
    pub wavelet_edge: usize,
    /// `[level][i]`: mean magnitude of Rec(D_level+1) at position `wavelet_edge + i`, over
    /// layers, heads and samples (TreeKV Figure 2), each ≥ 0.
    pub wavelet_by_position: Vec<Vec<f64>>,
}

/// One needle trial: the prompt's shape, the model's answer and whether it counted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Trial {
    /// Which example (needle and question).
    pub example: String,
    /// Prompt length in tokens.
    pub context_length: usize,
    /// Requested needle depth, percent of the haystack.
    pub depth_percent: f64,
    /// Token index where the needle starts in the prompt.
    pub needle_start: usize,
    /// The decoded answer.
    pub response: String,
    /// Answer score in [0, 1]: ROUGE-1 recall (retrieval) or QA-F1 (retrieval-reasoning).
    pub score: f64,
    /// Whether the answer was right (score > 0.5), so the trial counted in the head scores.
    pub kept: bool,
}

/// Settings that produced a profile; copied into a plan's provenance.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProfileSettings {
    /// kvplan version that wrote the profile.
    pub kvplan_version: String,
    /// Date of the run, `YYYY-MM-DD`.
    pub date: String,
    /// Random seeds used (needle placement, example sampling).
    pub seeds: Vec<u64>,
    /// Where the haystack text came from.
    pub haystack: String,
    /// Needle examples run per score set.
    pub examples: usize,
    /// Prompt lengths (tokens) the examples used.
    pub context_lengths: Vec<usize>,
    /// Last query rows whose attention was captured (PoD's q, the funnel's window).
    pub observation_rows: usize,
    /// k of the funnel's top-k attention mass.
    pub funnel_top_k: usize,
    /// Cosine threshold θ_K for the key redundancy fraction (SpindleKV Table 3: 0.98).
    pub theta_k: f64,
    /// Cosine threshold θ_V for the value redundancy fraction (SpindleKV Table 3: 0.95).
    pub theta_v: f64,
    /// The retrieval-reasoning answers against the rate of copying a random candidate statement
    /// ([`crate::chance`]); kept with the settings so that every plan's provenance carries it.
    /// Absent from profiles written before the test existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval_reasoning_chance: Option<ChanceTest>,
}

impl ProfileSettings {
    /// Whether the profile's R2 answers beat copying (`None`: the profile records no test).
    pub fn reasoning_above_chance(&self) -> Option<bool> {
        self.retrieval_reasoning_chance
            .as_ref()
            .map(|c| c.above_chance)
    }
}

/// Per-head scores from needle tests, with how many trials counted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeadScores {
    /// Trials kept (the model's answer was right, so the trial counted).
    pub trials_kept: usize,
    /// Trials run.
    pub trials_total: usize,
    /// Mean score over kept trials, `[layer][q_head]`, each in [0, 1].
    pub scores: Vec<Vec<f64>>,
}

/// Per-head layer similarity: `per_head[q_head][layer_a][layer_b]` = 1 − JS divergence (log
/// base 2, so in [0, 1]) averaged over the last `observation_rows` rows of `samples` prompts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LayerSimilarity {
    /// Prompts averaged over.
    pub samples: usize,
    /// `[q_head][layer][layer]`, symmetric, each in [0, 1].
    pub per_head: Vec<Vec<Vec<f64>>>,
}

/// Mean Haar wavelet detail magnitude per layer and level.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Wavelet {
    /// Decomposition levels.
    pub levels: usize,
    /// `[layer][level]`, each ≥ 0.
    pub magnitudes: Vec<Vec<f64>>,
}

/// Attention funnelling of one layer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LayerFunnel {
    /// Mean entropy (bits) of the observed attention rows.
    pub entropy: f64,
    /// Mean attention mass on the top-k keys, in [0, 1].
    pub top_k_mass: f64,
}

/// KV redundancy of one layer (SpindleKV §3.2).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LayerRedundancy {
    /// Fraction of key pairs with cosine similarity above θ_K, in [0, 1].
    pub k_cos_fraction: f64,
    /// Fraction of value pairs with cosine similarity above θ_V, in [0, 1].
    pub v_cos_fraction: f64,
    /// Attention sparsity: fraction of tokens whose accumulated attention is negligible, in [0, 1].
    pub attention_sparsity: f64,
}

impl HeadScores {
    /// Checks the trial counts and the `[layer][q_head]` scores of the set at `path`.
    pub(crate) fn validate(&self, path: &str, g: &Geometry) -> Result<()> {
        validate_head_scores(path, self.trials_kept, self.trials_total, &self.scores, g)
    }
}

/// Checks a set of head scores at `path` (a profile's, or a HeadKV section's copy of them):
/// no more trials kept than run, and one score in [0, 1] per layer and query head.
pub(crate) fn validate_head_scores(
    path: &str,
    trials_kept: usize,
    trials_total: usize,
    scores: &[Vec<f64>],
    g: &Geometry,
) -> Result<()> {
    if trials_kept > trials_total {
        return Err(Error::invalid(
            format!("{path}.trials_kept"),
            format!("at most trials_total = {trials_total}"),
            trials_kept,
        ));
    }
    validate::matrix(
        &format!("{path}.scores"),
        scores,
        (g.layers, "one per layer"),
        (g.q_heads, "one per query head"),
        0.0,
        1.0,
    )
}

impl LayerFunnel {
    /// Checks one layer's funnel figures at `path`: entropy ≥ 0, top-k mass in [0, 1].
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        validate::non_negative(&format!("{path}.entropy"), self.entropy)?;
        validate::in_range(&format!("{path}.top_k_mass"), self.top_k_mass, 0.0, 1.0)
    }
}

impl LayerRedundancy {
    /// Checks one layer's redundancy fractions at `path`: each in [0, 1].
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        for (name, v) in [
            ("k_cos_fraction", self.k_cos_fraction),
            ("v_cos_fraction", self.v_cos_fraction),
            ("attention_sparsity", self.attention_sparsity),
        ] {
            validate::in_range(&format!("{path}.{name}"), v, 0.0, 1.0)?;
        }
        Ok(())
    }
}

/// Tolerance for the symmetry of similarity matrices.
const SYMMETRY_TOLERANCE: f64 = 1e-6;

impl Profile {
    /// Parses and validates a profile from JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        validate::schema_version("profile", text, PROFILE_SCHEMA_VERSION)?;
        let p: Profile = validate::parse("profile", text)?;
        p.validate()?;
        Ok(p)
    }

    /// Reads, parses and validates a profile file.
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_json(&io::read(path)?)
    }

    /// Pretty JSON with a final newline.
    pub fn to_json(&self) -> Result<String> {
        io::to_json(self, "profile")
    }

    /// Validates then writes atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        io::write_atomic(path, &self.to_json()?)
    }

    /// Checks every figure against the schema and the geometry.
    pub fn validate(&self) -> Result<()> {
        validate::current_schema(self.schema_version, PROFILE_SCHEMA_VERSION)?;
        self.model.validate("model")?;
        let g = &self.model.geometry;
        let s = &self.settings;
        validate::in_range("settings.theta_k", s.theta_k, 0.0, 1.0)?;
        validate::in_range("settings.theta_v", s.theta_v, 0.0, 1.0)?;
        for (name, scores) in [
            ("retrieval", &self.retrieval),
            ("retrieval_reasoning", &self.retrieval_reasoning),
        ] {
            scores.validate(name, g)?;
        }
        self.validate_chance()?;
        self.validate_similarity()?;
        self.validate_details()?;
        let w = &self.wavelet;
        validate::matrix(
            "wavelet.magnitudes",
            &w.magnitudes,
            (g.layers, "one per layer"),
            (w.levels, "one per level"),
            0.0,
            f64::MAX,
        )?;
        validate::per_layer("funnel", &self.funnel, g, LayerFunnel::validate)?;
        validate::per_layer(
            "kv_redundancy",
            &self.kv_redundancy,
            g,
            LayerRedundancy::validate,
        )
    }

    /// The chance test, when recorded, counts the retrieval-reasoning trials and kept ones.
    fn validate_chance(&self) -> Result<()> {
        let Some(c) = &self.settings.retrieval_reasoning_chance else {
            return Ok(());
        };
        let at = "settings.retrieval_reasoning_chance";
        c.validate(at)?;
        let r = &self.retrieval_reasoning;
        if (c.trials, c.correct) != (r.trials_total, r.trials_kept) {
            return Err(Error::invalid(
                at,
                format!(
                    "{} right of {} trials (retrieval_reasoning)",
                    r.trials_kept, r.trials_total
                ),
                format!("{} of {}", c.correct, c.trials),
            ));
        }
        Ok(())
    }

    fn validate_details(&self) -> Result<()> {
        let Some(d) = &self.details else {
            return Ok(());
        };
        for (name, scores, trials) in [
            ("retrieval", &self.retrieval, &d.retrieval_trials),
            (
                "retrieval_reasoning",
                &self.retrieval_reasoning,
                &d.retrieval_reasoning_trials,
            ),
        ] {
            let path = format!("details.{name}_trials");
            validate::len(
                &path,
                trials.len(),
                scores.trials_total,
                "trials_total trials",
            )?;
            let kept = trials.iter().filter(|t| t.kept).count();
            if kept != scores.trials_kept {
                return Err(Error::invalid(
                    format!("{path}[].kept"),
                    format!("{} kept trials ({name}.trials_kept)", scores.trials_kept),
                    kept,
                ));
            }
            for (i, t) in trials.iter().enumerate() {
                validate::in_range(&format!("{path}[{i}].score"), t.score, 0.0, 1.0)?;
                validate::in_range(
                    &format!("{path}[{i}].depth_percent"),
                    t.depth_percent,
                    0.0,
                    100.0,
                )?;
            }
        }
        if !d.wavelet_by_position.is_empty() {
            let width = d.wavelet_by_position[0].len();
            validate::matrix(
                "details.wavelet_by_position",
                &d.wavelet_by_position,
                (self.wavelet.levels, "one per level"),
                (width, "one per position"),
                0.0,
                f64::MAX,
            )?;
        }
        Ok(())
    }

    fn validate_similarity(&self) -> Result<()> {
        let g = &self.model.geometry;
        let sim = &self.layer_similarity.per_head;
        validate::len(
            "layer_similarity.per_head",
            sim.len(),
            g.q_heads,
            "one per query head",
        )?;
        for (h, m) in sim.iter().enumerate() {
            let p = format!("layer_similarity.per_head[{h}]");
            validate::matrix(
                &p,
                m,
                (g.layers, "one per layer"),
                (g.layers, "one per layer"),
                0.0,
                1.0,
            )?;
            for (a, row) in m.iter().enumerate() {
                for (b, &v) in row.iter().enumerate().take(a) {
                    if (v - m[b][a]).abs() > SYMMETRY_TOLERANCE {
                        return Err(Error::invalid(
                            format!("{p}[{a}][{b}]"),
                            format!("{} (symmetric with [{b}][{a}])", m[b][a]),
                            v,
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
