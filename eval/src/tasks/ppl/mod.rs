//! Streaming perplexity (TreeKV §5.2, the setting of its Figure 4): a long text streams through
//! the model one token at a time under a method that evicts while decoding; each token's
//! negative log-likelihood is read from the logits of the step before it.
//!
//! This module holds the task's record ([`PplRecord`], one per streamed text, method and budget)
//! and the arithmetic: per-token NLL from logits, the cumulative perplexity
//! curve `exp(mean NLL of tokens 1..=p)` at chosen positions, and its 95% interval: a
//! non-overlapping block bootstrap (Carlstein 1986; Künsch 1989) of the mean NLL — each text's
//! first p losses cut into blocks of [`BLOCK`] tokens, so the dependence between neighbouring
//! tokens stays within a block, the blocks of every text resampled together
//! ([`crate::stats::bootstrap_ratio`], seeded), the ends exponentiated. With few texts it
//! measures how the loss varies along the texts, not between kinds of text.
//!
//! Its table is [`report`]'s; the run over the model (the stream itself) is `task`'s
//! (feature `model`).

pub mod report;
#[cfg(feature = "model")]
pub mod task;

use crate::records::{CellKey, CellRecord, RecordsFile};
use crate::results::PerplexityCurve;
use crate::stats::{bootstrap_ratio, LEVEL, RESAMPLES, SEED};

/// Tokens per block of the perplexity bootstrap: 8 blocks in 256 tokens of one text.
pub const BLOCK: usize = 32;

/// `−log softmax(logits)[target]`, computed stably (log-sum-exp around the maximum).
pub fn nll(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = logits.iter().map(|&x| (x as f64 - max).exp()).sum();
    let logit = logits
        .get(target as usize)
        .copied()
        .unwrap_or(f32::NEG_INFINITY) as f64;
    max + sum.ln() - logit
}

/// Positions `every, 2·every, …` up to `n` (with `n` itself last when not a multiple).
pub fn checkpoints(n: usize, every: usize) -> Vec<usize> {
    let every = every.max(1);
    let mut out: Vec<usize> = (1..=n / every).map(|k| k * every).collect();
    if out.last() != Some(&n) && n > 0 {
        out.push(n);
    }
    out
}

/// Perplexity of the first `p` scored tokens, for each `p` of `positions` (each ≤ `nlls.len()`).
pub fn curve(nlls: &[f64], positions: &[usize]) -> Vec<f64> {
    positions
        .iter()
        .map(|&p| {
            let p = p.min(nlls.len()).max(1);
            (nlls[..p].iter().sum::<f64>() / p as f64).exp().max(1.0)
        })
        .collect()
}

/// The 95% interval of the perplexity of the first `p` tokens of every text in `runs`, for
/// each `p` of `positions` (each ≤ every run's length): `(low, high)`.
pub fn curve_bounds(runs: &[&[f64]], positions: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let mut low = Vec::with_capacity(positions.len());
    let mut high = Vec::with_capacity(positions.len());
    for &p in positions {
        let blocks: Vec<(f64, f64)> = runs
            .iter()
            .flat_map(|r| r[..p.min(r.len())].chunks(BLOCK))
            .map(|c| (c.iter().sum::<f64>(), c.len() as f64))
            .collect();
        let i = bootstrap_ratio(&blocks, RESAMPLES, SEED, LEVEL);
        let (lo, hi) = i.map_or((f64::NAN, f64::NAN), |i| (i.lo, i.hi));
        low.push(lo.exp().max(1.0));
        high.push(hi.exp().max(1.0));
    }
    (low, high)
}

/// The NLLs of one streamed text under one method and budget.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PplRecord {
    /// Model name.
    pub model: String,
    /// The text's file name.
    pub text: String,
    /// Method (registry name).
    pub method: String,
    /// `--budget` target; `None` for `full`.
    pub budget: Option<usize>,
    /// Tokens streamed (the first is only read; `nll` has one fewer entries).
    pub tokens: usize,
    /// NLL of tokens 2..=tokens, each from the step before.
    pub nll: Vec<f64>,
    /// KV bytes held at the end over FullKV's at the same token count.
    pub kv_fraction: f64,
    /// Seconds of the stream.
    pub seconds: f64,
}

impl CellRecord for PplRecord {
    const COMPACT: bool = true;

    fn key(&self) -> CellKey {
        CellKey::stream(&self.text, self.tokens, &self.method, self.budget)
    }

    fn progress_line(&self, what: &str) -> String {
        format!(
            "{what} {} {:?}: {:.1}s",
            self.method, self.budget, self.seconds
        )
    }
}

/// A perplexity records file: settings and one record per (text, length, method, budget).
pub type PplRecords = RecordsFile<PplRecord>;

/// One curve per (method, budget): the perplexity over all texts' tokens up to each checkpoint
/// (NLLs averaged over the texts position by position, then accumulated), with its
/// block-bootstrap interval.
pub fn curves(records: &[&PplRecord], every: usize) -> Vec<PerplexityCurve> {
    let mut keys: Vec<(String, Option<usize>)> = Vec::new();
    for r in records {
        let k = (r.method.clone(), r.budget);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(method, budget)| {
            let runs: Vec<&&PplRecord> = records
                .iter()
                .filter(|r| r.method == method && r.budget == budget)
                .collect();
            let n = runs.iter().map(|r| r.nll.len()).min()?;
            if n == 0 {
                return None;
            }
            let mean: Vec<f64> = (0..n)
                .map(|i| runs.iter().map(|r| r.nll[i]).sum::<f64>() / runs.len() as f64)
                .collect();
            let positions = checkpoints(n, every);
            let perplexity = curve(&mean, &positions);
            let texts: Vec<&[f64]> = runs.iter().map(|r| &r.nll[..n]).collect();
            let (low, high) = curve_bounds(&texts, &positions);
            Some(PerplexityCurve {
                method,
                budget,
                positions,
                perplexity,
                low,
                high,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nll_of_uniform_logits_is_log_vocab() {
        assert!((nll(&[0.0; 4], 2) - 4f64.ln()).abs() < 1e-12);
        // Shifting every logit changes nothing.
        assert!((nll(&[1000.0; 4], 0) - 4f64.ln()).abs() < 1e-9);
    }

    #[test]
    fn nll_on_hand_worked_logits() {
        // logits [ln 1, ln 3]: p = [1/4, 3/4].
        let l = [0.0f32, 3f32.ln()];
        assert!((nll(&l, 1) - (4.0f64 / 3.0).ln()).abs() < 1e-6);
        assert!((nll(&l, 0) - 4f64.ln()).abs() < 1e-6);
    }

    #[test]
    fn curve_is_the_exp_of_the_running_mean() {
        let nlls = [2f64.ln(), 8f64.ln(), 1f64.ln(), 1f64.ln()];
        // Means: (ln 2 + ln 8)/2 = ln 4; all four: ln 16 / 4 = ln 2.
        let c = curve(&nlls, &[2, 4]);
        assert!((c[0] - 4.0).abs() < 1e-12 && (c[1] - 2.0).abs() < 1e-12);
        assert_eq!(checkpoints(10, 4), vec![4, 8, 10]);
        assert_eq!(checkpoints(8, 4), vec![4, 8]);
        assert!(checkpoints(0, 4).is_empty());
    }

    #[test]
    fn curves_average_texts_position_by_position() {
        let rec = |text: &str, nll: Vec<f64>| PplRecord {
            model: "m".into(),
            text: text.into(),
            method: "streaming".into(),
            budget: Some(64),
            tokens: nll.len() + 1,
            nll,
            kv_fraction: 0.5,
            seconds: 0.0,
        };
        let a = rec("a", vec![0.0, 2.0 * 2f64.ln()]);
        let b = rec("b", vec![2.0 * 2f64.ln(), 0.0, 9.0]);
        let c = curves(&[&a, &b], 1);
        assert_eq!(c.len(), 1);
        // Means per position: [ln 2, ln 2]; the third position is cut to the shorter text.
        assert_eq!(c[0].positions, vec![1, 2]);
        assert!((c[0].perplexity[0] - 2.0).abs() < 1e-12);
        assert!((c[0].perplexity[1] - 2.0).abs() < 1e-12);
        // At 2 each text's two losses are one block of mean ln 2: the interval is [2, 2].
        assert!((c[0].low[1] - 2.0).abs() < 1e-12 && (c[0].high[1] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn bounds_of_a_constant_loss_are_its_perplexity() {
        let flat = vec![3f64.ln(); 100];
        let (lo, hi) = curve_bounds(&[&flat, &flat], &[50, 100]);
        for v in lo.iter().chain(&hi) {
            assert!((v - 3.0).abs() < 1e-9, "{lo:?} {hi:?}");
        }
    }

    #[test]
    fn bounds_widen_with_the_spread_of_the_loss() {
        // Blocks of mean NLL 1 and 3 in turn (sd 1), 64 of them: e^(2 ± 1.96/8) = e^[1.755, 2.245].
        let nll: Vec<f64> = (0..64 * BLOCK)
            .map(|i| {
                if (i / BLOCK).is_multiple_of(2) {
                    1.0
                } else {
                    3.0
                }
            })
            .collect();
        let (lo, hi) = curve_bounds(&[&nll], &[nll.len()]);
        assert!(
            (lo[0].ln() - 1.75).abs() < 0.08 && (hi[0].ln() - 2.25).abs() < 0.08,
            "{lo:?} {hi:?}"
        );
    }
}
