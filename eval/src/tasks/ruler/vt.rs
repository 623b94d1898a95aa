//! RULER's variable tracking, `vt` (`data/synthetic/variable_tracking.py`, template and answer
//! prefix from `data/synthetic/constants.py`, `num_chains: 1`, `num_hops: 4` from
//! `synthetic.yaml`).
//!
//! A chain `VAR A = 12345`, `VAR B = VAR A`, … (five variables of five capital letters) is
//! scattered, in order, among repeated noise sentences; the question asks for every variable
//! holding the number. As RULER does by default, a one-shot example goes first: a chain of
//! three-letter variables in noise sized to 500 tokens, with its answer, its variable names
//! redrawn for each example. Score: `string_match_all` of the five names.
//!
//! Differences from RULER: the one-shot example is sized by the same tokenizer, bisected
//! rather than grown by five noises; the smallest size is five noise sentences (RULER's
//! fallback for fewer, splitting the noise into sentences, is not needed at these lengths).

use super::{fill, largest, Built, Framer};
use crate::rng::Rng;
use crate::Result;

/// RULER's `variable_tracking` template.
pub const TEMPLATE: &str = "Memorize and track the chain(s) of variable assignment hidden in \
the following text.\n\n{context}\nQuestion: Find all variables that are assigned the value \
{query} in the text above.";
/// RULER's `variable_tracking` answer prefix (its spelling kept).
pub const ANSWER_PREFIX: &str = " Answer: According to the chain(s) of variable assignment in \
the text above, {num_v} variables are assgined the value {query}, they are: ";
/// The noise sentence.
pub const NOISE: &str =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n";
/// RULER's `tokens_to_generate` for `variable_tracking`.
pub const TOKENS_TO_GENERATE: usize = 30;
/// Hops per chain (`synthetic.yaml`).
pub const NUM_HOPS: usize = 4;
/// Chains (`synthetic.yaml`).
pub const NUM_CHAINS: usize = 1;
/// Length of the one-shot example (RULER's `max_seq_length=500`).
pub const ICL_LENGTH: usize = 500;
/// The fewest noise sentences: one per assignment.
pub const MIN_NOISES: usize = NUM_HOPS + 1;
/// Stream of the one-shot example, apart from every task's.
const ICL_STREAM: u64 = 0x1C1;

/// Variables and assignments of each chain (`generate_chains`).
fn chains(rng: &mut Rng, is_icl: bool) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let letters = if is_icl { 3 } else { 5 };
    let mut names: Vec<String> = Vec::new();
    while names.len() < (NUM_HOPS + 1) * NUM_CHAINS {
        let n = rng.uppercase(letters);
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let mut vars = Vec::new();
    let mut chains = Vec::new();
    for v in names.chunks(NUM_HOPS + 1) {
        let mut chain = vec![format!("VAR {} = {}", v[0], rng.int_in(10_000, 99_998))];
        for j in 0..NUM_HOPS {
            chain.push(format!("VAR {} = VAR {} ", v[j + 1], v[j]));
        }
        vars.push(v.to_vec());
        chains.push(chain);
    }
    (vars, chains)
}

/// The task with `num_noises` noise sentences (`generate_input_output`).
fn text(rng: &mut Rng, num_noises: usize, is_icl: bool) -> Built {
    let (vars, chains) = chains(rng, is_icl);
    let mut sentences = vec![NOISE.to_string(); num_noises.max(MIN_NOISES)];
    for chain in &chains {
        let mut at = rng.sample_indices(sentences.len(), chain.len());
        at.sort_unstable();
        for (j, (p, assignment)) in at.iter().zip(chain).enumerate() {
            sentences.insert(p + j, assignment.clone());
        }
    }
    let context = sentences.join(" ").replace(". \n", ".\n");
    let value = chains[0][0]
        .rsplit('=')
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    let num_v = (NUM_HOPS + 1).to_string();
    Built {
        user: fill(TEMPLATE, &[("context", &context), ("query", &value)]),
        answer_prefix: fill(ANSWER_PREFIX, &[("num_v", &num_v), ("query", &value)]),
        answers: vars[0].clone(),
        query: value,
    }
}

/// The one-shot example of a run seeded `seed`: task, answer prefix and answer, at most
/// [`ICL_LENGTH`] tokens with its [`TOKENS_TO_GENERATE`], then a blank line.
pub fn icl(seed: u64, framer: &dyn Framer) -> Result<String> {
    let render = |noises: usize| {
        let b = text(&mut Rng::derive(seed, &[ICL_STREAM]), noises, true);
        format!("{}{} {}", b.user, b.answer_prefix, b.answers.join(" "))
    };
    let budget = ICL_LENGTH - TOKENS_TO_GENERATE;
    let noises = largest(MIN_NOISES, ICL_LENGTH, |n| {
        Ok(framer.count(&render(n))? <= budget)
    })?
    .unwrap_or(MIN_NOISES);
    Ok(format!("{}\n\n", render(noises)))
}

/// The one-shot example with its answer's variables renamed (`randomize_icl`).
fn randomize_icl(icl: &str, rng: &mut Rng) -> String {
    let tail = &ANSWER_PREFIX[ANSWER_PREFIX.len() - 10..];
    let Some(cut) = icl.find(tail) else {
        return icl.to_string();
    };
    let targets: Vec<String> = icl[cut + tail.len()..]
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut out = icl.to_string();
    for t in targets {
        out = out.replace(&t, &rng.uppercase(t.len()));
    }
    out
}

/// The example with `num_noises` noise sentences after the one-shot example `icl`.
pub fn build(icl: &str, num_noises: usize, rng: &mut Rng) -> Built {
    let shown = randomize_icl(icl, rng);
    let b = text(rng, num_noises, false);
    Built {
        user: format!(" {shown}\n\n{}", b.user),
        ..b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::ruler::tests::{assert_fills, at, Words};
    use crate::tasks::ruler::{generate, score, Sources, Task};

    #[test]
    fn chain_is_in_order_among_the_noise_and_answers_are_its_variables() {
        let b = text(&mut Rng::new(4), 40, false);
        assert_eq!(b.answers.len(), 5);
        assert!(b.answers.iter().all(|v| v.len() == 5));
        let first = format!("VAR {} = {}", b.answers[0], b.query);
        let mut at = b.user.find(&first).expect("first assignment");
        for w in b.answers.windows(2) {
            let hop = format!("VAR {} = VAR {} ", w[1], w[0]);
            let next = b.user.find(&hop).expect("hop");
            assert!(next > at, "assignments in order");
            at = next;
        }
        assert_eq!(b.user.matches("The grass is green.").count(), 40);
        assert!(b.user.starts_with(
            "Memorize and track the chain(s) of variable assignment hidden in the following \
             text.\n\n"
        ));
        assert!(b.user.ends_with(&format!(
            "\nQuestion: Find all variables that are assigned the value {} in the text above.",
            b.query
        )));
        assert_eq!(
            b.answer_prefix,
            format!(
                " Answer: According to the chain(s) of variable assignment in the text above, \
                 5 variables are assgined the value {}, they are: ",
                b.query
            )
        );
        let v: u32 = b.query.parse().expect("a number");
        assert!((10_000..=99_998).contains(&v));
    }

    #[test]
    fn one_shot_example_comes_first_with_its_answer_and_fresh_names() {
        let icl = icl(0, &Words).expect("icl");
        assert!(Words.count(&icl).expect("count") + TOKENS_TO_GENERATE <= ICL_LENGTH);
        assert!(icl.starts_with("Memorize and track") && icl.ends_with("\n\n"));
        let b = build(&icl, 30, &mut Rng::new(9));
        assert!(b.user.starts_with(" Memorize and track"));
        assert_eq!(b.user.matches("Memorize and track").count(), 2);
        // The example's answer: three-letter names after "they are:".
        let shown = &b.user[..b.user.rfind("Memorize").expect("task")];
        let names: Vec<&str> = shown
            .rsplit("they are: ")
            .next()
            .expect("answer")
            .split_whitespace()
            .collect();
        assert_eq!(names.len(), 5);
        assert!(names.iter().all(|n| n.len() == 3));
        assert!(shown.contains(&format!("VAR {} = VAR {} ", names[1], names[0])));
        let again = build(&icl, 30, &mut Rng::new(10));
        assert_ne!(
            shown,
            &again.user[..again.user.rfind("Memorize").expect("task")]
        );
    }

    #[test]
    fn vt_scores_the_share_of_variables_named() {
        let answers: Vec<String> = ["ABCDE", "FGHIJ", "KLMNO", "PQRST", "UVWXY"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            score(Task::Vt, "ABCDE FGHIJ KLMNO PQRST UVWXY", &answers),
            1.0
        );
        assert_eq!(score(Task::Vt, " abcde, fghij, zzzzz", &answers), 0.4);
    }

    #[test]
    fn vt_fills_the_length_to_within_a_noise_sentence() {
        let sources = Sources::in_memory(None, None, None, None);
        let ex = generate(Task::Vt, &sources, &Words, at(2048, 0, 1)).expect("fits");
        let noise = Words.count(NOISE).expect("count");
        assert_fills(ex.tokens, 2048 - TOKENS_TO_GENERATE, noise + 1);
    }
}
