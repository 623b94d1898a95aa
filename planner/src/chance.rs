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
//! The field is optional: profiles written before it load unchanged (no test recorded).

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
        }
    }

    /// The same test, its trials drawn from the needle `variant` (see [`ChanceTest::variant`]).
    pub fn of_variant(self, variant: &str) -> Self {
        ChanceTest {
            variant: Some(variant.to_string()),
            ..self
        }
    }

    /// One line for notes: accuracy, what copying gives and p, per candidate count.
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
        if self.above_chance != (self.p_value < CHANCE_ALPHA) {
            return Err(Error::invalid(
                format!("{at}.above_chance"),
                format!("p_value < {CHANCE_ALPHA} ({})", self.p_value < CHANCE_ALPHA),
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

/// The plan's note when one of `methods` takes its budgets from R2 scores (HeadKV) and the
/// profile's R2 answers (`test`, its `settings.retrieval_reasoning_chance`) are not above
/// chance; `None` otherwise (no R2 method, above chance, or a profile that records no test).
pub fn plan_note(test: Option<&ChanceTest>, methods: &[Method]) -> Option<String> {
    let c = test?;
    if !methods.contains(&Method::HeadKv) || (c.above_chance && c.variant.is_none()) {
        return None;
    }
    let counts = format!(
        "{} of {} right where copying a random candidate statement gives {:.1}; one-sided exact \
         p {}",
        c.correct,
        c.trials,
        c.chance_correct,
        p_text(c.p_value)
    );
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
