//! Compression as a ratio of the context, as the kvpress leaderboard plots it: a cell asked for
//! a target ratio `r` runs its method at the budget whose **effective** ratio, measured from the
//! bytes the press holds once the compressed part is compressed,
//!
//! `effective = 1 − held bytes / FullKV bytes of the compressed tokens`
//!
//! (sinks, windows, codebooks and everything else the press keeps counted; a sliding-window
//! layer's FullKV at most its window, as the model holds it) is the largest not above `1 − r`
//! of the bytes — the compression at least the target. With equal entry sizes this is kvpress's
//! `1 − kept / (layers × KV heads × context tokens)`. In question-agnostic mode the compressed
//! part is the context alone; the question and answer prefix are appended after and do not
//! count, as on the leaderboard.
//!
//! The budget is found per prompt by [`crate::equal_bytes::retarget`]'s search (regula falsi on
//! measured bytes, starting at ⌊(1 − r)·n⌋ entries per head, [`start_budget`]) over copies of the
//! shared prefill, so the same prompt always gives the same budget. A press that runs its own
//! prefill (PoD) is not searched: it runs at the start budget and its effective ratio is
//! recorded as measured. Each record keeps the target, the effective ratio, the budget and the
//! probes ([`RatioCell`]); tables say how far the effective ratios fall from their targets.

use serde::{Deserialize, Serialize};

/// What a cell asked for a ratio of the context found and measured, kept in its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RatioCell {
    /// The target compression ratio, in (0, 1).
    pub target: f64,
    /// The effective ratio measured after compressing (module header).
    pub effective: f64,
    /// The budget (entries per layer and KV head) the press ran at.
    pub budget: usize,
    /// Budgets whose bytes its search used: measured, or known from the prompt's earlier searches
    /// of the method (`equal_bytes::retarget_known`; records before 2bc467c count a cold search's
    /// measurements). 0: not searched, the start budget.
    pub probes: usize,
}

/// The search's first budget: ⌊(1 − target)·n⌋ entries per head, at least 1.
pub fn start_budget(target: f64, n: usize) -> usize {
    (((1.0 - target) * n as f64).floor() as usize).max(1)
}

/// The held-bytes target of a ratio: ⌊(1 − target)·full⌋.
pub fn target_bytes(target: f64, full_bytes: u64) -> u64 {
    ((1.0 - target) * full_bytes as f64).floor() as u64
}

/// The effective ratio of `held` bytes against `full` (0 when nothing would be held).
pub fn effective(held: u64, full: u64) -> f64 {
    if full == 0 {
        0.0
    } else {
        1.0 - held as f64 / full as f64
    }
}

/// Checks `--ratios`: each strictly between 0 and 1, no two equal to four decimals (the cells'
/// keys).
pub fn validate(ratios: &[f64]) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for &r in ratios {
        if !(r > 0.0 && r < 1.0) {
            return Err(format!(
                "--ratios: {r} is not a compression ratio strictly between 0 and 1"
            ));
        }
        if !seen.insert(key(r)) {
            return Err(format!("--ratios: {r} is given twice"));
        }
    }
    Ok(())
}

/// A ratio in cell keys and labels: ten-thousandths.
pub fn key(r: f64) -> u32 {
    (r * 10_000.0).round() as u32
}

/// `snapkv @ 50%`: a row or cell at a target ratio.
pub fn label(method: &str, target: f64) -> String {
    format!("{method} @ {}%", fmt_pct(target))
}

/// `50`, `12.5`: a ratio in percent, decimals only where needed.
pub fn fmt_pct(r: f64) -> String {
    let p = 100.0 * r;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}", p.round() as i64)
    } else {
        format!("{p:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_and_target_bytes_keep_the_complement_of_the_ratio() {
        // 4,000 context tokens at 0.25: 3,000 entries per head; 1,000 bytes at 0.75: 250.
        assert_eq!(start_budget(0.25, 4000), 3000);
        assert_eq!(start_budget(0.999, 100), 1, "never below one entry");
        assert_eq!(target_bytes(0.75, 1000), 250);
        assert_eq!(target_bytes(0.5, 1001), 500);
        assert!((effective(250, 1000) - 0.75).abs() < 1e-12);
        assert_eq!(effective(0, 0), 0.0);
    }

    #[test]
    fn ratios_must_lie_strictly_inside_zero_and_one_once_each() {
        assert!(validate(&[0.25, 0.5, 0.75]).is_ok());
        assert!(validate(&[0.0]).unwrap_err().contains("strictly between"));
        assert!(validate(&[1.0]).is_err());
        assert!(validate(&[0.5, 0.50001]).unwrap_err().contains("twice"));
    }

    #[test]
    fn labels_read_in_percent() {
        assert_eq!(label("snapkv", 0.5), "snapkv @ 50%");
        assert_eq!(label("snapkv", 0.875), "snapkv @ 87.5%");
        assert_eq!(key(0.25), 2500);
    }
}
