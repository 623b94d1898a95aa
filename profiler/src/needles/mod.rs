//! Needle examples and their prompts (HeadKV §3.1, App. E; Wu et al.).
//!
//! - Retrieval examples: a question the model cannot answer from its own knowledge; the needle
//!   sentence states the answer. The expected answer is the needle sentence itself (as in the
//!   original needle test, whose ROUGE reference is the whole needle): small models restate the
//!   question before answering, so the scored span (eq. 1) is the statement, not its last words.
//! - Retrieval-reasoning examples (App. E, Figure 9): a needle of a reasoning step r and two
//!   statements of the same shape, one answering the question (c²) and one not (c¹); the scored
//!   span of eq. 2 is the whole statement c², as in Figure 9. Each pair asks both ways (the
//!   question reversed swaps c¹ and c²). Copying either statement is right half the time, so the
//!   generated set also holds needles with k ≥ 4 statements of the same shape ([`multi`]), where
//!   copying a random one is right 1/k of the time; each example records its k.
//!
//! Retrieval responses are checked against each example's `key` — the words that answer, without
//! the part that restates the question (Wu et al.'s `real_needle`) — so a response that only
//! echoes the question does not count. Retrieval-reasoning responses are checked against the whole
//! statement `answer`, as the authors' `retrieval_head_detection_r2.py` does
//! (`qa_f1_score(response, self.answer)`, the `answer` of its `needles.jsonl` being the statement).
//!
//! The facts are invented, so only the haystack can answer them. Prompts end
//! "…Question: …\nAnswer:" as in the authors' code; see [`PromptStyle`] and [`placement`].

pub mod calibrated;
pub mod generated;
pub mod multi;
pub mod placement;

use serde::{Deserialize, Serialize};

/// One needle example: the text inserted, the question and the answer the model should give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// Short identifier recorded with each trial.
    pub id: String,
    /// The needle inserted into the haystack.
    pub needle: String,
    /// The question asked after the haystack.
    pub question: String,
    /// The statement that answers, verbatim in the needle: the scored span (eq. 1–2) and the
    /// decode budget (as many tokens as it has).
    pub answer: String,
    /// The words that actually answer (Wu et al.'s `real_needle`), inside `answer`: the check of
    /// a retrieval response is against these, so restating the question earns nothing.
    pub key: String,
    /// Statements of the answer's shape in the needle (1 for retrieval, 2 for the authors'
    /// comparisons, k for [`multi`]'s): copying a random one is right 1/`candidates` of the time.
    pub candidates: usize,
    /// How a retrieval-reasoning response is checked (retrieval ones always against `key`).
    pub check: Check,
}

/// How a retrieval-reasoning response is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The authors' (`retrieval_head_detection_r2.py`): QA-F1 against the whole statement
    /// `answer` above 0.5.
    Statement,
    /// The calibrated suite's ([`calibrated`], kvplan's): the response holds `key` word for word
    /// and none of these, the other candidates' keys — a response that restates the question
    /// before answering is judged by what it names, one that names every candidate is wrong.
    OnlyKey(Vec<String>),
}

/// Which needle examples a profile runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NeedleSet {
    /// The seven hand-written examples below (3 retrieval, 4 retrieval-reasoning comparisons).
    Classic,
    /// `per_kind` examples of each kind drawn from [`generated`]'s templates with the profile's
    /// seed (retrieval facts; comparisons and two-hop facts, each asked both ways). With `wide`
    /// ≥ 4, `per_kind` more retrieval-reasoning examples whose needles hold `wide` candidate
    /// statements ([`multi`]) come in turn with the two-candidate ones, a pair of each at a time;
    /// `wide` = 0 keeps the authors' two-candidate form only.
    Generated { per_kind: usize, wide: usize },
    /// kvplan's calibrated variant ([`calibrated`]): the generated retrieval examples, and
    /// `per_kind` retrieval-reasoning examples whose needles bind two roles to two of `k`
    /// candidates (two-hop questions naming no person), checked on the answer's phrase alone.
    Calibrated { per_kind: usize, k: usize },
}

/// Examples per kind of the generated set by default (HeadKV App. E asks for variety; ≥ 20).
pub const DEFAULT_GENERATED_PER_KIND: usize = 24;

impl NeedleSet {
    /// One line for the profile's notes: which examples ran.
    pub fn describe(self) -> String {
        match self {
            NeedleSet::Classic => {
                "the seven hand-written examples (3 retrieval, 4 retrieval-reasoning comparisons)"
                    .into()
            }
            NeedleSet::Generated { per_kind, wide } => {
                let wide = if wide == 0 {
                    String::new()
                } else {
                    format!(
                        ", and {per_kind} more retrieval-reasoning examples whose needles hold \
                         {wide} candidate statements, a pair of each form in turn"
                    )
                };
                format!(
                    "{per_kind} seeded examples per kind from templates (retrieval: single facts \
                     with varied names and values; retrieval-reasoning: comparisons and two-hop \
                     facts between two people, each needle asked both ways{wide}), taken in turn \
                     over the (length, depth) grid"
                )
            }
            NeedleSet::Calibrated { per_kind, k } => format!(
                "{per_kind} seeded examples per kind (retrieval: single facts from templates; \
                 retrieval-reasoning: kvplan's calibrated variant, not HeadKV's — two bridge \
                 facts binding roles to two of {k} candidate statements, each role asked once \
                 without naming anyone, a response right when it names the answer's phrase and \
                 no other candidate's), taken in turn over the (length, depth) grid"
            ),
        }
    }

    /// The retrieval and the retrieval-reasoning examples of this set.
    pub fn examples(self, seed: u64) -> (Vec<Example>, Vec<Example>) {
        match self {
            NeedleSet::Classic => (
                RETRIEVAL.iter().map(|e| e.owned(1)).collect(),
                REASONING.iter().map(|e| e.owned(2)).collect(),
            ),
            NeedleSet::Generated { per_kind, wide } => {
                let two = generated::reasoning(seed, per_kind);
                let reasoning = if wide == 0 {
                    two
                } else {
                    interleave_pairs(two, multi::reasoning(seed, per_kind, wide))
                };
                (generated::retrieval(seed, per_kind), reasoning)
            }
            NeedleSet::Calibrated { per_kind, k } => (
                generated::retrieval(seed, per_kind),
                calibrated::reasoning(seed, per_kind, k),
            ),
        }
    }
}

/// `a` and `b` a pair (one needle asked both ways) of each at a time: a₀a₁ b₀b₁ a₂a₃ b₂b₃ …
fn interleave_pairs(a: Vec<Example>, b: Vec<Example>) -> Vec<Example> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.chunks(2), b.chunks(2));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => {
                out.extend(x.into_iter().flatten().cloned());
                out.extend(y.into_iter().flatten().cloned());
            }
        }
    }
}

/// A hand-written example, as a constant.
#[derive(Debug, Clone, Copy)]
pub struct StaticExample {
    pub id: &'static str,
    pub needle: &'static str,
    pub question: &'static str,
    pub answer: &'static str,
    pub key: &'static str,
}

impl StaticExample {
    /// The example with owned text, its needle holding `candidates` statements of the
    /// answer's shape.
    pub fn owned(&self, candidates: usize) -> Example {
        Example {
            id: self.id.into(),
            needle: self.needle.into(),
            question: self.question.into(),
            answer: self.answer.into(),
            key: self.key.into(),
            candidates,
            check: Check::Statement,
        }
    }
}

/// Retrieval examples (Wu et al.'s kind): one fact, asked directly.
pub const RETRIEVAL: [StaticExample; 3] = [
    StaticExample {
        id: "retrieval/lisbon",
        needle: "The best thing to do in Lisbon is to ride the old yellow tram up the hill and \
eat custard tarts by the river.",
        question: "What is the best thing to do in Lisbon?",
        answer:
            "The best thing to do in Lisbon is to ride the old yellow tram up the hill and eat \
custard tarts by the river",
        key: "ride the old yellow tram up the hill and eat custard tarts by the river",
    },
    StaticExample {
        id: "retrieval/okafor-soup",
        needle: "The secret ingredient in Grandma Okafor's famous soup is a spoonful of roasted \
pumpkin seeds.",
        question: "What is the secret ingredient in Grandma Okafor's famous soup?",
        answer: "The secret ingredient in Grandma Okafor's famous soup is a spoonful of roasted \
pumpkin seeds",
        key: "a spoonful of roasted pumpkin seeds",
    },
    StaticExample {
        id: "retrieval/lighthouse",
        needle: "The password to the old lighthouse archive is purple elephant seventeen.",
        question: "What is the password to the old lighthouse archive?",
        answer: "The password to the old lighthouse archive is purple elephant seventeen",
        key: "purple elephant seventeen",
    },
];

/// Retrieval-reasoning examples (Figure 9's kind): each needle serves two questions that ask
/// for opposite statements.
pub const REASONING: [StaticExample; 4] = [
    StaticExample {
        id: "reasoning/younger-lena-omar",
        needle: LENA_OMAR,
        question: "What is the favorite thing of the younger one between Lena and Omar?",
        answer: "Omar's favorite thing is to bake sourdough bread and share it with his neighbors",
        key: "to bake sourdough bread and share it with his neighbors",
    },
    StaticExample {
        id: "reasoning/older-lena-omar",
        needle: LENA_OMAR,
        question: "What is the favorite thing of the older one between Lena and Omar?",
        answer: "Lena's favorite thing is to paint small boats at the harbor every Sunday morning",
        key: "to paint small boats at the harbor every Sunday morning",
    },
    StaticExample {
        id: "reasoning/taller-ines-pavel",
        needle: INES_PAVEL,
        question: "What does the taller one between Ines and Pavel collect?",
        answer: "Ines collects old train tickets from every city she has visited",
        key: "old train tickets from every city she has visited",
    },
    StaticExample {
        id: "reasoning/shorter-ines-pavel",
        needle: INES_PAVEL,
        question: "What does the shorter one between Ines and Pavel collect?",
        answer: "Pavel collects blue glass bottles that wash up on the beach",
        key: "blue glass bottles that wash up on the beach",
    },
];

const LENA_OMAR: &str = "Lena is 31 years old. Omar is 27 years old. Lena's favorite thing is \
to paint small boats at the harbor every Sunday morning. Omar's favorite thing is to bake \
sourdough bread and share it with his neighbors.";

const INES_PAVEL: &str = "Ines is 180 centimeters tall. Pavel is 165 centimeters tall. Pavel \
collects blue glass bottles that wash up on the beach. Ines collects old train tickets from every \
city she has visited.";

/// How the haystack and question are presented to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PromptStyle {
    /// Plain text, no chat template (HeadKV's `retrieval_head_detection_r2.py`):
    /// `{haystack}\nBased on the content of the book, Question: {q}\nAnswer:`.
    Plain,
    /// Wu et al.'s prompt for chat models (`retrieval_head_detection.py`): one user message
    /// `<book>{haystack}</book>\nBased on the content of the book, Question: {q}\nAnswer:` in
    /// the model's chat template, with the generation prompt.
    Chat,
}

/// The authors' question template: plain text after the haystack.
pub fn question_text(question: &str) -> String {
    format!("\nBased on the content of the book, Question: {question}\nAnswer:")
}

/// Text before and after the haystack for `style`; `render_chat` renders one user message in
/// the model's chat template with the generation prompt.
pub fn frame_text(
    style: PromptStyle,
    question: &str,
    render_chat: impl Fn(&str) -> String,
) -> (String, String) {
    match style {
        PromptStyle::Plain => (String::new(), question_text(question)),
        PromptStyle::Chat => {
            const HOLE: &str = "\u{1}HAYSTACK\u{1}";
            let text = render_chat(&format!(
                "<book>{HOLE}</book>\nBased on the content of the book, Question: {question}\nAnswer:"
            ));
            match text.split_once(HOLE) {
                Some((a, b)) => (a.to_string(), b.to_string()),
                None => (String::new(), text),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_appears_verbatim_in_its_needle() {
        for e in RETRIEVAL.iter().chain(&REASONING) {
            assert!(e.needle.contains(e.answer), "{}", e.id);
            assert!(e.answer.contains(e.key), "{}", e.id);
            assert!(!e.question.contains(e.key), "{}", e.id);
        }
    }

    #[test]
    fn chat_frame_wraps_the_haystack_in_one_user_message() {
        let render = |m: &str| format!("<u>{m}</u><a>");
        let (pre, post) = frame_text(PromptStyle::Chat, "Why?", render);
        assert_eq!(pre, "<u><book>");
        assert_eq!(
            post,
            "</book>\nBased on the content of the book, Question: Why?\nAnswer:</u><a>"
        );
        let (pre, post) = frame_text(PromptStyle::Plain, "Why?", render);
        assert_eq!(pre, "");
        assert_eq!(
            post,
            "\nBased on the content of the book, Question: Why?\nAnswer:"
        );
    }

    #[test]
    fn reasoning_pairs_ask_both_ways() {
        // Same needle, different answers, and each answer is the other's distractor.
        for pair in REASONING.chunks(2) {
            assert_eq!(pair[0].needle, pair[1].needle);
            assert_ne!(pair[0].answer, pair[1].answer);
            // Copying the other statement fails the check against the answer statement.
            assert!(crate::analysis::metrics::qa_f1(pair[1].answer, pair[0].answer) <= 0.5);
        }
    }
}
