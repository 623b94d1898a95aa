//! A larger, seeded needle set built from templates with varied names and values (HeadKV §3.1,
//! App. E): the retrieval kind of Wu et al. (one invented fact, asked directly) and the
//! retrieval-reasoning kinds of App. E — comparisons (Figure 9's "the younger one between John and
//! Mary", and taller/shorter, earlier/later) and two-hop facts (a relation r that names whose
//! statement answers). Every reasoning needle is asked both ways (App. E: "we reverse the question
//! to create a total of two Retrieval-Reasoning examples"), so the two statements c¹ and c² swap
//! roles between the pair.
//!
//! Scoring is unchanged: the answer span is the whole correct statement c² (eq. 2) or the whole
//! retrieval statement (eq. 1), and the response is checked against the example's `key` (the
//! words that answer) with the authors' metrics. Facts are invented (made-up towns, names and
//! combinations), so only the haystack can answer them. The draw depends only on the seed.

use kvplan_common::Rng;

use super::{Check, Example};

/// First names; the set mixes origins so that no name hints at an answer.
pub(super) const NAMES: [&str; 32] = [
    "Lena", "Omar", "Ines", "Pavel", "Amara", "Tobias", "Keiko", "Rafael", "Noor", "Dmitri",
    "Sofia", "Kwame", "Elif", "Marcus", "Ingrid", "Tariq", "Yara", "Felix", "Mei", "Jonas",
    "Leila", "Bruno", "Anika", "Hugo", "Zanele", "Oskar", "Priya", "Mateo", "Freya", "Idris",
    "Clara", "Emeka",
];

/// Invented town names (no model can know a fact about them).
const TOWNS: [&str; 12] = [
    "Varnholm",
    "Quillby",
    "Ostrava Nova",
    "Bellmere",
    "Kettleford",
    "Sarnowice",
    "Drumlee",
    "Port Aldane",
    "Hesketh Vale",
    "Lowmarsh",
    "Tiverlin",
    "Cobbenford",
];

/// Activities a statement can attribute ("to …").
pub(super) const ACTIVITIES: [&str; 16] = [
    "paint small boats at the harbor every Sunday morning",
    "bake sourdough bread and share it with the neighbors",
    "play chess in the park with retired sailors",
    "grow tomatoes on a tiny balcony garden",
    "swim in the cold lake before sunrise",
    "repair old radios in a workshop behind the bakery",
    "read detective novels under a walnut tree",
    "dance tango at the community hall on Fridays",
    "knit thick scarves for the winter market",
    "climb the red cliffs north of the village",
    "photograph owls in the forest at dusk",
    "sing in a choir that rehearses in an empty church",
    "build model trains from scraps of tin",
    "cook spicy lentil soup for friends",
    "ride a green bicycle along the canal",
    "write letters to pen pals on three continents",
];

/// Things a person collects.
pub(super) const COLLECTIONS: [&str; 12] = [
    "old train tickets from every city visited",
    "blue glass bottles that wash up on the beach",
    "copper keys from houses that no longer exist",
    "postcards showing lighthouses at night",
    "buttons cut from military coats",
    "seeds of rare mountain flowers",
    "maps of towns drawn by children",
    "stones with a single white stripe",
    "menus from restaurants that have closed",
    "feathers of birds found in the city",
    "tin boxes that once held peppermints",
    "recordings of church bells",
];

/// Secret ingredients of an invented dish.
const INGREDIENTS: [&str; 10] = [
    "a spoonful of roasted pumpkin seeds",
    "a pinch of smoked sea salt",
    "three leaves of fresh lemon balm",
    "a splash of cold black tea",
    "grated dark chocolate",
    "a drop of rose water",
    "crushed juniper berries",
    "a handful of toasted oats",
    "a strip of dried orange peel",
    "a teaspoon of wild honey",
];

const DISHES: [&str; 6] = ["soup", "stew", "pie", "bread", "curry", "porridge"];
const ADJECTIVES: [&str; 10] = [
    "purple", "silent", "golden", "frozen", "crooked", "hollow", "velvet", "restless", "amber",
    "northern",
];
const NOUNS: [&str; 10] = [
    "elephant", "lantern", "harbor", "violin", "meadow", "compass", "falcon", "orchard", "anchor",
    "thimble",
];
const NUMBER_WORDS: [&str; 10] = [
    "seventeen",
    "forty two",
    "ninety",
    "eleven",
    "sixty three",
    "twenty eight",
    "thirty one",
    "eighty five",
    "fifty",
    "nineteen",
];
const PLACES: [&str; 6] = [
    "old lighthouse archive",
    "river museum vault",
    "abandoned observatory",
    "town hall basement",
    "mountain hut",
    "library tower",
];

fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[rng.below(items.len() as u64) as usize]
}

/// Two distinct entries of `items`.
fn pick_two<'a>(rng: &mut Rng, items: &[&'a str]) -> (&'a str, &'a str) {
    let i = rng.sample_indices(items.len(), 2);
    (items[i[0]], items[i[1]])
}

/// The retrieval statement templates (Wu et al.'s kind): `(needle, question, key)`, where the
/// needle is the statement (the answer span) and `key` its answering words.
fn retrieval_fact(rng: &mut Rng, template: usize) -> (String, String, String) {
    match template % 4 {
        0 => {
            let (who, dish) = (pick(rng, &NAMES), pick(rng, &DISHES));
            let key = pick(rng, &INGREDIENTS).to_string();
            (
                format!("The secret ingredient in Grandma {who}'s famous {dish} is {key}"),
                format!("What is the secret ingredient in Grandma {who}'s famous {dish}?"),
                key,
            )
        }
        1 => {
            let place = pick(rng, &PLACES);
            let key = format!(
                "{} {} {}",
                pick(rng, &ADJECTIVES),
                pick(rng, &NOUNS),
                pick(rng, &NUMBER_WORDS)
            );
            (
                format!("The password to the {place} is {key}"),
                format!("What is the password to the {place}?"),
                key,
            )
        }
        2 => {
            let town = pick(rng, &TOWNS);
            let key = pick(rng, &ACTIVITIES).to_string();
            (
                format!("The best thing to do in {town} is to {key}"),
                format!("What is the best thing to do in {town}?"),
                key,
            )
        }
        _ => {
            let (who, town) = (pick(rng, &NAMES), pick(rng, &TOWNS));
            let key = pick(rng, &COLLECTIONS).to_string();
            (
                format!("The mayor of {town}, {who}, collects {key}"),
                format!("What does the mayor of {town} collect?"),
                key,
            )
        }
    }
}

/// `n` retrieval examples (templates in turn, values drawn from `seed`).
pub fn retrieval(seed: u64, n: usize) -> Vec<Example> {
    (0..n)
        .map(|i| {
            let mut rng = Rng::derive(seed, &[1, i as u64]);
            let (statement, question, key) = retrieval_fact(&mut rng, i);
            Example {
                id: format!("retrieval/generated-{i}"),
                needle: format!("{statement}."),
                question,
                answer: statement,
                key,
                candidates: 1,
                check: Check::Statement,
            }
        })
        .collect()
}

/// A retrieval-reasoning needle: the reasoning step r followed by the two statements, and the two
/// questions; `questions[i]` is answered by `statements[i]` (its c²), the other being its c¹.
struct ReasoningNeedle {
    needle: String,
    statements: [(String, String); 2],
    questions: [String; 2],
}

/// The statement "`who` …" of `kind` with its answering words.
pub(super) fn statement(kind: usize, who: &str, thing: &str) -> (String, String) {
    if kind.is_multiple_of(2) {
        (
            format!("{who}'s favorite thing is to {thing}"),
            thing.to_string(),
        )
    } else {
        (format!("{who} collects {thing}"), thing.to_string())
    }
}

/// The question part asking for the statement of `whom`, in the form the statements take.
pub(super) fn ask(kind: usize, whom: &str) -> String {
    if kind.is_multiple_of(2) {
        format!("What is the favorite thing of {whom}?")
    } else {
        format!("What does {whom} collect?")
    }
}

/// A comparison needle's template (App. E): the smaller value is drawn in `value`, the larger
/// `gap` above it; `fact` states a person's value, and the questions ask for `lower` and
/// `higher`.
struct Comparison {
    value: (u64, u64),
    gap: (u64, u64),
    fact: fn(&str, u64) -> String,
    lower: &'static str,
    higher: &'static str,
}

/// The comparison templates: age (Figure 9), height and arrival time. Reasoning needle `i` is
/// comparison `i % 4`, or the two-hop needle where `i % 4 = 3`.
const COMPARISONS: [Comparison; 3] = [
    Comparison {
        value: (20, 60),
        gap: (2, 15),
        fact: |who, x| format!("{who} is {x} years old."),
        lower: "the younger one",
        higher: "the older one",
    },
    Comparison {
        value: (150, 175),
        gap: (4, 20),
        fact: |who, x| format!("{who} is {x} centimeters tall."),
        lower: "the shorter one",
        higher: "the taller one",
    },
    Comparison {
        value: (6, 10),
        gap: (1, 3),
        fact: |who, x| format!("{who} arrived in town at {x} o'clock."),
        lower: "the one who arrived earlier",
        higher: "the one who arrived later",
    },
];

/// One comparison or two-hop needle. `questions[0]` is answered by `statements[0]`.
fn reasoning_needle(rng: &mut Rng, template: usize) -> ReasoningNeedle {
    let (a, b) = pick_two(rng, &NAMES);
    let kind = rng.below(2) as usize;
    let things = if kind == 0 {
        pick_two(rng, &ACTIVITIES)
    } else {
        pick_two(rng, &COLLECTIONS)
    };
    let (sa, sb) = (statement(kind, a, things.0), statement(kind, b, things.1));
    let Some(c) = COMPARISONS.get(template % 4) else {
        // The two-hop needle.
        let r = format!("{a} is the teacher of {b}.");
        let q0 = ask(kind, &format!("{b}'s teacher"));
        let q1 = ask(kind, &format!("{a}'s student"));
        return finish(rng, r, [sa, sb], [q0, q1]);
    };
    // `a` has the smaller value; the first question asks for them. The two facts of r come in
    // a drawn order, so being named first gives nothing away.
    let x = rng.int_in(c.value.0, c.value.1);
    let y = x + rng.int_in(c.gap.0, c.gap.1);
    let (fa, fb) = ((c.fact)(a, x), (c.fact)(b, y));
    let r = if rng.below(2) == 0 {
        format!("{fa} {fb}")
    } else {
        format!("{fb} {fa}")
    };
    let q0 = ask(kind, &format!("{} between {a} and {b}", c.lower));
    let q1 = ask(kind, &format!("{} between {a} and {b}", c.higher));
    finish(rng, r, [sa, sb], [q0, q1])
}

/// The needle text: the reasoning step, then both statements in a drawn order (so position
/// does not give the answer away).
fn finish(
    rng: &mut Rng,
    r: String,
    statements: [(String, String); 2],
    questions: [String; 2],
) -> ReasoningNeedle {
    let order = if rng.below(2) == 0 { [0, 1] } else { [1, 0] };
    let needle = format!(
        "{r} {}. {}.",
        statements[order[0]].0, statements[order[1]].0
    );
    ReasoningNeedle {
        needle,
        statements,
        questions,
    }
}

/// `n` retrieval-reasoning examples (n rounded up to pairs): each needle asked both ways.
pub fn reasoning(seed: u64, n: usize) -> Vec<Example> {
    let mut out = Vec::with_capacity(n + 1);
    for i in 0..n.div_ceil(2) {
        let mut rng = Rng::derive(seed, &[2, i as u64]);
        let rn = reasoning_needle(&mut rng, i);
        for (j, (question, (answer, key))) in rn.questions.iter().zip(&rn.statements).enumerate() {
            out.push(Example {
                id: format!("reasoning/generated-{i}-{j}"),
                needle: rn.needle.clone(),
                question: question.clone(),
                answer: answer.clone(),
                key: key.clone(),
                candidates: 2,
                check: Check::Statement,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::metrics::{qa_f1, rouge1_recall};

    fn check_invariants(examples: &[Example]) {
        for e in examples {
            assert!(e.needle.contains(&e.answer), "{}: {}", e.id, e.needle);
            assert!(e.answer.contains(&e.key), "{}", e.id);
            assert!(!e.question.contains(&e.key), "{}", e.id);
        }
    }

    #[test]
    fn sets_are_large_seeded_and_consistent() {
        let r = retrieval(0, 24);
        let q = reasoning(0, 24);
        assert_eq!((r.len(), q.len()), (24, 24));
        check_invariants(&r);
        check_invariants(&q);
        // Distinct needles: at least 20 per kind (reasoning needles come in pairs).
        let mut needles: Vec<&str> = r.iter().map(|e| e.needle.as_str()).collect();
        needles.sort_unstable();
        needles.dedup();
        assert!(needles.len() >= 20, "{}", needles.len());
        assert_eq!(retrieval(0, 24), r);
        assert_ne!(retrieval(1, 24), r);
    }

    #[test]
    fn reasoning_pairs_swap_correct_and_distractor_statements() {
        for pair in reasoning(7, 40).chunks(2) {
            assert_eq!(pair[0].needle, pair[1].needle);
            assert_ne!(pair[0].answer, pair[1].answer);
            // Each pair's distractor c¹ is the other's answer c², and both are in the needle.
            assert!(pair[0].needle.contains(&pair[1].answer));
            // The distractor does not pass the authors' check (QA-F1 > 0.5 against the answer
            // statement, `qa_f1_score(response, self.answer)`), nor does echoing the question.
            assert!(
                qa_f1(&pair[1].answer, &pair[0].answer) <= 0.5,
                "{}",
                pair[0].id
            );
            assert!(
                qa_f1(&pair[0].question, &pair[0].answer) <= 0.5,
                "{}",
                pair[0].id
            );
            assert_eq!((pair[0].candidates, pair[1].candidates), (2, 2));
        }
    }

    #[test]
    fn no_two_statements_of_one_shape_pass_for_each_other() {
        // Every pair of things a needle can hold (any two people): copying the wrong statement
        // scores QA-F1 ≤ 0.5 against the right one, so a kept trial names the right thing.
        for (kind, pool) in [(0, &ACTIVITIES[..]), (1, &COLLECTIONS[..])] {
            for (i, a) in pool.iter().enumerate() {
                for b in &pool[i + 1..] {
                    let (sa, _) = statement(kind, "Lena", a);
                    let (sb, _) = statement(kind, "Omar", b);
                    assert!(qa_f1(&sb, &sa) <= 0.5, "{sa} / {sb}");
                }
            }
        }
    }

    #[test]
    fn comparison_answers_follow_the_stated_values() {
        // Template 0 (ages): the younger is `a`, whose statement answers question 0. Worked by
        // hand on the generated text: parse both ages and check which name the answer names.
        for pair in reasoning(3, 16).chunks(2).step_by(4) {
            let (needle, ask_younger) = (&pair[0].needle, &pair[0].question);
            assert!(ask_younger.contains("younger"), "{ask_younger}");
            let ages: Vec<(&str, u64)> = needle
                .split(". ")
                .filter_map(|s| {
                    let (name, rest) = s.split_once(" is ")?;
                    Some((name, rest.strip_suffix(" years old")?.parse().ok()?))
                })
                .collect();
            assert_eq!(ages.len(), 2, "{needle}");
            let younger = if ages[0].1 < ages[1].1 {
                ages[0].0
            } else {
                ages[1].0
            };
            assert!(
                pair[0].answer.starts_with(younger),
                "{needle} / {}",
                pair[0].answer
            );
        }
    }

    #[test]
    fn a_verbatim_answer_scores_full_marks() {
        for e in retrieval(5, 8).iter().chain(&reasoning(5, 8)) {
            assert_eq!(rouge1_recall(&e.answer, &e.key), 1.0, "{}", e.id);
            assert!(qa_f1(&e.key, &e.key) > 0.99, "{}", e.id);
        }
    }
}
