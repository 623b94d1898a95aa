//! Table rows whose budgets rest on retrieval-reasoning scores that are not above chance.
//!
//! HeadKV's R2 head scores (HeadKV §3.1, eq. 2 over the retrieval-reasoning needles of its
//! App. E) count only the trials a model answered right; where the profile's answers are not
//! above what copying a random candidate statement gives (`kvplan_planner::chance`, recorded in
//! the plan's `provenance.profile.retrieval_reasoning_chance`), the scores are chance snapshots
//! and so are the budgets built on them. Every table row of such a method — `headkv`, its
//! controls (`headkv@perm3`, `headkv@beta1.2`), its engine reductions (`vllm:headkv`, …) and
//! kvpress's rows of it — carries [`MARK`] after its method, and the table closes with a
//! footnote that gives the test. Rows of HeadKV-R (retrieval scores only) are not marked.

use kvplan_planner::chance::ChanceTest;
use kvplan_planner::Plan;

/// The mark after a marked row's method.
pub const MARK: &str = "†";

/// Whether `method` (a table row's method: `headkv`, `headkv@perm1`, `vllm:headkv`,
/// `kvpress:headkv`) takes its budgets from HeadKV's retrieval-reasoning scores.
pub fn rests_on_r2(method: &str) -> bool {
    let base = method.rsplit(':').next().unwrap_or(method);
    let base = base.split('@').next().unwrap_or(base);
    base == "headkv"
}

/// The plan's R2 test when it says the scores are not above chance.
pub fn at_chance(plan: Option<&Plan>) -> Option<&ChanceTest> {
    let test = plan?
        .provenance
        .profile
        .retrieval_reasoning_chance
        .as_ref()?;
    (!test.above_chance).then_some(test)
}

/// The footnote of a marked table.
pub fn footnote(test: &ChanceTest) -> String {
    format!(
        "{MARK} Budgets from HeadKV's retrieval-reasoning head scores, whose profile trials are \
         NOT above chance ({} of {} answered right where copying a random candidate statement \
         gives {:.1}; one-sided exact p = {:.3}): these rows test HeadKV's allocation shape, not \
         retrieval-reasoning heads.\n",
        test.correct, test.trials, test.chance_correct, test.p_value
    )
}

/// `md` with [`MARK`] after the method of every table row that [`rests_on_r2`] and the
/// [`footnote`] at the end, when `test` is given; `md` unchanged otherwise or when no row is
/// marked. A row is a line `| method @ budget | …`; only its first cell is read and changed.
pub fn mark(md: &str, test: Option<&ChanceTest>) -> String {
    let Some(test) = test else {
        return md.to_string();
    };
    let mut marked = false;
    let mut out = String::with_capacity(md.len() + 256);
    for line in md.split_inclusive('\n') {
        match marked_row(line) {
            Some(row) => {
                out.push_str(&row);
                marked = true;
            }
            None => out.push_str(line),
        }
    }
    if marked {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&footnote(test));
    }
    out
}

/// `line` with the mark after its first cell's method, when it is a row of an R2 method.
fn marked_row(line: &str) -> Option<String> {
    let rest = line.strip_prefix("| ")?;
    let (cell, tail) = rest.split_once(" |")?;
    let (method, budget) = match cell.split_once(" @ ") {
        Some((m, b)) => (m, Some(b)),
        None => (cell, None),
    };
    if !rests_on_r2(method) {
        return None;
    }
    let budget = budget.map(|b| format!(" @ {b}")).unwrap_or_default();
    Some(format!("| {method} {MARK}{budget} |{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(correct: usize, p: f64) -> ChanceTest {
        ChanceTest {
            trials: 50,
            correct,
            accuracy: correct as f64 / 50.0,
            chance_correct: 19.0,
            p_value: p,
            above_chance: p < 0.05,
            by_candidates: Vec::new(),
        }
    }

    #[test]
    fn headkv_and_its_controls_and_reductions_rest_on_r2_headkv_r_does_not() {
        for m in ["headkv", "headkv@perm3", "headkv@beta1.2", "vllm:headkv", "kvpress:headkv"] {
            assert!(rests_on_r2(m), "{m}");
        }
        for m in ["headkv-r", "headkv-r@perm1", "trtllm:headkv-r", "snapkv", "full", "pyramid"] {
            assert!(!rests_on_r2(m), "{m}");
        }
    }

    #[test]
    fn marks_the_first_cell_of_r2_rows_and_adds_the_footnote() {
        let md = "| method @ budget | KV % |\n|---|---:|\n| full | 100.0 |\n\
                  | headkv @ 128 | 13.9 |\n| headkv-r @ 128 | 13.9 |\n\
                  | headkv@perm1 @ 128 | 13.6 |\n\nlegend\n";
        let out = mark(md, Some(&test(2, 0.9999)));
        assert!(out.contains("| headkv † @ 128 | 13.9 |\n"), "{out}");
        assert!(out.contains("| headkv@perm1 † @ 128 | 13.6 |\n"), "{out}");
        assert!(out.contains("| headkv-r @ 128 | 13.9 |\n"), "{out}");
        assert!(out.contains("| full | 100.0 |\n"), "{out}");
        assert!(out.contains("| method @ budget | KV % |\n"), "{out}");
        assert!(out.ends_with(&footnote(&test(2, 0.9999))), "{out}");
        assert!(out.contains("2 of 50 answered right"), "{out}");
    }

    #[test]
    fn no_test_or_no_r2_row_leaves_the_table_as_it_was() {
        let md = "| snapkv @ 128 | 12.9 |\n";
        assert_eq!(mark(md, Some(&test(2, 0.9999))), md);
        let md = "| headkv @ 128 | 13.9 |\n";
        assert_eq!(mark(md, None), md);
    }
}
