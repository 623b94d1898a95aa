//! Evaluation results: the file `kvplan eval` writes and `kvplan plot` reads
//! (`results/<model>.results.json`). The schema belongs to the evaluation, which produces it;
//! the plots crate reads it from here. One model per file; every list may be empty.
//!
//! ```json
//! {
//!   "schema_version": 3,
//!   "model": "SmolLM2-135M-Instruct",
//!   "niah": [
//!     {"method": "snapkv", "budget": 128, "context_len": 2048, "depth": 0.25, "score": 0.8,
//!      "n": 5, "interval": {"low": 0.376, "high": 0.964, "method": "wilson"}}
//!   ],
//!   "quality": [
//!     {"task": "niah", "method": "snapkv", "budget": 128, "kv_fraction": 0.0625, "score": 0.9,
//!      "n": 50, "interval": {"low": 0.786, "high": 0.957, "method": "wilson"},
//!      "vs_full": {"n": 50, "mean": -0.1, "low": -0.2, "high": -0.02, "p_value": 0.0625,
//!                  "test": "mcnemar-exact", "p_holm": 0.5, "detectable": 0.18, "clusters": 50}}
//!   ],
//!   "perplexity": [
//!     {"method": "full", "budget": null, "positions": [512, 1024], "perplexity": [9.1, 8.7],
//!      "low": [8.6, 8.3], "high": [9.7, 9.1]}
//!   ]
//! }
//! ```
//!
//! - `method` uses the method table's names (`full`, `snapkv`, …, listed in docs/methods.md;
//!   other tools' methods under their own names, e.g. `kvpress-snapkv`); `budget` is the
//!   `--budget N` target (entries per layer and KV head, observation window included), `null` for
//!   `full`.
//! - `niah`: one cell per (method, budget, context_len, depth); `depth` is where the needle
//!   sits, as a fraction of the context in [0, 1]; `score` in [0, 1] (mean over trials).
//! - `quality`: one point per (task, method, budget); `kv_fraction` = the method's KV bytes over
//!   the real FullKV bytes of the same prompts (docs/design.md "Equal KV size"), in (0, 1]: from
//!   version 3 each prompt's peak over the generation (after the prompt and after every decode
//!   step) where its records carry it, else the share right after the prompt; `score` is the
//!   task's own metric, higher is better.
//! - `n` and `interval` (version 2): the prompts behind a score and its 95% interval, `method`
//!   `wilson` (Wilson score interval of a pass rate of independent prompts), `bootstrap`
//!   (percentile bootstrap of a mean) or `cluster-bootstrap` (version 3: resampling the
//!   clusters of prompts that share a needle or an article; `crate::stats`); `clusters`
//!   (version 3) how many clusters the `n` prompts form.
//! - `vs_snapkv`, `vs_full` (version 2): the paired difference of the score against `snapkv` at
//!   the same budget and against `full`, over the `n` prompts both scored: `mean` with its 95%
//!   bootstrap interval `[low, high]` and `p_value` (version 2: exact McNemar, pass rates only);
//!   version 3 adds `test` (`mcnemar-exact` or `cluster-sign`), `p_holm` (Holm's adjustment over
//!   every comparison of the task's table), `detectable` (the smallest difference the sample
//!   could have detected, 80% power, two-sided 5%) and `clusters`. Version 4: `low` and `high`
//!   absent, like a score's `interval`, where there is no interval — a task whose prompts form
//!   one cluster (one example, one needle), which the stratified bootstrap cannot resample.
//! - `perplexity`: one curve per (method, budget); `perplexity[i]` is the perplexity of the
//!   tokens up to `positions[i]` (strictly increasing), each ≥ 1; `low` and `high` (version 2,
//!   optional) its 95% block-bootstrap interval at each position.
//!
//! Version 1 and 2 files are still read: every field added since is optional. A file of
//! a later version is refused. Other top-level fields (settings, dates, timings) are allowed and
//! ignored here; fields inside the entries are checked strictly, so a misspelt one is an error.
//!
//! A run puts its task's entries into the file and keeps the other tasks' ([`merge_results`],
//! [`merge_perplexity`]).

mod merge;

pub use merge::{merge_perplexity, merge_results};

use crate::stats::{holm, Estimate, Method, Paired, Test};
use crate::{io_err, write_atomic, Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Display;
use std::path::Path;

/// Version of the results schema this build writes; it also reads every earlier one.
pub const RESULTS_SCHEMA_VERSION: u32 = 4;

/// A results file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EvalResults {
    /// Always [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Model name, as in its profile and plan (`SmolLM2-135M-Instruct`).
    pub model: String,
    #[serde(default)]
    pub niah: Vec<NiahCell>,
    #[serde(default)]
    pub quality: Vec<QualityPoint>,
    #[serde(default)]
    pub perplexity: Vec<PerplexityCurve>,
}

/// One needle-in-a-haystack cell.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NiahCell {
    pub method: String,
    /// Entries per (layer, KV head); `None` (JSON null) for `full`.
    pub budget: Option<usize>,
    /// Prompt length in tokens.
    pub context_len: usize,
    /// Needle position as a fraction of the context, in [0, 1].
    pub depth: f64,
    /// Mean score over trials, in [0, 1].
    pub score: f64,
    /// Trials behind the score (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    /// 95% interval of the score (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<ScoreInterval>,
}

/// One point of a quality-vs-KV-size curve.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QualityPoint {
    /// Task name (`niah`, a LongBench task, …); one panel per task.
    pub task: String,
    pub method: String,
    pub budget: Option<usize>,
    /// Target compression ratio of the context, for a point of a ratio run (`--ratios`; its
    /// `budget` is then absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// KV bytes over FullKV bytes, in (0, 1].
    pub kv_fraction: f64,
    /// The task's metric, higher is better.
    pub score: f64,
    /// Prompts behind the score (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    /// Clusters the prompts form (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<usize>,
    /// 95% interval of the score (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<ScoreInterval>,
    /// Paired difference against `snapkv` at the same budget (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_snapkv: Option<PairedDelta>,
    /// Paired difference against `full` (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_full: Option<PairedDelta>,
}

/// A score's 95% interval and how it was made.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScoreInterval {
    pub low: f64,
    pub high: f64,
    /// `wilson` (a pass rate) or `bootstrap` (a mean).
    pub method: IntervalMethod,
}

/// How an interval was made.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IntervalMethod {
    /// Wilson score interval of a pass rate.
    Wilson,
    /// Percentile bootstrap of a mean.
    Bootstrap,
    /// Percentile bootstrap resampling clusters of prompts (version 3).
    #[serde(rename = "cluster-bootstrap")]
    ClusterBootstrap,
}

impl ScoreInterval {
    /// `e`'s interval, `None` where it has none.
    pub fn of(e: &Estimate) -> Option<Self> {
        let method = match e.method {
            Method::Wilson => IntervalMethod::Wilson,
            Method::Bootstrap => IntervalMethod::Bootstrap,
            Method::ClusterBootstrap => IntervalMethod::ClusterBootstrap,
        };
        e.interval.map(|i| Self {
            low: i.lo,
            high: i.hi,
            method,
        })
    }
}

/// A paired difference (this row's score minus the reference's) over the prompts both scored.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PairedDelta {
    /// Prompt pairs.
    pub n: usize,
    /// Mean difference.
    pub mean: f64,
    /// 95% bootstrap interval of the mean difference; both absent where there is none (version
    /// 4; `crate::stats::resamplable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    /// p-value of no difference (version 2: exact McNemar, pass rates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// How `p_value` was made (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<PairedTest>,
    /// `p_value` after Holm's correction over the task's table (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_holm: Option<f64>,
    /// The smallest difference the sample could have detected (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detectable: Option<f64>,
    /// Clusters the pairs form (version 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<usize>,
}

impl From<&Paired> for PairedDelta {
    fn from(p: &Paired) -> Self {
        Self {
            n: p.n,
            mean: p.mean,
            low: p.interval.map(|i| i.lo),
            high: p.interval.map(|i| i.hi),
            p_value: p.p_value,
            test: Some(match p.test {
                Test::McNemar => PairedTest::McNemarExact,
                Test::ClusterSign => PairedTest::ClusterSign,
            }),
            p_holm: None,
            detectable: p.detectable,
            clusters: Some(p.clusters),
        }
    }
}

/// How a paired difference's p-value was made.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairedTest {
    /// The exact McNemar test (0/1 scores of independent prompts).
    #[serde(rename = "mcnemar-exact")]
    McNemarExact,
    /// The cluster sign test (`crate::stats::cluster`).
    #[serde(rename = "cluster-sign")]
    ClusterSign,
}

/// Fills every paired difference's `p_holm`: Holm's adjustment ([`holm`]) over all the
/// p-values of `points` (one table's comparisons, one family).
pub fn adjust_holm(points: &mut [QualityPoint]) {
    let mut deltas: Vec<&mut PairedDelta> = points
        .iter_mut()
        .flat_map(|q| [q.vs_snapkv.as_mut(), q.vs_full.as_mut()])
        .flatten()
        .filter(|d| d.p_value.is_some())
        .collect();
    let p: Vec<f64> = deltas.iter().map(|d| d.p_value.unwrap_or(1.0)).collect();
    for (d, adjusted) in deltas.iter_mut().zip(holm(&p)) {
        d.p_holm = Some(adjusted);
    }
}

/// [`adjust_holm`] within each task's points: one family per task (a table, or a column of one).
pub fn adjust_holm_by_task(points: &mut [QualityPoint]) {
    let mut tasks: Vec<String> = points.iter().map(|q| q.task.clone()).collect();
    tasks.dedup();
    tasks.sort();
    tasks.dedup();
    for t in tasks {
        let mut family: Vec<QualityPoint> =
            points.iter().filter(|q| q.task == t).cloned().collect();
        adjust_holm(&mut family);
        let mut adjusted = family.into_iter();
        for q in points.iter_mut().filter(|q| q.task == t) {
            if let Some(a) = adjusted.next() {
                *q = a;
            }
        }
    }
}

/// Perplexity by position for one method and budget.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PerplexityCurve {
    pub method: String,
    pub budget: Option<usize>,
    /// Token positions, strictly increasing.
    pub positions: Vec<usize>,
    /// Perplexity of the tokens up to each position, each ≥ 1.
    pub perplexity: Vec<f64>,
    /// Lower end of the 95% interval at each position (version 2; empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub low: Vec<f64>,
    /// Upper end of the 95% interval at each position (version 2; empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub high: Vec<f64>,
}

/// `method` alone for `full`, else `method @ budget` (table rows, progress, legends and titles).
pub fn label(method: &str, budget: Option<usize>) -> String {
    match budget {
        Some(b) => format!("{method} @ {b}"),
        None => method.to_string(),
    }
}

fn in_range(path: String, v: f64, lo: f64, hi: f64, lo_open: bool) -> Result<()> {
    let ok = v.is_finite() && (if lo_open { v > lo } else { v >= lo }) && v <= hi;
    if ok {
        Ok(())
    } else {
        let open = if lo_open { "(" } else { "[" };
        Err(invalid(path, format!("a number in {open}{lo}, {hi}]"), v))
    }
}

impl EvalResults {
    /// Parses and validates results from JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        let r: EvalResults = serde_json::from_str(text).map_err(|e| Error::Results {
            at: format!("line {} column {}", e.line(), e.column()),
            message: e.to_string(),
        })?;
        r.validate()?;
        Ok(r)
    }

    /// Reads, parses and validates a results file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(io_err(path))?;
        Self::from_json(&text)
    }

    /// Pretty JSON with a final newline.
    pub fn to_json(&self) -> Result<String> {
        kvplan_common::fs::pretty_json(self).map_err(|e| Error::Results {
            at: String::from("."),
            message: e.to_string(),
        })
    }

    /// Validates, then writes atomically (creating the folder).
    pub fn save(&self, path: &Path) -> Result<()> {
        self.validate()?;
        write_atomic(path, &self.to_json()?)
    }

    /// Checks version, ranges and curve lengths; errors name the JSON path.
    pub fn validate(&self) -> Result<()> {
        if !(1..=RESULTS_SCHEMA_VERSION).contains(&self.schema_version) {
            return Err(invalid(
                "schema_version",
                format!("1 to {RESULTS_SCHEMA_VERSION} (a later kvplan wrote this file)"),
                self.schema_version,
            ));
        }
        for (i, c) in self.niah.iter().enumerate() {
            in_range(format!("niah[{i}].depth"), c.depth, 0.0, 1.0, false)?;
            in_range(format!("niah[{i}].score"), c.score, 0.0, 1.0, false)?;
            if c.context_len == 0 {
                return Err(invalid(format!("niah[{i}].context_len"), "at least 1", 0));
            }
            validate_interval(&format!("niah[{i}].interval"), c.interval.as_ref())?;
        }
        for (i, q) in self.quality.iter().enumerate() {
            validate_point(i, q)?;
        }
        for (i, c) in self.perplexity.iter().enumerate() {
            validate_curve(i, c)?;
        }
        Ok(())
    }
}

fn validate_point(i: usize, q: &QualityPoint) -> Result<()> {
    let p = format!("quality[{i}]");
    in_range(format!("{p}.kv_fraction"), q.kv_fraction, 0.0, 1.0, true)?;
    if let Some(r) = q.ratio {
        in_range(format!("{p}.ratio"), r, 0.0, 1.0, true)?;
    }
    in_range(format!("{p}.score"), q.score, f64::MIN, f64::MAX, false)?;
    validate_interval(&format!("{p}.interval"), q.interval.as_ref())?;
    for (name, d) in [("vs_snapkv", &q.vs_snapkv), ("vs_full", &q.vs_full)] {
        if let Some(d) = d {
            let at = format!("{p}.{name}");
            let half = |field: &str, other: &str| {
                invalid(
                    format!("{at}.{field}"),
                    format!("a number, as {other} is given"),
                    "nothing",
                )
            };
            match (d.low, d.high) {
                (Some(low), Some(high)) => ordered(&at, low, high)?,
                (None, None) => {}
                (None, Some(_)) => return Err(half("low", "high")),
                (Some(_), None) => return Err(half("high", "low")),
            }
            if d.n == 0 {
                return Err(invalid(format!("{at}.n"), "at least 1", 0));
            }
            for (field, p) in [("p_value", d.p_value), ("p_holm", d.p_holm)] {
                if let Some(v) = p {
                    in_range(format!("{at}.{field}"), v, 0.0, 1.0, false)?;
                }
            }
        }
    }
    Ok(())
}

/// `low ≤ high`, both finite.
fn ordered(at: &str, low: f64, high: f64) -> Result<()> {
    in_range(format!("{at}.low"), low, f64::MIN, f64::MAX, false)?;
    if high.is_finite() && high >= low {
        Ok(())
    } else {
        Err(invalid(
            format!("{at}.high"),
            format!("a number ≥ low ({low})"),
            high,
        ))
    }
}

fn validate_interval(at: &str, i: Option<&ScoreInterval>) -> Result<()> {
    i.map_or(Ok(()), |i| ordered(at, i.low, i.high))
}

/// An [`Error::Invalid`] at JSON path `path`: expected this, found that.
fn invalid(path: impl Into<String>, expected: impl Display, found: impl Display) -> Error {
    Error::Invalid {
        path: path.into(),
        message: format!("expected {expected}, found {found}"),
    }
}

fn validate_curve(i: usize, c: &PerplexityCurve) -> Result<()> {
    let p = format!("perplexity[{i}]");
    if c.positions.len() != c.perplexity.len() || c.positions.is_empty() {
        return Err(invalid(
            format!("{p}.perplexity"),
            format!("one value per position ({})", c.positions.len()),
            format!("{} values", c.perplexity.len()),
        ));
    }
    for (j, w) in c.positions.windows(2).enumerate() {
        if w[1] <= w[0] {
            return Err(invalid(
                format!("{p}.positions[{}]", j + 1),
                format!("more than {}", w[0]),
                w[1],
            ));
        }
    }
    for (j, &v) in c.perplexity.iter().enumerate() {
        in_range(format!("{p}.perplexity[{j}]"), v, 1.0, f64::MAX, false)?;
    }
    validate_bounds(&p, c)
}

/// The curve's interval: none, or one `[low, high]` per position.
fn validate_bounds(p: &str, c: &PerplexityCurve) -> Result<()> {
    if c.low.is_empty() && c.high.is_empty() {
        return Ok(());
    }
    for (name, v) in [("low", &c.low), ("high", &c.high)] {
        if v.len() != c.positions.len() {
            return Err(invalid(
                format!("{p}.{name}"),
                format!("one value per position ({})", c.positions.len()),
                format!("{} values", v.len()),
            ));
        }
    }
    for (j, (&lo, &hi)) in c.low.iter().zip(&c.high).enumerate() {
        ordered(&format!("{p}[{j}]"), lo, hi)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"{
      "schema_version": 3,
      "model": "SmolLM2-135M-Instruct",
      "settings": {"trials": 10},
      "niah": [
        {"method": "snapkv", "budget": 128, "context_len": 2048, "depth": 0.25, "score": 1.0},
        {"method": "full", "budget": null, "context_len": 2048, "depth": 0.25, "score": 0.8,
         "n": 5, "interval": {"low": 0.376, "high": 0.964, "method": "wilson"}}
      ],
      "quality": [
        {"task": "niah", "method": "snapkv", "budget": 128, "kv_fraction": 0.0625, "score": 0.9,
         "n": 50, "interval": {"low": 0.786, "high": 0.957, "method": "wilson"},
         "vs_full": {"n": 50, "mean": -0.1, "low": -0.2, "high": -0.02, "p_value": 0.0625,
                     "test": "mcnemar-exact", "p_holm": 0.5, "detectable": 0.18, "clusters": 50}}
      ],
      "perplexity": [
        {"method": "full", "budget": null, "positions": [512, 1024], "perplexity": [9.1, 8.7],
         "low": [8.6, 8.3], "high": [9.7, 9.1]}
      ]
    }"#;

    fn err(text: &str) -> String {
        EvalResults::from_json(text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn documented_example_parses_and_round_trips() {
        let r = EvalResults::from_json(EXAMPLE).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.niah.len(), 2);
        assert_eq!(r.niah[1].budget, None);
        assert_eq!(r.quality[0].kv_fraction, 0.0625);
        let i = r.niah[1].interval.expect("interval");
        assert_eq!((i.low, i.method), (0.376, IntervalMethod::Wilson));
        assert_eq!(r.quality[0].vs_full.and_then(|d| d.p_value), Some(0.0625));
        assert_eq!(r.perplexity[0].high, [9.7, 9.1]);
        let again = r
            .to_json()
            .and_then(|t| EvalResults::from_json(&t))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again, r);
    }

    #[test]
    fn version_1_files_without_intervals_are_read() {
        let v1 = r#"{"schema_version": 1, "model": "m",
          "niah": [{"method": "full", "budget": null, "context_len": 512, "depth": 0.5, "score": 1.0}],
          "quality": [{"task": "niah", "method": "full", "budget": null, "kv_fraction": 1.0, "score": 1.0}],
          "perplexity": [{"method": "full", "budget": null, "positions": [8], "perplexity": [3.0]}]}"#;
        let r = EvalResults::from_json(v1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.niah[0].interval, r.quality[0].vs_full), (None, None));
        assert!(r.perplexity[0].low.is_empty());
    }

    #[test]
    fn lists_may_be_missing() {
        let r = EvalResults::from_json(r#"{"schema_version": 1, "model": "m"}"#);
        assert!(r.is_ok_and(|r| r.niah.is_empty() && r.perplexity.is_empty()));
    }

    #[test]
    fn rejections_name_the_path() {
        let bad_depth = EXAMPLE.replace(
            r#""depth": 0.25, "score": 1.0},"#,
            r#""depth": 1.5, "score": 1.0},"#,
        );
        assert_eq!(
            err(&bad_depth),
            "niah[0].depth: expected a number in [0, 1], found 1.5"
        );
        let short = EXAMPLE.replace("[9.1, 8.7]", "[9.1]");
        assert_eq!(
            err(&short),
            "perplexity[0].perplexity: expected one value per position (2), found 1 values"
        );
        let unsorted = EXAMPLE.replace("[512, 1024]", "[1024, 512]");
        assert_eq!(
            err(&unsorted),
            "perplexity[0].positions[1]: expected more than 1024, found 512"
        );
        let zero_kv = EXAMPLE.replace("0.0625", "0.0");
        assert!(err(&zero_kv).starts_with("quality[0].kv_fraction: expected a number in (0, 1]"));
        let typo = EXAMPLE.replace(r#""task": "niah""#, r#""tsk": "niah""#);
        assert!(err(&typo).contains("unknown field `tsk`"));
        let version = EXAMPLE.replace(r#""schema_version": 3"#, r#""schema_version": 5"#);
        assert_eq!(
            err(&version),
            "schema_version: expected 1 to 4 (a later kvplan wrote this file), found 5"
        );
        let upside_down = EXAMPLE.replace(
            r#""low": -0.2, "high": -0.02"#,
            r#""low": -0.02, "high": -0.2"#,
        );
        assert_eq!(
            err(&upside_down),
            "quality[0].vs_full.high: expected a number ≥ low (-0.02), found -0.2"
        );
        let half = EXAMPLE.replace(r#""low": -0.2, "high": -0.02, "#, r#""high": -0.02, "#);
        assert_eq!(
            err(&half),
            "quality[0].vs_full.low: expected a number, as high is given, found nothing"
        );
        let none = EXAMPLE.replace(r#""low": -0.2, "high": -0.02, "#, "");
        assert!(EvalResults::from_json(&none).is_ok_and(|r| r.quality[0]
            .vs_full
            .is_some_and(|d| (d.low, d.high, d.n) == (None, None, 50))));
        let short_bounds = EXAMPLE.replace("[8.6, 8.3]", "[8.6]");
        assert_eq!(
            err(&short_bounds),
            "perplexity[0].low: expected one value per position (2), found 1 values"
        );
    }

    #[test]
    fn labels_name_the_budget_unless_full() {
        assert_eq!(label("snapkv", Some(128)), "snapkv @ 128");
        assert_eq!(label("full", None), "full");
    }
}
