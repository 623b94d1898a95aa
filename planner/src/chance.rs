//! Retrieval-reasoning answers against chance: whether a profile's R2 head scores rest on more
//! than copying.
//!
//! Every R2 needle holds k statements of the answer's shape (HeadKV App. E compares two people,
//! k = 2); a model that copies one at random is right 1/k of the time, and a trial it gets right
//! counts in the head scores like any other. The profiler records the answer accuracy and a
//! one-sided exact test of it against that copying rate: p = P(X ≥ correct) where X is the number
//! of right answers a random copier gives (binomial for one k, Poisson-binomial over a mix). A
//! profile is *above chance* when p < [`CHANCE_ALPHA`]; when it is not, its notes say so, every
//! plan built from it carries a note, and tables read [`ChanceTest::above_chance`] from the
//! profile's settings (copied into each plan's `provenance.profile`).
//!
//! The trials repeat needles (a profile's 50 trials take its 24 needles in turn over lengths and
//! depths), so a needle answered right at every length counts several times. [`NeedleTest`] asks
//! the same question with the needle as the unit: p = P(S ≥ correct) where S = Σ_j n_j B_j, B_j ~
//! Bernoulli(1/k_j), the right answers of a copier that picks one candidate per needle and keeps
//! it in all n_j of that needle's trials (the most its trials can repeat one another). Where it is
//! recorded, a profile is above chance only when both tests are below [`CHANCE_ALPHA`].
//!
//! The fields are optional: profiles written before them load unchanged (no test recorded, or the
//! trial-level test alone).

use serde::{Deserialize, Serialize};

use crate::{validate, Error, Method, Result};

/// Significance level of the one-sided test.
pub const CHANCE_ALPHA: f64 = 0.05;

/// Tolerance of the recorded accuracy against correct / trials.
const ACCURACY_TOLERANCE: f64 = 1e-9;

/// The R2 answers of one profile against the copying rate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChanceTest {
    /// Retrieval-reasoning trials run.
    pub trials: usize,
    /// Trials answered right (QA-F1 > 0.5 against the answer statement: the kept trials).
    pub correct: usize,
    /// correct / trials (0 when no trial ran).
    pub accuracy: f64,
    /// Right answers a model copying a random candidate statement gives on average: Σ 1/k.
    pub chance_correct: f64,
    /// One-sided exact p: the probability that a random copier is right at least `correct`
    /// times on these trials.
    pub p_value: f64,
    /// Whether `p_value` < [`CHANCE_ALPHA`].
    pub above_chance: bool,
    /// The same test for the trials of each candidate count k (binomial at rate 1/k).
    pub by_candidates: Vec<ChanceGroup>,
    /// The needles, when not HeadKV's form (App. E's comparisons and two-hop facts, checked by
    /// QA-F1 against the statement): `"calibrated"` for kvplan's calibrated variant (two-hop
    /// bridge facts, the answer's phrase checked; profiler `needles::calibrated`). Absent in
    /// profiles of the authors' form and in those written before the variant existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The test with the needle as the unit (absent in profiles written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_needle: Option<NeedleTest>,
}

/// The test over needles rather than trials: a copier consistent within each needle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NeedleTest {
    /// Distinct needles the trials were drawn from (a needle's trials differ in context length
    /// and depth only).
    pub needles: usize,
    /// Needles answered right in every one of their trials.
    pub right_every_trial: usize,
    /// Needles answered right in none of their trials.
    pub right_no_trial: usize,
    /// One-sided exact p: P(Σ_j n_j B_j ≥ correct), B_j ~ Bernoulli(1/k_j) one draw per needle.
    pub p_value: f64,
}

/// The test for the trials whose needles hold `candidates` statements.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChanceGroup {
    /// Candidate statements per needle, k ≥ 2 (the copying rate is 1/k).
    pub candidates: usize,
    /// Trials run with such needles.
    pub trials: usize,
    /// Of them, answered right.
    pub correct: usize,
    /// correct / trials.
    pub accuracy: f64,
    /// One-sided exact binomial p: P(X ≥ correct), X ~ Binomial(trials, 1/k).
    pub p_value: f64,
}

/// `correct / trials`, 0 when no trial ran: the accuracy a test records.
pub fn accuracy(correct: usize, trials: usize) -> f64 {
    if trials == 0 {
        0.0
    } else {
        correct as f64 / trials as f64
    }
}

impl ChanceGroup {
    /// The group of `trials` needles of `candidates` statements, `correct` of them answered
    /// right, with the one-sided binomial `p_value`; the accuracy follows from the counts.
    pub fn new(candidates: usize, trials: usize, correct: usize, p_value: f64) -> Self {
        ChanceGroup {
            candidates,
            trials,
            correct,
            accuracy: accuracy(correct, trials),
            p_value,
        }
    }
}

impl ChanceTest {
    /// The test of `correct` right answers in `trials`, where copying a random candidate gives
    /// `chance_correct` on average and the one-sided exact p is `p_value`; the accuracy and
    /// [`ChanceTest::above_chance`] follow from them, as [`ChanceTest::validate`] checks.
    pub fn new(
        trials: usize,
        correct: usize,
        chance_correct: f64,
        p_value: f64,
        by_candidates: Vec<ChanceGroup>,
    ) -> Self {
        ChanceTest {
            trials,
            correct,
            accuracy: accuracy(correct, trials),
            chance_correct,
            p_value,
            above_chance: p_value < CHANCE_ALPHA,
            by_candidates,
            variant: None,
            by_needle: None,
        }
    }

    /// The same test with its needle-level test `needles` beside it: above chance only when
    /// both are.
    pub fn with_needles(self, needles: NeedleTest) -> Self {
        let test = ChanceTest {
            by_needle: Some(needles),
            ..self
        };
        ChanceTest {
            above_chance: test.expected_above_chance(),
            ..test
        }
    }

    /// Whether the recorded p-values put the answers above chance: the trial-level one, and
    /// the needle-level one where recorded.
    fn expected_above_chance(&self) -> bool {
        self.p_value < CHANCE_ALPHA
            && self
                .by_needle
                .as_ref()
                .is_none_or(|n| n.p_value < CHANCE_ALPHA)
    }

    /// The same test, its trials drawn from the needle `variant` (see [`ChanceTest::variant`]).
    pub fn of_variant(self, variant: &str) -> Self {
        ChanceTest {
            variant: Some(variant.to_string()),
            ..self
        }
    }

    /// One line for notes: accuracy, what copying gives and p, per candidate count (the
    /// needle-level test has its own line, [`NeedleTest::summary`]).
    pub fn summary(&self) -> String {
        let groups: Vec<String> = self
            .by_candidates
            .iter()
            .map(|g| {
                format!(
                    "{}-candidate needles {} of {} (copying: 1/{}; one-sided binomial p {})",
                    g.candidates,
                    g.correct,
                    g.trials,
                    g.candidates,
                    p_text(g.p_value)
                )
            })
            .collect();
        format!(
            "retrieval_reasoning answers right in {} of {} trials ({:.0}%; copying a random \
             candidate statement gives {:.1} on average; one-sided exact p {}): {}",
            self.correct,
            self.trials,
            100.0 * self.accuracy,
            self.chance_correct,
            p_text(self.p_value),
            groups.join("; ")
        )
    }

    /// Checks the counts, rates and flag, naming the JSON path `at`.
    pub fn validate(&self, at: &str) -> Result<()> {
        check_counts(at, self.correct, self.trials, self.accuracy, self.p_value)?;
        validate::non_negative(&format!("{at}.chance_correct"), self.chance_correct)?;
        if let Some(n) = &self.by_needle {
            let p = format!("{at}.by_needle");
            validate::at_least(&format!("{p}.needles"), n.needles, 1)?;
            if n.needles > self.trials {
                return Err(Error::invalid(
                    format!("{p}.needles"),
                    format!("at most trials = {}", self.trials),
                    n.needles,
                ));
            }
            if n.right_every_trial + n.right_no_trial > n.needles {
                return Err(Error::invalid(
                    format!("{p}.right_every_trial"),
                    format!(
                        "at most needles − right_no_trial = {}",
                        n.needles.saturating_sub(n.right_no_trial)
                    ),
                    n.right_every_trial,
                ));
            }
            validate::in_range(&format!("{p}.p_value"), n.p_value, 0.0, 1.0)?;
        }
        let expected = self.expected_above_chance();
        if self.above_chance != expected {
            let rule = if self.by_needle.is_some() {
                "p_value and by_needle.p_value both"
            } else {
                "p_value"
            };
            return Err(Error::invalid(
                format!("{at}.above_chance"),
                format!("{rule} < {CHANCE_ALPHA} ({expected})"),
                self.above_chance,
            ));
        }
        let (mut trials, mut correct) = (0, 0);
        for (i, g) in self.by_candidates.iter().enumerate() {
            let p = format!("{at}.by_candidates[{i}]");
            validate::at_least(&format!("{p}.candidates"), g.candidates, 2)?;
            check_counts(&p, g.correct, g.trials, g.accuracy, g.p_value)?;
            trials += g.trials;
            correct += g.correct;
        }
        if (trials, correct) != (self.trials, self.correct) {
            return Err(Error::invalid(
                format!("{at}.by_candidates"),
                format!("groups summing to {} of {}", self.correct, self.trials),
                format!("{correct} of {trials}"),
            ));
        }
        Ok(())
    }
}

impl NeedleTest {
    /// "N needles (A right in every trial, B in none); a copier consistent within each needle:
    /// one-sided exact p …".
    pub fn summary(&self) -> String {
        format!(
            "{} distinct needles ({} right in every trial, {} in none); a copier that keeps one \
             candidate per needle: one-sided exact p {}",
            self.needles,
            self.right_every_trial,
            self.right_no_trial,
            p_text(self.p_value)
        )
    }
}

/// The plan's note when one of `methods` takes its budgets from R2 scores (HeadKV) and the
/// profile's R2 answers (`test`, its `settings.retrieval_reasoning_chance`) are not above
/// chance; `None` otherwise (no R2 method, above chance, or a profile that records no test).
pub fn plan_note(test: Option<&ChanceTest>, methods: &[Method]) -> Option<String> {
    let c = test?;
    if !methods.contains(&Method::HeadKv) || (c.above_chance && c.variant.is_none()) {
        return None;
    }
    let counts = counts_text(c, "right");
    let source = match &c.variant {
        Some(v) => format!(
            "kvplan's {v} retrieval-reasoning needles, not HeadKV's (App. E): a kvplan variant"
        ),
        None => String::from("retrieval-reasoning trials"),
    };
    Some(if c.above_chance {
        format!("headkv: its head scores come from {source}, above chance ({counts})")
    } else {
        format!(
            "headkv: its head scores come from {source} that are NOT above chance ({counts}): its \
             budgets are not evidence of retrieval-reasoning heads"
        )
    })
}

/// "N of M `right` where copying … gives X; one-sided exact p …[; by needle …]": the counts plan
/// notes (`right` = "right") and table footnotes ("answered right") give.
pub fn counts_text(c: &ChanceTest, right: &str) -> String {
    format!(
        "{} of {} {right} where copying a random candidate statement gives {:.1}; one-sided exact \
         p {}{}",
        c.correct,
        c.trials,
        c.chance_correct,
        p_text(c.p_value),
        needle_text(c)
    )
}

/// "; by needle (D distinct, a copier consistent within each): p …" where the needle-level test
/// is recorded, else nothing.
fn needle_text(c: &ChanceTest) -> String {
    c.by_needle
        .as_ref()
        .map(|n| {
            format!(
                "; by needle ({} distinct, a copier consistent within each): p {}",
                n.needles,
                p_text(n.p_value)
            )
        })
        .unwrap_or_default()
}

/// A p-value as notes and table footnotes print it after "p": "= " and three decimals, or
/// "< 0.001".
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        String::from("< 0.001")
    } else {
        format!("= {p:.3}")
    }
}

fn check_counts(at: &str, correct: usize, trials: usize, accuracy: f64, p: f64) -> Result<()> {
    if correct > trials {
        return Err(Error::invalid(
            format!("{at}.correct"),
            format!("at most trials = {trials}"),
            correct,
        ));
    }
    let expected = self::accuracy(correct, trials);
    if (accuracy - expected).abs() > ACCURACY_TOLERANCE {
        return Err(Error::invalid(
            format!("{at}.accuracy"),
            format!("correct / trials = {expected}"),
            accuracy,
        ));
    }
    validate::in_range(&format!("{at}.p_value"), p, 0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileSettings;

    fn test(correct: usize, p: f64) -> ChanceTest {
        ChanceTest::new(
            50,
            correct,
            25.0,
            p,
            vec![ChanceGroup::new(2, 50, correct, p)],
        )
    }

    #[test]
    fn a_consistent_test_validates_and_summarises() {
        let t = test(16, 0.9967);
        assert!(t.validate("x").is_ok());
        assert_eq!(
            t.summary(),
            "retrieval_reasoning answers right in 16 of 50 trials (32%; copying a random \
             candidate statement gives 25.0 on average; one-sided exact p = 0.997): 2-candidate \
             needles 16 of 50 (copying: 1/2; one-sided binomial p = 0.997)"
        );
    }

    #[test]
    fn plans_using_r2_scores_carry_a_note_only_when_not_above_chance() {
        let mut settings = ProfileSettings {
            kvplan_version: String::from("0.1.0"),
            date: String::from("2026-01-01"),
            seeds: vec![0],
            haystack: String::from("none"),
            examples: 50,
            context_lengths: vec![256],
            observation_rows: 16,
            funnel_top_k: 32,
            theta_k: 0.98,
            theta_v: 0.95,
            retrieval_reasoning_chance: None,
        };
        assert_eq!(settings.reasoning_above_chance(), None);
        assert_eq!(
            plan_note(
                settings.retrieval_reasoning_chance.as_ref(),
                &[Method::HeadKv]
            ),
            None
        );
        settings.retrieval_reasoning_chance = Some(test(16, 0.9967));
        assert_eq!(settings.reasoning_above_chance(), Some(false));
        assert_eq!(
            plan_note(
                settings.retrieval_reasoning_chance.as_ref(),
                &[Method::SnapKv, Method::HeadKv]
            )
            .as_deref(),
            Some(
                "headkv: its head scores come from retrieval-reasoning trials that are NOT above \
                 chance (16 of 50 right where copying a random candidate statement gives 25.0; \
                 one-sided exact p = 0.997): its budgets are not evidence of \
                 retrieval-reasoning heads"
            )
        );
        // HeadKV-R uses the retrieval scores: no note.
        assert_eq!(
            plan_note(
                settings.retrieval_reasoning_chance.as_ref(),
                &[Method::HeadKvR]
            ),
            None
        );
        settings.retrieval_reasoning_chance = Some(test(40, 1.2e-5));
        assert_eq!(settings.reasoning_above_chance(), Some(true));
        assert_eq!(
            plan_note(
                settings.retrieval_reasoning_chance.as_ref(),
                &[Method::HeadKv]
            ),
            None
        );
    }

    #[test]
    fn plans_from_the_calibrated_variant_say_so_above_chance_or_not() {
        let note = |t: ChanceTest| plan_note(Some(&t), &[Method::HeadKv]);
        assert_eq!(
            note(test(40, 1.2e-5).of_variant("calibrated")).as_deref(),
            Some(
                "headkv: its head scores come from kvplan's calibrated retrieval-reasoning \
                 needles, not HeadKV's (App. E): a kvplan variant, above chance (40 of 50 right \
                 where copying a random candidate statement gives 25.0; one-sided exact p < \
                 0.001)"
            )
        );
        let at_chance = note(test(16, 0.9967).of_variant("calibrated")).unwrap_or_default();
        assert!(
            at_chance.contains("calibrated") && at_chance.contains("NOT above chance"),
            "{at_chance}"
        );
        assert_eq!(
            plan_note(
                Some(&test(40, 1.2e-5).of_variant("calibrated")),
                &[Method::HeadKvR]
            ),
            None
        );
        // The field is optional both ways: the authors' form writes nothing.
        let json = serde_json::to_string(&test(16, 0.9967)).unwrap_or_default();
        assert!(!json.contains("variant"), "{json}");
        let back: ChanceTest = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back.variant, None);
        let json = serde_json::to_string(&test(40, 1.2e-5).of_variant("calibrated"));
        assert!(json
            .unwrap_or_default()
            .contains(r#""variant":"calibrated""#));
    }

    fn needles(needles: usize, every: usize, none: usize, p: f64) -> NeedleTest {
        NeedleTest {
            needles,
            right_every_trial: every,
            right_no_trial: none,
            p_value: p,
        }
    }

    #[test]
    fn the_needle_level_test_can_veto_and_is_reported_where_recorded() {
        // 12 of 24 over 12 needles asked twice (profiler's hand case): 0.0072 over trials,
        // 0.0544 over needles: not above chance.
        let t = ChanceTest::new(
            24,
            12,
            6.0,
            0.0072,
            vec![ChanceGroup::new(4, 24, 12, 0.0072)],
        )
        .with_needles(needles(12, 6, 6, 0.0544));
        assert!(!t.above_chance);
        assert!(t.validate("x").is_ok());
        assert!(t
            .summary()
            .ends_with("(copying: 1/4; one-sided binomial p = 0.007)"));
        assert_eq!(
            t.by_needle.as_ref().map(NeedleTest::summary).as_deref(),
            Some(
                "12 distinct needles (6 right in every trial, 6 in none); a copier that keeps one \
                 candidate per needle: one-sided exact p = 0.054"
            )
        );
        assert_eq!(
            plan_note(Some(&t), &[Method::HeadKv]).as_deref(),
            Some(
                "headkv: its head scores come from retrieval-reasoning trials that are NOT above \
                 chance (12 of 24 right where copying a random candidate statement gives 6.0; \
                 one-sided exact p = 0.007; by needle (12 distinct, a copier consistent within \
                 each): p = 0.054): its budgets are not evidence of retrieval-reasoning heads"
            )
        );
        // Both below 0.05: above chance.
        let above = test(40, 1.2e-5).with_needles(needles(24, 14, 2, 2.0e-4));
        assert!(above.above_chance && above.validate("x").is_ok());
        // The flag must follow both p-values.
        let mut wrong = t.clone();
        wrong.above_chance = true;
        assert_eq!(
            wrong.validate("s").err().map(|e| e.to_string()).as_deref(),
            Some(
                "s.above_chance: expected p_value and by_needle.p_value both < 0.05 (false), \
                 found true"
            )
        );
        // Counts that cannot be.
        let many = test(16, 0.9967).with_needles(needles(51, 0, 0, 1.0));
        assert_eq!(
            many.validate("s").err().map(|e| e.to_string()).as_deref(),
            Some("s.by_needle.needles: expected at most trials = 50, found 51")
        );
        let split = test(16, 0.9967).with_needles(needles(24, 20, 10, 1.0));
        assert!(split.validate("s").is_err());
        // Optional both ways in JSON.
        let json = serde_json::to_string(&t).unwrap_or_default();
        assert!(json.contains(r#""by_needle":{"needles":12"#), "{json}");
        let back: ChanceTest = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, t);
        let old = serde_json::to_string(&test(16, 0.9967)).unwrap_or_default();
        assert!(!old.contains("by_needle"), "{old}");
    }

    #[test]
    fn inconsistent_counts_flag_or_groups_are_errors_naming_the_field() {
        let mut t = test(16, 0.9967);
        t.above_chance = true;
        let e = t.validate("settings.retrieval_reasoning_chance");
        assert_eq!(
            e.err().map(|e| e.to_string()).as_deref(),
            Some(
                "settings.retrieval_reasoning_chance.above_chance: expected p_value < 0.05 \
                 (false), found true"
            )
        );
        let mut t = test(16, 0.9967);
        t.accuracy = 0.5;
        assert!(t.validate("x").is_err());
        let mut t = test(16, 0.9967);
        t.by_candidates[0].correct = 15;
        t.by_candidates[0].accuracy = 0.3;
        assert_eq!(
            t.validate("x").err().map(|e| e.to_string()).as_deref(),
            Some("x.by_candidates: expected groups summing to 16 of 50, found 15 of 50")
        );
        let mut t = test(51, 0.0);
        t.accuracy = 51.0 / 50.0;
        assert!(t.validate("x").is_err());
    }
}
