//! SpindleKV at equal memory: its codebooks hold fewer bytes than a plain selection at the same
//! budget (and its GQA repeat can hold more), so a row of the results compares it with the others
//! only once its budget is re-targeted until its held bytes match what SnapKV holds at the row's
//! budget on the same prompt. HeadKV and HeadKV-R the same under `--per-head-bytes equal`: their
//! per-head budgets, each rounded up and floored at the window, hold 5–9% more than SnapKV at
//! the same budget. Both are *measured* on copies of the shared prefill (the press
//! applied, [`kvplan_runtime::press::Session::memory`]), never predicted.
//!
//! The search ([`retarget`]) finds the largest budget (from the smallest the plan accepts for
//! the prompt up to its length) whose bytes do not exceed the target,
//! assuming bytes grow with the budget: a bracket `[lo, hi]` with `bytes(lo) ≤ target <
//! bytes(hi)` shrinks by regula falsi with the Illinois rule (the end kept twice in a row has its
//! weight halved), the guess always strictly inside, until `hi = lo + 1`. Every step depends only
//! on the measured bytes, so the same prompt gives the same budget. A prompt's later searches of
//! the same method ([`retarget_known`]: a method's three ratio cells) start from the bracket the
//! budgets measured before give; with bytes that grow with the budget they find the same budget
//! in fewer measurements, and only their `probes` differ.

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
    /// Budgets whose bytes the search used: measured, or known from the prompt's earlier
    /// searches of the method ([`retarget_known`]; records before 2bc467c count a cold search's
    /// measurements).
    pub probes: usize,
}

impl Retarget {
    /// The search's answer `(budget, held bytes)` for `target`, after `probes`.
    fn at((budget, held_bytes): (usize, u64), target: u64, probes: usize) -> Self {
        Self {
            budget,
            held_bytes,
            target_bytes: target,
            probes,
        }
    }
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
    let done = |budget, held, probes| Retarget::at((budget, held), target, probes);
    // The bracket: (budget, bytes) at its ends.
    let (lo, hi) = if at_start <= target {
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
    narrow(lo, hi, target, probes, bytes)
}

/// [`retarget`] starting from budgets already measured on the prompt (`known`: budget and
/// bytes, e.g. by the searches of the same method's other ratio cells): when they bracket the
/// target — the largest known budget within it below the smallest known over it — the search
/// narrows that bracket; when the largest budget of the range is known within the target (or the
/// smallest known over it), that is the answer; otherwise it is [`retarget`]. With bytes that
/// grow with the budget the answer is [`retarget`]'s (the one budget within the target whose next
/// is over it); `probes` counts the known budgets it started from (the bracket's ends) and the
/// budgets it measured.
pub fn retarget_known<E>(
    known: &[(usize, u64)],
    start: usize,
    range: std::ops::RangeInclusive<usize>,
    target: u64,
    bytes: impl FnMut(usize) -> Result<u64, E>,
) -> Result<Retarget, E> {
    let (min, max) = (*range.start(), (*range.end()).max(*range.start()));
    let inside = || {
        known
            .iter()
            .copied()
            .filter(|(b, _)| (min..=max).contains(b))
    };
    let lo = inside()
        .filter(|&(_, h)| h <= target)
        .max_by_key(|&(b, _)| b);
    let hi = inside()
        .filter(|&(_, h)| h > target)
        .min_by_key(|&(b, _)| b);
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo.0 < hi.0 => narrow(lo, hi, target, 2, bytes),
        (Some(lo), _) if lo.0 == max => Ok(Retarget::at(lo, target, 1)),
        (_, Some(hi)) if hi.0 == min => Ok(Retarget::at(hi, target, 1)),
        _ => retarget(start, range, target, bytes),
    }
}

/// The Illinois regula falsi of [`retarget`] from the bracket `lo` (within the target) – `hi`
/// (over it), each (budget, bytes), after `probes` measurements.
fn narrow<E>(
    mut lo: (usize, u64),
    mut hi: (usize, u64),
    target: u64,
    mut probes: usize,
    mut bytes: impl FnMut(usize) -> Result<u64, E>,
) -> Result<Retarget, E> {
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
    Ok(Retarget::at(lo, target, probes))
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

    #[test]
    fn known_budgets_bracket_the_search_and_give_the_cold_answer() {
        let line = |b: usize| -> R { Ok(100 * b as u64) };
        let never = |b: usize| -> R { Err(format!("measured {b}")) };
        // Known within and over the target, adjacent: the answer without a measurement.
        let r = retarget_known(
            &[(250, 25_000), (251, 25_100)],
            100,
            1..=1000,
            25_050,
            never,
        )
        .expect("known");
        assert_eq!((r.budget, r.held_bytes, r.probes), (250, 25_000, 2));
        // The range's largest budget known within the target: it.
        let r = retarget_known(&[(50, 5_000)], 10, 1..=50, 9_999, never).expect("fits");
        assert_eq!((r.budget, r.probes), (50, 1));
        // The smallest known over the target: it, as `retarget` returns it.
        let r = retarget_known(&[(9, 900)], 10, 9..=50, 5, never).expect("over");
        assert_eq!((r.budget, r.held_bytes), (9, 900));
        // Nothing known: `retarget` itself, probe for probe.
        let cold = retarget(100, 1..=1000, 25_050, line).expect("cold");
        assert_eq!(retarget_known(&[], 100, 1..=1000, 25_050, line), Ok(cold));
        // Known budgets outside the range are not used.
        let r = retarget_known(&[(2000, 1)], 100, 1..=1000, 25_050, line).expect("outside");
        assert_eq!(r.budget, 250);
    }

    #[test]
    fn a_method_s_later_targets_find_what_a_cold_search_finds() {
        // A convex curve and three targets searched in turn, each from what the earlier ones
        // measured (as a prompt's three ratio cells): the same budget as a cold search, in no
        // more measurements in all.
        let curve = |b: usize| (b * b / 10) as u64 + 7;
        let mut known: Vec<(usize, u64)> = Vec::new();
        let (mut warm_measured, mut cold_measured) = (0, 0);
        for (start, target) in [(3000, 700_000), (2000, 300_000), (1000, 90_000)] {
            let cold = retarget(start, 9..=4000, target, |b| -> R {
                cold_measured += 1;
                Ok(curve(b))
            })
            .expect("cold");
            let mut seen = Vec::new();
            let warm = retarget_known(&known, start, 9..=4000, target, |b| -> R {
                seen.push((b, curve(b)));
                Ok(curve(b))
            })
            .expect("warm");
            assert_eq!(
                (warm.budget, warm.held_bytes),
                (cold.budget, cold.held_bytes)
            );
            assert!(curve(warm.budget) <= target && curve(warm.budget + 1) > target);
            warm_measured += seen.len();
            known.extend(seen);
        }
        assert!(
            warm_measured < cold_measured,
            "{warm_measured} vs {cold_measured}"
        );
    }
}
