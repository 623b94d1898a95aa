//! Retrieval-reasoning needles with k ≥ 4 candidate statements (HeadKV App. E's form, widened).
//!
//! The authors' R2 needles (FYYFU/HeadKV `Important_Head/haystack_for_detect_r2/needles.jsonl`)
//! compare two people, so a model that copies either statement is right half the time and a kept
//! trial may be a coin flip. These needles hold k statements of the same shape ("X's favorite
//! thing is to …", "X collects …") and a reasoning step r over all k people: a superlative (the
//! youngest / oldest, shortest / tallest, first / last to arrive among the k) or two teacher →
//! student links (B's teacher, C's student). Copying a random statement is right 1/k of the time.
//!
//! As in [`super::generated`]: facts are invented, each needle is asked both ways (App. E), the
//! facts of r, the statements and the names in the question come in drawn orders (so position
//! gives nothing away), the scored span is the whole correct statement (eq. 2), and the draw
//! depends only on the seed.

use kvplan_common::Rng;

use super::generated::{ask, statement, ACTIVITIES, COLLECTIONS, NAMES};
use super::{Check, Example};

/// Candidate statements per needle by default: copying a random one is right 1/4 of the time.
pub const DEFAULT_CANDIDATES: usize = 4;

/// The fewest candidates a widened needle has (two is the authors' own form, in
/// [`super::generated`]); the teacher links need four people.
pub const MIN_CANDIDATES: usize = 4;

/// The most: the teacher links need distinct people, and the question lists every name.
pub const MAX_CANDIDATES: usize = 8;

/// `names` as English prose in the given order: "A, B, C and D".
fn listing(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        Some((last, _)) => (*last).to_string(),
        None => String::new(),
    }
}

/// `k` distinct increasing values from `lo`, steps drawn in `step`.
fn increasing(rng: &mut Rng, k: usize, lo: u64, step: (u64, u64)) -> Vec<u64> {
    let mut v = vec![rng.int_in(lo, lo + 5)];
    for i in 1..k {
        let next = v[i - 1] + rng.int_in(step.0, step.1);
        v.push(next);
    }
    v
}

/// A needle over `k` people and its two questions: `(needle, statements, [(question, answer
/// index); 2])`; statement `i` belongs to person `i`.
type Needle = (String, Vec<(String, String)>, [(String, usize); 2]);

/// `k` people drawn from `rng`, the statements' form (0 favourite activities, 1 collections) and
/// one `(statement, key)` of that form per person: statement `i` belongs to person `i`.
pub(super) fn people(rng: &mut Rng, k: usize) -> (Vec<&'static str>, usize, Vec<(String, String)>) {
    let names: Vec<&str> = rng.sample(&NAMES, k);
    let kind = rng.below(2) as usize;
    let pool: &[&str] = if kind == 0 { &ACTIVITIES } else { &COLLECTIONS };
    let things: Vec<&str> = rng.sample(pool, k);
    let statements = names
        .iter()
        .zip(&things)
        .map(|(who, thing)| statement(kind, who, thing))
        .collect();
    (names, kind, statements)
}

/// One k-candidate needle of `template` (0 ages, 1 heights, 2 arrival times, 3 teacher links).
fn needle(rng: &mut Rng, template: usize, k: usize) -> Needle {
    let (names, kind, statements) = people(rng, k);
    let mut shown: Vec<&str> = names.clone();
    rng.shuffle(&mut shown);
    let among = listing(&shown);
    // Person i holds the i-th smallest value, so person 0 answers the "least" question and
    // person k − 1 the "most" one.
    type Fact = fn(&str, u64) -> String;
    let (values, fact, least, most): (Vec<u64>, Fact, &str, &str) = match template % 4 {
        0 => (
            increasing(rng, k, 20, (2, 9)),
            |n, v| format!("{n} is {v} years old."),
            "the youngest one",
            "the oldest one",
        ),
        1 => (
            increasing(rng, k, 150, (3, 8)),
            |n, v| format!("{n} is {v} centimeters tall."),
            "the shortest one",
            "the tallest one",
        ),
        2 => (
            increasing(rng, k, 5, (1, 2)),
            |n, v| format!("{n} arrived in town at {v} o'clock."),
            "the one who arrived first",
            "the one who arrived last",
        ),
        _ => return teacher_needle(rng, kind, &names, statements),
    };
    let facts = names
        .iter()
        .zip(&values)
        .map(|(n, &v)| fact(n, v))
        .collect();
    let questions = [
        (ask(kind, &format!("{least} among {among}")), 0),
        (ask(kind, &format!("{most} among {among}")), k - 1),
    ];
    (assemble(rng, facts, &statements), statements, questions)
}

/// Two teacher → student links over the k people: person 0 teaches person 1, person 2 teaches
/// person 3; the questions ask for person 1's teacher (person 0) and person 2's student (person
/// 3), so every named person is also a candidate that does not answer.
fn teacher_needle(
    rng: &mut Rng,
    kind: usize,
    names: &[&str],
    statements: Vec<(String, String)>,
) -> Needle {
    let facts = vec![
        format!("{} is the teacher of {}.", names[0], names[1]),
        format!("{} is the teacher of {}.", names[2], names[3]),
    ];
    let questions = [
        (ask(kind, &format!("{}'s teacher", names[1])), 0),
        (ask(kind, &format!("{}'s student", names[2])), 3),
    ];
    (assemble(rng, facts, &statements), statements, questions)
}

/// The needle text: the facts of r in a drawn order, then the statements in a drawn order.
fn assemble(rng: &mut Rng, mut facts: Vec<String>, statements: &[(String, String)]) -> String {
    rng.shuffle(&mut facts);
    let mut said: Vec<String> = statements.iter().map(|(s, _)| format!("{s}.")).collect();
    rng.shuffle(&mut said);
    format!("{} {}", facts.join(" "), said.join(" "))
}

/// `n` retrieval-reasoning examples (rounded up to pairs) whose needles hold `k` candidate
/// statements each, `k` clamped to [`MIN_CANDIDATES`]..=[`MAX_CANDIDATES`]; templates in turn,
/// values drawn from `seed`. Each needle is asked both ways.
pub fn reasoning(seed: u64, n: usize, k: usize) -> Vec<Example> {
    let k = k.clamp(MIN_CANDIDATES, MAX_CANDIDATES);
    let mut out = Vec::with_capacity(n + 1);
    for i in 0..n.div_ceil(2) {
        let mut rng = Rng::derive(seed, &[3, k as u64, i as u64]);
        let (text, statements, questions) = needle(&mut rng, i, k);
        for (j, (question, who)) in questions.into_iter().enumerate() {
            let (answer, key) = statements[who].clone();
            out.push(Example {
                id: format!("reasoning/generated-{k}way-{i}-{j}"),
                needle: text.clone(),
                question,
                answer,
                key,
                candidates: k,
                check: Check::Statement,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::metrics::qa_f1;
    use crate::needles::NeedleSet;

    #[test]
    fn needles_hold_k_statements_and_only_the_answer_passes_the_check() {
        for k in [4, 6] {
            let set = reasoning(11, 40, k);
            assert_eq!(set.len(), 40);
            for pair in set.chunks(2) {
                assert_eq!(pair[0].needle, pair[1].needle);
                assert_ne!(pair[0].answer, pair[1].answer);
                for e in pair {
                    assert_eq!(e.candidates, k);
                    assert!(e.needle.contains(&e.answer), "{}", e.id);
                    assert!(e.answer.contains(&e.key), "{}", e.id);
                    assert!(!e.question.contains(&e.key), "{}", e.id);
                    // The authors' check (QA-F1 > 0.5 against the statement): the statement
                    // itself passes; echoing the question does not.
                    assert!(qa_f1(&e.answer, &e.answer) > 0.99);
                    assert!(qa_f1(&e.question, &e.answer) <= 0.5, "{}", e.question);
                }
                // k statements of the answer's shape: the sentences that hold one of the k
                // things; copying any other one fails the check.
                let shape = if pair[0].answer.contains(" favorite thing is to ") {
                    "'s favorite thing is to "
                } else {
                    " collects "
                };
                let statements: Vec<&str> = pair[0]
                    .needle
                    .split(". ")
                    .map(|s| s.trim_end_matches('.'))
                    .filter(|s| s.contains(shape))
                    .collect();
                assert_eq!(statements.len(), k, "{}", pair[0].needle);
                for e in pair {
                    let right = statements.iter().filter(|s| **s == e.answer).count();
                    assert_eq!(right, 1, "{}", e.needle);
                    for s in statements.iter().filter(|s| **s != e.answer) {
                        assert!(qa_f1(s, &e.answer) <= 0.5, "{s} / {}", e.answer);
                    }
                }
            }
        }
    }

    #[test]
    fn superlatives_answer_the_stated_extremes() {
        // Template 0 (ages), worked on the generated text: parse every age; the youngest's
        // statement answers question 0 and the oldest's question 1.
        for pair in reasoning(5, 32, 4).chunks(2).step_by(4) {
            assert!(pair[0].question.contains("the youngest one among"));
            let ages: Vec<(&str, u64)> = pair[0]
                .needle
                .split(". ")
                .filter_map(|s| {
                    let (name, rest) = s.split_once(" is ")?;
                    Some((name, rest.strip_suffix(" years old")?.parse().ok()?))
                })
                .collect();
            assert_eq!(ages.len(), 4, "{}", pair[0].needle);
            let min = ages.iter().min_by_key(|a| a.1).map(|a| a.0).unwrap_or("");
            let max = ages.iter().max_by_key(|a| a.1).map(|a| a.0).unwrap_or("");
            assert!(pair[0].answer.starts_with(min), "{}", pair[0].needle);
            assert!(pair[1].answer.starts_with(max), "{}", pair[0].needle);
            // Every name is in the question, so naming gives nothing away.
            for (name, _) in &ages {
                assert!(pair[0].question.contains(name));
            }
        }
    }

    #[test]
    fn teacher_links_answer_through_the_relation() {
        // Template 3: "A is the teacher of B. C is the teacher of D."; B's teacher is A.
        for pair in reasoning(9, 8, 4).chunks(2).skip(3).take(1) {
            let q = &pair[0].question;
            let (who, _) = q.split_once("'s teacher").unwrap_or_else(|| panic!("{q}"));
            let student = who.rsplit(' ').next().unwrap_or("");
            let link = format!(" is the teacher of {student}.");
            let at = pair[0].needle.find(&link).unwrap_or(0);
            let teacher = pair[0].needle[..at].rsplit(['.', ' ']).next().unwrap_or("");
            assert!(!teacher.is_empty(), "{}", pair[0].needle);
            assert!(pair[0].answer.starts_with(teacher), "{}", pair[0].needle);
        }
    }

    #[test]
    fn seeded_and_interleaved_with_the_authors_two_candidate_needles() {
        assert_eq!(reasoning(1, 8, 4), reasoning(1, 8, 4));
        assert_ne!(reasoning(1, 8, 4), reasoning(2, 8, 4));
        let (_, r2) = NeedleSet::Generated {
            per_kind: 8,
            wide: 4,
        }
        .examples(0);
        let ks: Vec<usize> = r2.iter().map(|e| e.candidates).collect();
        assert_eq!(ks, [2, 2, 4, 4, 2, 2, 4, 4, 2, 2, 4, 4, 2, 2, 4, 4]);
        let (_, authors) = NeedleSet::Generated {
            per_kind: 8,
            wide: 0,
        }
        .examples(0);
        assert!(authors.iter().all(|e| e.candidates == 2));
        assert_eq!(authors.len(), 8);
    }
}
