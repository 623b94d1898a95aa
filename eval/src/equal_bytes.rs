//! SpindleKV at equal memory: its codebooks hold fewer bytes than a plain selection at the same
//! budget (and its GQA repeat can hold more), so a row of the results compares it with the others
//! only once its budget is re-targeted until its held bytes match what SnapKV holds at the row's
//! budget on the same prompt. Both are *measured* on copies of the shared prefill (the press
//! applied, [`kvplan_runtime::press::Session::memory`]), never predicted.
//!
//! The search ([`retarget`]) finds the largest budget (from the smallest the plan accepts for
//! the prompt up to its length) whose bytes do not exceed the target,
//! assuming bytes grow with the budget: a bracket `[lo, hi]` with `bytes(lo) ≤ target <
//! bytes(hi)` shrinks by regula falsi with the Illinois rule (the end kept twice in a row has its
//! weight halved), the guess always strictly inside, until `hi = lo + 1`. Every step depends only
//! on the measured bytes, so the same prompt gives the same budget.

use serde::{Deserialize, Serialize};

/// How a SpindleKV cell's budget is chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpindleBytes {
    /// Re-targeted until its bytes match SnapKV's at the row's budget (module header).
    #[default]
    Equal,
    /// The row's budget as given (its bytes are whatever its codebooks hold).
    Budget,
}

impl SpindleBytes {
    /// The names the command line and the settings use.
    pub const NAMES: [&'static str; 2] = ["equal", "budget"];

    /// This mode's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Equal => Self::NAMES[0],
            Self::Budget => Self::NAMES[1],
        }
    }
}

impl std::str::FromStr for SpindleBytes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "equal" => Ok(Self::Equal),
            "budget" => Ok(Self::Budget),
            _ => Err(format!(
                "unknown --spindle-bytes `{s}`; expected one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// What the re-targeting of one cell found, kept in its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retarget {
    /// The budget the press ran at (the record's `budget` stays the row's).
    pub budget: usize,
    /// Bytes it held after the prompt.
    pub held_bytes: u64,
    /// Bytes SnapKV held at the row's budget on the same prompt.
    pub target_bytes: u64,
    /// Budgets measured to find it.
    pub probes: usize,
}

/// Most budgets measured for one cell; the bracket's lower end is returned when reached.
pub const MAX_PROBES: usize = 24;

/// The largest budget in `range` whose `bytes` do not exceed `target`, starting from `start`
/// (module header); the smallest when even it holds more. `bytes` measures a budget.
pub fn retarget<E>(
    start: usize,
    range: std::ops::RangeInclusive<usize>,
    target: u64,
    mut bytes: impl FnMut(usize) -> Result<u64, E>,
) -> Result<Retarget, E> {
    let (min, max) = (*range.start(), (*range.end()).max(*range.start()));
    let start = start.clamp(min, max);
    let mut probes = 1;
    let at_start = bytes(start)?;
    let done = |budget, held, probes| Retarget {
        budget,
        held_bytes: held,
        target_bytes: target,
        probes,
    };
    // The bracket: (budget, bytes) at its ends.
    let (mut lo, mut hi) = if at_start <= target {
        if start == max {
            return Ok(done(start, at_start, probes));
        }
        probes += 1;
        let at_max = bytes(max)?;
        if at_max <= target {
            return Ok(done(max, at_max, probes));
        }
        ((start, at_start), (max, at_max))
    } else {
        if start == min {
            return Ok(done(min, at_start, probes));
        }
        probes += 1;
        let at_min = bytes(min)?;
        if at_min > target {
            return Ok(done(min, at_min, probes));
        }
        ((min, at_min), (start, at_start))
    };
    // Illinois weights of the ends' excess over the target; `side`: the end moved last.
    let (mut w_lo, mut w_hi) = (1.0f64, 1.0f64);
    let mut side = 0i8;
    while hi.0 - lo.0 > 1 && probes < MAX_PROBES {
        let below = (target - lo.1) as f64 * w_lo;
        let above = (hi.1 - target) as f64 * w_hi;
        let frac = below / (below + above).max(f64::MIN_POSITIVE);
        let guess = lo.0 + (frac * (hi.0 - lo.0) as f64).round() as usize;
        let guess = guess.clamp(lo.0 + 1, hi.0 - 1);
        probes += 1;
        let held = bytes(guess)?;
        if held <= target {
            lo = (guess, held);
            w_lo = 1.0;
            if side == -1 {
                w_hi /= 2.0;
            }
            side = -1;
        } else {
            hi = (guess, held);
            w_hi = 1.0;
            if side == 1 {
                w_lo /= 2.0;
            }
            side = 1;
        }
    }
    Ok(done(lo.0, lo.1, probes))
}

#[cfg(test)]
mod tests {
    use super::*;

    type R = Result<u64, String>;

    #[test]
    fn finds_the_largest_budget_within_the_target_on_a_line() {
        // bytes(b) = 100·b; target 25 050 → b = 250 (25 000 ≤ target < 25 100), from 100.
        let r = retarget(100, 1..=1000, 25_050, |b| -> R { Ok(100 * b as u64) }).expect("search");
        assert_eq!(
            (r.budget, r.held_bytes, r.target_bytes),
            (250, 25_000, 25_050)
        );
        // Bracket [100, 1000]; interpolation: 100 + round(15 050 / 90 000 · 900) = 251
        // (25 100 > target) → [100, 251]; then 100 + round(15 050 / 15 100 · 151) = 250
        // (25 000 ≤ target) → [250, 251]: done after 4 measurements.
        assert_eq!(r.probes, 4);
    }

    #[test]
    fn searches_down_when_the_start_holds_more() {
        // bytes(b) = 3·b + 40 (a repeat's copies): target 400 → b = 120 (400 ≤ 400).
        let r = retarget(512, 9..=4096, 400, |b| -> R { Ok(3 * b as u64 + 40) }).expect("search");
        assert_eq!((r.budget, r.held_bytes), (120, 400));
    }

    #[test]
    fn a_convex_curve_converges_to_the_exact_budget() {
        // bytes(b) = b² / 10: target 16 000 → b = 400 (16 000), 401 gives 16 080.
        let mut seen = Vec::new();
        let r = retarget(64, 1..=4096, 16_000, |b| -> R {
            seen.push(b);
            Ok((b * b / 10) as u64)
        })
        .expect("search");
        assert_eq!(r.budget, 400);
        assert_eq!(r.probes, seen.len());
        assert!(r.probes < MAX_PROBES, "{seen:?}");
        // Deterministic: the same measurements give the same probes.
        let mut again = Vec::new();
        retarget(64, 1..=4096, 16_000, |b| -> R {
            again.push(b);
            Ok((b * b / 10) as u64)
        })
        .expect("search");
        assert_eq!(seen, again);
    }

    #[test]
    fn ends_of_the_range_and_errors() {
        // Everything fits: the whole prompt.
        let r = retarget(10, 1..=50, 1_000, |b| -> R { Ok(b as u64) }).expect("fits");
        assert_eq!((r.budget, r.probes), (50, 2));
        // Nothing fits: the smallest budget of the range, over the target.
        let r = retarget(10, 9..=50, 5, |b| -> R { Ok(10 + b as u64) }).expect("over");
        assert_eq!((r.budget, r.held_bytes), (9, 19));
        // A measurement that fails stops the search with its error.
        let e = retarget(10, 1..=50, 5, |_| -> R { Err("below β".into()) });
        assert_eq!(e, Err("below β".to_string()));
        assert_eq!("budget".parse(), Ok(SpindleBytes::Budget));
        assert!("same".parse::<SpindleBytes>().is_err());
    }
}
