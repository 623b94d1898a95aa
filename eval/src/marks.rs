//! Marks on table rows whose numbers need a caveat the row itself cannot carry.
//!
//! - [`R2_MARK`] (†): budgets that rest on retrieval-reasoning scores not above chance. HeadKV's
//!   R2 head scores (HeadKV §3.1, eq. 2 over the retrieval-reasoning needles of its App. E)
//!   count only the trials a model answered right; where the profile's answers are not above
//!   what copying a random candidate statement gives (`kvplan_planner::chance`, recorded in the
//!   plan's `provenance.profile.retrieval_reasoning_chance`), the scores are chance snapshots and
//!   so are the budgets built on them. Marked: `headkv`, its controls (`headkv@perm3`,
//!   `headkv@beta1.2`), its engine reductions (`vllm:headkv`, …) and kvpress's rows of it; not
//!   HeadKV-R (retrieval scores only).
//! - [`VARIANT_MARK`] (§): budgets from retrieval-reasoning scores above chance, measured on
//!   kvplan's calibrated needles (profiler `needles::calibrated`: two-hop bridge facts, the
//!   answer's phrase checked) rather than HeadKV's App. E needles — a kvplan variant, so the rows
//!   are not the paper's HeadKV. Marked as † is; a variant at chance takes † and says which
//!   needles in its footnote.
//! - [`UNTRAINED_MARK`] (‡): PoD run with the model's own weights. PoD shares the distant tokens'
//!   attention scores across a layer block and post-trains the model for it (PoD §3.3); without
//!   `--weights` from `kvplan train-pod` the rows measure the sharing alone, untrained.
//!
//! Each marked table closes with one footnote per mark used.

use std::collections::BTreeMap;

use kvplan_planner::chance::{counts_text, ChanceTest};
use kvplan_planner::{Method, Plan};

use crate::row_method::RowMethod;

/// The mark of rows on R2 scores not above chance.
pub const R2_MARK: &str = "†";

/// The mark of rows on R2 scores above chance from kvplan's needle variant.
pub const VARIANT_MARK: &str = "§";

/// The mark of PoD rows run without post-trained weights.
pub const UNTRAINED_MARK: &str = "‡";

/// Whether `method` (a table row's method: `headkv`, `headkv@perm1`, `vllm:headkv`,
/// `kvpress-headkv`) takes its budgets from HeadKV's retrieval-reasoning scores.
pub fn rests_on_r2(method: &str) -> bool {
    RowMethod::of(method).method() == Some(Method::HeadKv)
}

/// The plan's R2 test, as its profile recorded it.
fn chance_of(plan: Option<&Plan>) -> Option<&ChanceTest> {
    plan?.provenance.profile.retrieval_reasoning_chance.as_ref()
}

/// The plan's R2 test when it says the scores are not above chance.
pub fn at_chance(plan: Option<&Plan>) -> Option<&ChanceTest> {
    chance_of(plan).filter(|t| !t.above_chance)
}

/// The plan's R2 test when its scores are above chance on a kvplan needle variant.
pub fn on_variant(plan: Option<&Plan>) -> Option<&ChanceTest> {
    chance_of(plan).filter(|t| t.above_chance && t.variant.is_some())
}

/// " on kvplan's `variant` needles (not HeadKV's App. E)" when the test names one.
fn needles_of(test: &ChanceTest) -> String {
    test.variant
        .as_ref()
        .map(|v| format!(" on kvplan's {v} needles (not HeadKV's App. E)"))
        .unwrap_or_default()
}

/// "N of M answered right where copying … gives X; one-sided exact p …": a footnote's counts.
fn counts(test: &ChanceTest) -> String {
    counts_text(test, "answered right")
}

/// The footnote of a marked table.
pub fn footnote(test: &ChanceTest) -> String {
    format!(
        "{R2_MARK} Budgets from HeadKV's retrieval-reasoning head scores, whose profile trials{} \
         are NOT above chance ({}): these rows test HeadKV's allocation shape, not \
         retrieval-reasoning heads.\n",
        needles_of(test),
        counts(test)
    )
}

/// The footnote of rows on a needle variant's scores above chance.
pub fn variant_footnote(test: &ChanceTest) -> String {
    format!(
        "{VARIANT_MARK} Budgets from retrieval-reasoning head scores measured{} ({}): a kvplan \
         variant of HeadKV's R2 scores, not the paper's.\n",
        needles_of(test),
        counts(test)
    )
}

/// Whether `method` is PoD (`pod`, or an engine's or kvpress's row of it).
pub fn is_pod(method: &str) -> bool {
    RowMethod::of(method).method() == Some(Method::Pod)
}

/// The footnote of PoD rows without post-trained weights.
pub fn untrained_footnote() -> String {
    format!(
        "{UNTRAINED_MARK} PoD untrained: the model's own weights under PoD's shared scores (no \
         `kvplan train-pod` weights given; PoD §3.3 post-trains for the sharing).\n"
    )
}

/// The marks of one table: what the plan and the records' settings say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// The plan's R2 test, when its scores are not above chance.
    pub r2_at_chance: Option<ChanceTest>,
    /// The plan's R2 test, when its scores are above chance on a kvplan needle variant.
    pub r2_variant: Option<ChanceTest>,
    /// Whether PoD ran with the model's own weights (no `weights_sha256` in the settings).
    pub pod_untrained: bool,
}

impl Marks {
    /// The marks of records made under `plan` with `settings`.
    pub fn of(plan: Option<&Plan>, settings: &BTreeMap<String, String>) -> Self {
        Self {
            r2_at_chance: at_chance(plan).cloned(),
            r2_variant: on_variant(plan).cloned(),
            pod_untrained: !settings.contains_key("weights_sha256"),
        }
    }

    /// `md` with each mark after the method of the rows it applies to (a row is a line
    /// `| method @ budget | …`; only its first cell is read and changed) and a footnote per mark
    /// used at the end; unchanged where no row is marked.
    pub fn apply(&self, md: &str) -> String {
        let mut used: Vec<&'static str> = Vec::new();
        let mut out = String::with_capacity(md.len() + 512);
        for line in md.split_inclusive('\n') {
            match self.marked_row(line) {
                Some((row, mark)) => {
                    out.push_str(&row);
                    if !used.contains(&mark) {
                        used.push(mark);
                    }
                }
                None => out.push_str(line),
            }
        }
        if !used.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        if let (true, Some(test)) = (used.contains(&R2_MARK), &self.r2_at_chance) {
            out.push_str(&footnote(test));
        }
        if let (true, Some(test)) = (used.contains(&VARIANT_MARK), &self.r2_variant) {
            out.push_str(&variant_footnote(test));
        }
        if used.contains(&UNTRAINED_MARK) {
            out.push_str(&untrained_footnote());
        }
        out
    }

    /// `method`'s mark; `None` for a row that needs none.
    fn mark_of(&self, method: &str) -> Option<&'static str> {
        if rests_on_r2(method) && self.r2_at_chance.is_some() {
            Some(R2_MARK)
        } else if rests_on_r2(method) && self.r2_variant.is_some() {
            Some(VARIANT_MARK)
        } else if self.pod_untrained && is_pod(method) {
            Some(UNTRAINED_MARK)
        } else {
            None
        }
    }

    /// `method` with its mark after it, as in a table row (`pod ‡`), for a figure's legend;
    /// unchanged when it needs none.
    pub fn label(&self, method: &str) -> String {
        match self.mark_of(method) {
            Some(mark) => format!("{method} {mark}"),
            None => method.to_string(),
        }
    }

    /// `line` with its mark after its first cell's method, and the mark.
    fn marked_row(&self, line: &str) -> Option<(String, &'static str)> {
        let rest = line.strip_prefix("| ")?;
        let (cell, tail) = rest.split_once(" |")?;
        let (method, budget) = match cell.split_once(" @ ") {
            Some((m, b)) => (m, Some(b)),
            None => (cell, None),
        };
        let mark = self.mark_of(method)?;
        let budget = budget.map(|b| format!(" @ {b}")).unwrap_or_default();
        Some((format!("| {method} {mark}{budget} |{tail}"), mark))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test(correct: usize, p: f64) -> ChanceTest {
        ChanceTest::new(50, correct, 19.0, p, Vec::new())
    }

    #[test]
    fn headkv_and_its_controls_and_reductions_rest_on_r2_headkv_r_does_not() {
        for m in [
            "headkv",
            "headkv@perm3",
            "headkv@beta1.2",
            "vllm:headkv",
            "kvpress-headkv",
        ] {
            assert!(rests_on_r2(m), "{m}");
        }
        for m in [
            "headkv-r",
            "headkv-r@perm1",
            "trtllm:headkv-r",
            "snapkv",
            "full",
            "pyramid",
        ] {
            assert!(!rests_on_r2(m), "{m}");
        }
    }

    #[test]
    fn marks_the_first_cell_of_r2_rows_and_adds_the_footnote() {
        let md = "| method @ budget | KV % |\n|---|---:|\n| full | 100.0 |\n\
                  | headkv @ 128 | 13.9 |\n| headkv-r @ 128 | 13.9 |\n\
                  | headkv@perm1 @ 128 | 13.6 |\n\nlegend\n";
        let marks = Marks {
            r2_at_chance: Some(test(2, 0.9999)),
            r2_variant: None,
            pod_untrained: false,
        };
        let out = marks.apply(md);
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
        let at_chance = Marks {
            r2_at_chance: Some(test(2, 0.9999)),
            r2_variant: None,
            pod_untrained: false,
        };
        let md = "| snapkv @ 128 | 12.9 |\n| pod @ 128 | 87.8 |\n";
        assert_eq!(at_chance.apply(md), md);
        let md = "| headkv @ 128 | 13.9 |\n";
        assert_eq!(Marks::default().apply(md), md);
        // Above chance: no mark.
        let above = Marks {
            r2_at_chance: None,
            r2_variant: None,
            pod_untrained: false,
        };
        assert_eq!(above.apply(md), md);
    }

    #[test]
    fn pod_rows_without_trained_weights_are_marked_untrained() {
        let settings = BTreeMap::from([("model".to_string(), "m".to_string())]);
        let marks = Marks::of(None, &settings);
        assert!(marks.pod_untrained && marks.r2_at_chance.is_none() && marks.r2_variant.is_none());
        let md = "| full | 100.0 |\n| pod @ 512 | 93.1 |\n| headkv @ 128 | 13.9 |\n";
        let out = marks.apply(md);
        assert!(out.contains("| pod ‡ @ 512 | 93.1 |\n"), "{out}");
        assert!(out.contains("| headkv @ 128 | 13.9 |\n"), "{out}");
        assert!(out.ends_with(&untrained_footnote()), "{out}");
        let trained = BTreeMap::from([("weights_sha256".to_string(), "ab".to_string())]);
        assert_eq!(Marks::of(None, &trained).apply(md), md);
    }

    #[test]
    fn rows_on_a_needle_variant_say_so_above_chance_or_not() {
        let md = "| headkv @ 128 | 13.9 |\n| headkv-r @ 128 | 13.9 |\n";
        let above = test(40, 1e-9).of_variant("calibrated");
        let marks = Marks {
            r2_at_chance: None,
            r2_variant: Some(above.clone()),
            pod_untrained: false,
        };
        let out = marks.apply(md);
        assert!(out.contains("| headkv § @ 128 | 13.9 |\n"), "{out}");
        assert!(out.contains("| headkv-r @ 128 | 13.9 |\n"), "{out}");
        assert!(out.ends_with(&variant_footnote(&above)), "{out}");
        assert!(
            out.contains("on kvplan's calibrated needles (not HeadKV's App. E)"),
            "{out}"
        );
        assert_eq!(marks.label("headkv"), "headkv §");
        // At chance, † wins and its footnote names the needles.
        let at = test(10, 0.9).of_variant("calibrated");
        let marks = Marks {
            r2_at_chance: Some(at.clone()),
            r2_variant: None,
            pod_untrained: false,
        };
        let out = marks.apply(md);
        assert!(out.contains("| headkv † @ 128 |"), "{out}");
        assert!(out.ends_with(&footnote(&at)), "{out}");
        assert!(
            out.contains("trials on kvplan's calibrated needles"),
            "{out}"
        );
        // The authors' needles above chance: no mark, and the † footnote reads as before.
        assert!(!footnote(&test(2, 0.9999)).contains("calibrated"));
    }
}
