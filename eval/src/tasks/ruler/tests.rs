//! Fixtures of the RULER tests (a whitespace tokenizer, small essays and QA sets) and the tests
//! of what the tasks share.

use super::qa::QaSet;
use super::*;

/// A stand-in for the model: a plain chat frame, one token per whitespace-separated word.
pub(crate) struct Words;

impl Framer for Words {
    fn frame(&self, user: &str, answer_prefix: &str) -> String {
        format!(
            "<user>\n{user}\n<assistant>\n{}",
            answer_prefix.trim_start()
        )
    }

    fn count(&self, text: &str) -> Result<usize> {
        Ok(text.split_whitespace().count())
    }
}

/// Asserts that an example of `tokens` fills the `room` its length leaves beside the answer
/// (RULER sizes its haystack so): at most `room`, and less than `slack` tokens short of it
/// (`slack`: the step the task grows its haystack by).
pub(crate) fn assert_fills(tokens: usize, room: usize, slack: usize) {
    assert!(
        tokens <= room && tokens + slack > room,
        "{tokens} tokens for a room of {room} (slack {slack})"
    );
}

/// Example `index` at `length` tokens under `seed`.
pub(crate) fn at(length: usize, seed: u64, index: usize) -> ExampleAt {
    ExampleAt {
        length,
        seed,
        index,
    }
}

/// `n` words `W0 w1 … w9. W10 …`: a sentence of ten words, the first capitalised.
pub(crate) fn essay_text(n: usize) -> String {
    (0..n)
        .map(|i| {
            let w = if i % 10 == 0 {
                format!("W{i}")
            } else {
                format!("w{i}")
            };
            if i % 10 == 9 {
                format!("{w}.")
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Two articles: three answerable questions, one unanswerable.
pub(crate) fn squad_set() -> QaSet {
    QaSet::squad(
        r#"{"version": "v2.0", "data": [
          {"title": "A", "paragraphs": [
            {"context": "The tower is in Paris. It is tall.", "qas": [
              {"question": "Where is the tower?", "is_impossible": false,
               "answers": [{"text": "Paris", "answer_start": 16},
                           {"text": "in Paris", "answer_start": 13}]},
              {"question": "Who built the moon?", "is_impossible": true, "answers": []}]},
            {"context": "The bridge is in London.", "qas": [
              {"question": "Where is the bridge?", "is_impossible": false,
               "answers": [{"text": "London", "answer_start": 17}]}]}]},
          {"title": "B", "paragraphs": [
            {"context": "Rivers flow to the sea.", "qas": [
              {"question": "Where do rivers flow?", "is_impossible": false,
               "answers": [{"text": "to the sea", "answer_start": 12}]}]}]}]}"#,
    )
    .expect("squad fixture")
}

/// One question with two paragraphs.
pub(crate) fn hotpot_set() -> QaSet {
    QaSet::hotpot(
        r#"[{"_id": "x", "question": "Were they both American?", "answer": "yes",
             "type": "comparison", "level": "hard", "supporting_facts": [],
             "context": [["Ed Wood", ["Ed Wood was a director.", " He was American."]],
                         ["Scott Derrickson", ["Scott Derrickson is a director."]]]}]"#,
    )
    .expect("hotpot fixture")
}

#[test]
fn task_names_round_trip_and_unknown_names_list_the_known_ones() {
    for t in Task::ALL {
        assert_eq!(Task::from_name(t.name()).expect("known"), t);
    }
    let err = Task::from_name("niah_single_4").expect_err("not a RULER task");
    let msg = err.to_string();
    assert!(
        msg.contains("niah_single_4")
            && msg.contains("niah_single_1, niah_single_2")
            && msg.contains("vt, cwe, fwe, qa_1, qa_2"),
        "{msg}"
    );
    let budgets: Vec<usize> = Task::ALL.iter().map(|t| t.tokens_to_generate()).collect();
    assert_eq!(
        budgets,
        [128, 128, 128, 128, 128, 128, 128, 128, 30, 120, 50, 32, 32]
    );
    let streams: std::collections::HashSet<u64> = Task::ALL.iter().map(|t| t.stream()).collect();
    assert_eq!(streams.len(), 13, "every task its own stream");
    assert_eq!((Task::NiahSingle2.stream(), Task::Qa2.stream()), (1, 7));
    assert_eq!(Task::Qa2.metric(), Metric::Part);
    assert_eq!(Task::Cwe.metric(), Metric::All);
}

#[test]
fn fill_replaces_named_fields_once_and_leaves_others() {
    assert_eq!(
        fill("a {x} b {y} {z}", &[("x", "{y}"), ("y", "2")]),
        "a {y} b 2 {z}"
    );
    assert_eq!(fill("{ unclosed", &[]), "{ unclosed");
}

#[test]
fn bisection_finds_the_largest_size_that_fits() {
    let fits = |limit: usize| move |s: usize| Ok(s * 3 <= limit);
    assert_eq!(largest(1, 100, fits(40)).expect("ok"), Some(13));
    assert_eq!(largest(1, 100, fits(1000)).expect("ok"), Some(100));
    assert_eq!(largest(5, 100, fits(10)).expect("ok"), None);
    assert_eq!(largest(3, 3, fits(10)).expect("ok"), Some(3));
}

#[test]
fn prompt_is_the_framed_task_with_the_answer_prefix_last() {
    let sources = Sources::in_memory(Some(&essay_text(3000)), None, None, None);
    let ex = generate(Task::NiahSingle2, &sources, &Words, at(512, 7, 2)).expect("fits");
    assert_eq!(
        ex.prompt,
        Words.frame(&ex.built.user, &ex.built.answer_prefix)
    );
    assert!(ex.prompt.ends_with("mentioned in the provided text is"));
    assert_eq!(ex.tokens, Words.count(&ex.prompt).expect("count"));
    assert_eq!((ex.task, ex.index), (Task::NiahSingle2, 2));
}

#[test]
fn too_short_a_length_or_missing_data_is_a_clear_error() {
    let sources = Sources::in_memory(Some(&essay_text(3000)), None, None, None);
    let err = generate(Task::NiahSingle2, &sources, &Words, at(100, 0, 0)).expect_err("too short");
    assert!(err.to_string().contains("no room"), "{err}");
    let err = generate(Task::NiahSingle2, &sources, &Words, at(160, 0, 0)).expect_err("too short");
    assert!(err.to_string().contains("shortest prompt"), "{err}");
    let err = generate(Task::Qa1, &sources, &Words, at(1024, 0, 0)).expect_err("no squad");
    assert!(err.to_string().contains("qa_1 needs"), "{err}");
}

#[test]
fn run_keys_cover_tasks_examples_and_cells() {
    let run = RulerRun {
        tasks: vec![Task::Vt, Task::Cwe],
        length: 4096,
        examples: 2,
        seed: 0,
        methods: vec![MethodName::FULL, kvplan_planner::Method::SnapKv.into()],
        budgets: vec![128, 512],
        ratios: Vec::new(),
        answer_cap: Some(16),
        leave_out_unfit: false,
    };
    assert_eq!(run.cells(), 2 * 2 * 3);
    assert_eq!(run.keys().len(), 12);
    let with_ratios = RulerRun {
        ratios: vec![0.25, 0.5],
        ..run.clone()
    };
    assert_eq!(
        with_ratios.cells(),
        2 * 2 * 5,
        "snapkv at two ratios besides"
    );
    assert_eq!(with_ratios.keys().len(), 20);
    assert!(with_ratios
        .keys()
        .contains(&CellKey::new("vt", 4096, 0.0, 0, "snapkv", None).at_ratio(0.5)));
    assert!(run
        .keys()
        .contains(&CellKey::new("cwe", 4096, 0.0, 1, "snapkv", Some(512))));
    assert_eq!(run.answer_tokens(Task::Cwe), 16);
    assert_eq!(
        RulerRun {
            answer_cap: None,
            ..run
        }
        .answer_tokens(Task::Vt),
        30
    );
}

#[test]
fn a_default_run_leaves_out_a_task_that_cannot_fit_and_a_named_one_is_refused_up_front() {
    let essay = essay_text(3000);
    let sources = Sources::in_memory(Some(&essay), None, Some(squad_set()), None);
    // At 160 words NIAH's template alone does not fit (the test above); qa_1's short articles do.
    let run = RulerRun {
        tasks: vec![Task::NiahSingle2, Task::Qa1],
        length: 160,
        examples: 2,
        seed: 0,
        methods: vec![MethodName::FULL],
        budgets: Vec::new(),
        ratios: Vec::new(),
        answer_cap: None,
        leave_out_unfit: true,
    };
    let g = generate_all(&run, &sources, &Words).expect("qa_1 fits");
    assert_eq!(g.tasks, vec![Task::Qa1]);
    assert_eq!(g.examples.len(), 2);
    for e in 0..2 {
        let direct = generate(Task::Qa1, &sources, &Words, at(160, 0, e)).expect("fits");
        assert_eq!(
            g.examples[&(Task::Qa1, e)],
            direct,
            "example {e} as generated alone"
        );
    }
    assert_eq!(g.left_out.len(), 1);
    let line = &g.left_out[0];
    assert!(
        line.starts_with("niah_single_2 left out (example 0 of 2: the shortest prompt has")
            && line.contains("a 160-token length leaves beside the 128 to generate"),
        "{line}"
    );
    // Named tasks: the first example that does not fit ends the run before the model runs.
    let named = RulerRun {
        leave_out_unfit: false,
        ..run.clone()
    };
    let err = generate_all(&named, &sources, &Words).expect_err("refused");
    assert!(
        matches!(&err, Error::DoesNotFit { task, .. } if task == "niah_single_2"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("niah_single_2: the shortest prompt has")
            && err.to_string().ends_with("(example 0)"),
        "{err}"
    );
    // Nothing left: an error that lists why.
    let none = RulerRun {
        tasks: vec![Task::NiahSingle2],
        ..run.clone()
    };
    let err = generate_all(&none, &sources, &Words).expect_err("nothing fits");
    assert!(
        err.to_string()
            .starts_with("every task: none fits a 160-token length: niah_single_2 left out"),
        "{err}"
    );
    // Missing data is not a length: an error even when unfit tasks may be left out.
    let bare = Sources::in_memory(Some(&essay), None, None, None);
    let err = generate_all(&run, &bare, &Words).expect_err("no squad");
    assert!(err.to_string().contains("qa_1 needs"), "{err}");
}

/// The package `kvplan data fetch` puts in the data folder (run with `--ignored` once fetched).
#[test]
#[ignore = "needs <data folder>/long_context_eval (kvplan data fetch)"]
fn the_fetched_package_loads_and_every_task_builds() {
    let dir = kvplan_common::paths::data_dir(None).join("long_context_eval");
    let started = std::time::Instant::now();
    let sources = Sources::load(&dir, &Task::ALL).expect("load");
    eprintln!("loaded in {:.1}s", started.elapsed().as_secs_f64());
    for t in Task::ALL {
        let started = std::time::Instant::now();
        let ex = generate(t, &sources, &Words, at(4096, 0, 0)).expect("builds");
        eprintln!(
            "{t}: {} words, size {}, {:.2}s, answers {:?}, query {:?}",
            ex.tokens,
            ex.size,
            started.elapsed().as_secs_f64(),
            ex.built.answers,
            ex.built.query
        );
        assert!(ex.tokens + t.tokens_to_generate() <= 4096);
        for a in &ex.built.answers {
            if t != Task::Cwe && t != Task::Qa2 {
                assert!(ex.prompt.contains(a.as_str()), "{t}: {a}");
            }
        }
    }
}

#[test]
fn the_question_starts_at_the_last_match_of_the_task_pattern() {
    // NIAH (singular template): the question is the template's last line.
    let sources = Sources::in_memory(Some(&essay_text(3000)), None, None, None);
    let ex = generate(Task::NiahSingle2, &sources, &Words, at(512, 7, 2)).expect("fits");
    let user = &ex.built.user;
    let q = question_start(Task::NiahSingle2, user).expect("niah question");
    let want = format!(
        "What is the special magic number for {} mentioned in the provided text?",
        ex.built.query
    );
    assert_eq!(&user[q..], want);
    // QA: the instruction appears before and after the documents; the second one starts it.
    let user = fill(
        qa::TEMPLATE,
        &[("context", "Document 1:\nA."), ("query", "Q?")],
    );
    let q = question_start(Task::Qa1, &user).expect("qa question");
    assert_eq!(
        &user[q..],
        "Answer the question based on the given documents. Only give me the answer and do not \
         output any other words.\n\nQuestion: Q?"
    );
    let user = fill(vt::TEMPLATE, &[("context", "VAR A = 1"), ("query", "1")]);
    let q = question_start(Task::Vt, &user).expect("vt question");
    assert_eq!(
        &user[q..],
        "Question: Find all variables that are assigned the value 1 in the text above."
    );
    // CWE: the worked example's question comes first; the last one is the question.
    let one = |c: &str| fill(cwe::TEMPLATE, &[("context", c)]);
    let user = format!("{}\n{}", one("1. a"), one("1. b"));
    let q = question_start(Task::Cwe, &user).expect("cwe question");
    assert_eq!(
        &user[q..],
        "Question: What are the 10 most common words in the above list?"
    );
    assert_eq!(question_start(Task::Vt, "no question here"), None);
}
