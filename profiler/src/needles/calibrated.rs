//! A calibrated retrieval-reasoning suite: a kvplan variant, not HeadKV's (App. E).
//!
//! HeadKV's R2 needles (App. E, Figure 9) ask a comparison ("the younger one between A and B")
//! over two statements; [`multi`](super::multi) widens them to k. A small model can fail those for
//! reasons that have nothing to do with its heads: the 1.5B at 256–512 tokens in its chat template
//! answered 16 of 50 where copying a random statement gives 19 (`results/v3/qwen2.5-coder-1.5b-
//! instruct/r2-chance/chat-256-512/`), and it answers a teacher link ("What does B's teacher
//! collect?") with B's own statement on every one of 12 probes. Trials kept from such a suite are
//! as often luck as retrieval after reasoning, so the head scores taken from them mean little.
//!
//! This suite keeps R2's shape — a reasoning step r, then k candidate statements of one form, the
//! answer being the whole statement c² (eq. 2 scores the heads on that span) — and changes what r
//! asks and how the answer is checked, so that a small model answers above the copying rate:
//!
//! - r is a bridge fact, a two-hop question: "The winner of the chess contest was Yara." and the
//!   question "What does the winner of the chess contest collect?" name no person, so the model
//!   has to go from the role to the name, then to the name's statement. Two bridge facts per
//!   needle, each asked once (App. E's "both ways": a model that copies one statement gets at most
//!   one of the pair); k statements, two of them the bridged people's, so copying a random one is
//!   right 1/k of the time.
//! - The check is [`Check::OnlyKey`]: the response names the answering statement's distinguishing
//!   phrase word for word and no other candidate's, whatever else it says. The authors' QA-F1 > 0.5
//!   against the whole statement scores a right answer that restates the question ("The winner of
//!   the chess contest collected old train tickets …") below the threshold.
//!
//! Which form a model answers has to be measured on held-out needles at FullKV before head scores
//! are taken from it (`kvplan profile --needles calibrated`, its chance test); facts are invented
//! and the draw depends only on the seed, as in [`generated`](super::generated).

use kvplan_common::Rng;

use super::generated::ask;
use super::multi::{people, MAX_CANDIDATES, MIN_CANDIDATES};
use super::{Check, Example};

/// A bridge template: the role's phrase for one value, and the fact binding it to a person.
struct Bridge {
    values: &'static [&'static str],
    role: fn(&str) -> String,
    fact: fn(&str, &str) -> String,
}

/// The bridge templates, taken in turn.
const BRIDGES: [Bridge; 4] = [
    Bridge {
        values: &[
            "chess",
            "baking",
            "rowing",
            "poetry",
            "kite",
            "sandcastle",
            "spelling",
        ],
        role: |v| format!("the winner of the {v} contest"),
        fact: |v, who| format!("The winner of the {v} contest was {who}."),
    },
    Bridge {
        values: &[
            "rowing", "football", "debate", "hockey", "sailing", "cricket",
        ],
        role: |v| format!("the captain of the {v} team"),
        fact: |v, who| format!("The captain of the {v} team is {who}."),
    },
    Bridge {
        values: &["red", "green", "yellow", "blue", "white", "grey"],
        role: |v| format!("the person who lives in the {v} house"),
        fact: |v, who| format!("{who} lives in the {v} house."),
    },
    Bridge {
        values: &["orange", "black", "striped", "wooden", "silver", "narrow"],
        role: |v| format!("the owner of the {v} boat"),
        fact: |v, who| format!("The {v} boat belongs to {who}."),
    },
];

/// `n` calibrated retrieval-reasoning examples (rounded up to pairs), `k` candidate statements
/// each (clamped to [`MIN_CANDIDATES`]..=[`MAX_CANDIDATES`]); templates in turn, values drawn
/// from `seed`. Each needle holds two bridge facts and is asked once about each.
pub fn reasoning(seed: u64, n: usize, k: usize) -> Vec<Example> {
    let k = k.clamp(MIN_CANDIDATES, MAX_CANDIDATES);
    let mut out = Vec::with_capacity(n + 1);
    for i in 0..n.div_ceil(2) {
        let mut rng = Rng::derive(seed, &[4, k as u64, i as u64]);
        let bridge = &BRIDGES[i % BRIDGES.len()];
        let (names, kind, statements) = people(&mut rng, k);
        // Persons 0 and 1 are bridged; the others are candidates no question asks for.
        let values: Vec<&str> = rng.sample(bridge.values, 2);
        let mut facts: Vec<String> = (0..2).map(|j| (bridge.fact)(values[j], names[j])).collect();
        rng.shuffle(&mut facts);
        let mut said: Vec<String> = statements.iter().map(|(s, _)| format!("{s}.")).collect();
        rng.shuffle(&mut said);
        let needle = format!("{} {}", facts.join(" "), said.join(" "));
        for (j, value) in values.iter().enumerate() {
            let (answer, key) = statements[j].clone();
            let others = statements
                .iter()
                .enumerate()
                .filter(|&(o, _)| o != j)
                .map(|(_, (_, key))| key.clone())
                .collect();
            out.push(Example {
                id: format!("reasoning/calibrated-{k}way-{i}-{j}"),
                needle: needle.clone(),
                question: ask(kind, &(bridge.role)(value)),
                answer,
                key,
                candidates: k,
                check: Check::OnlyKey(others),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::metrics::names_only;
    use crate::needles::generated::NAMES;

    #[test]
    fn each_question_names_a_role_the_needle_binds_to_one_candidate() {
        for k in [4, 6] {
            let set = reasoning(3, 24, k);
            assert_eq!(set.len(), 24);
            for pair in set.chunks(2) {
                assert_eq!(pair[0].needle, pair[1].needle);
                assert_ne!(pair[0].key, pair[1].key);
                for e in pair {
                    assert_eq!(e.candidates, k);
                    assert!(e.needle.contains(&format!("{}.", e.answer)), "{}", e.id);
                    // No person is named in the question: the role has to be resolved.
                    for name in NAMES {
                        assert!(!e.question.contains(name), "{}", e.question);
                    }
                    // The answering person is the one the needle binds to the asked role:
                    // worked on the text, the bridge fact holding the role's value names them.
                    let who = e.answer.split(['\'', ' ']).next().unwrap_or("");
                    let bound = e
                        .needle
                        .split(". ")
                        .filter(|s| !s.contains(" collects ") && !s.contains(" favorite "))
                        .find(|s| {
                            let value = BRIDGES
                                .iter()
                                .flat_map(|b| b.values.iter())
                                .find(|v| e.question.contains(&format!(" {v} ")));
                            value.is_some_and(|v| s.contains(&format!(" {v} ")))
                        })
                        .unwrap_or("");
                    assert!(bound.contains(who), "{} / {}", e.question, e.needle);
                    // k statements; the check takes the answer's phrase only, alone.
                    let Check::OnlyKey(others) = &e.check else {
                        panic!("{}: not the calibrated check", e.id)
                    };
                    assert_eq!(others.len(), k - 1);
                    assert!(names_only(&e.answer, &e.key, others));
                    let restated = e.question.replace('?', &format!(" {}", e.key));
                    assert!(names_only(&restated, &e.key, others), "{restated}");
                    for o in others {
                        assert!(e.needle.contains(o.as_str()), "{o}");
                        assert!(!names_only(o, &e.key, others));
                    }
                }
            }
        }
    }

    #[test]
    fn seeded_and_templates_in_turn() {
        assert_eq!(reasoning(1, 8, 4), reasoning(1, 8, 4));
        assert_ne!(reasoning(1, 8, 4), reasoning(2, 8, 4));
        let set = reasoning(0, 8, 4);
        for (pair, role) in set
            .chunks(2)
            .zip(["winner", "captain", "lives in", "owner"])
        {
            assert!(pair[0].question.contains(role), "{}", pair[0].question);
        }
    }
}
