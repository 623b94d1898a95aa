//! Tests of the needle tasks added for the leaderboard protocol (`niah_single_1`,
//! `niah_single_3`, `niah_multikey_2`, `niah_multikey_3`, `niah_multiquery`): each prompt holds
//! its needles as RULER's arguments say, asked keys differ across examples, responses score as
//! `string_match_all`.

use super::haystack::REPEAT;
use super::niah::{asked_keys, Config, TOKENS_TO_GENERATE};
use super::tests::{assert_fills, at, essay_text, Words};
use super::*;

fn sources() -> Sources {
    Sources::in_memory(Some(&essay_text(6000)), None, None, None)
}

/// The context lines of a line-haystack prompt: between the template's first and last lines.
fn context_lines(user: &str) -> Vec<&str> {
    let lines: Vec<&str> = user.split('\n').collect();
    lines[1..lines.len() - 1].to_vec()
}

fn is_uuid(s: &str) -> bool {
    let lens: Vec<usize> = s.split('-').map(str::len).collect();
    lens == [8, 4, 4, 4, 12]
}

#[test]
fn single_1_hides_one_number_among_repeated_lines() {
    let ex = generate(Task::NiahSingle1, &sources(), &Words, at(1024, 0, 0)).expect("fits");
    let b = &ex.built;
    assert_eq!(b.answers.len(), 1);
    let needle = format!(
        "One of the special magic numbers for {} is: {}.",
        b.query, b.answers[0]
    );
    let lines = context_lines(&b.user);
    assert_eq!(lines.iter().filter(|l| **l == needle).count(), 1);
    assert_eq!(
        lines.iter().filter(|l| **l == REPEAT).count(),
        lines.len() - 1
    );
    assert_eq!(ex.size, lines.len() - 1, "size counts the repeated lines");
    assert!(b.user.starts_with(
        "A special magic number is hidden within the following text. Make sure to memorize it. \
         I will quiz you about the number afterwards.\n"
    ));
    assert_eq!(
        b.answer_prefix,
        format!(
            " The special magic number for {} mentioned in the provided text is",
            b.query
        )
    );
    assert_fills(ex.tokens, 1024 - TOKENS_TO_GENERATE, 20);
}

#[test]
fn single_3_hides_a_uuid_in_the_essays_with_the_singular_uuid_template() {
    let ex = generate(Task::NiahSingle3, &sources(), &Words, at(1024, 0, 0)).expect("fits");
    let b = &ex.built;
    assert!(is_uuid(&b.answers[0]), "{:?}", b.answers);
    let needle = format!(
        "One of the special magic uuids for {} is: {}.",
        b.query, b.answers[0]
    );
    assert_eq!(b.user.matches(&needle).count(), 1);
    assert!(b.user.starts_with(
        "A special magic uuid is hidden within the following text. Make sure to memorize it. I \
         will quiz you about the uuid afterwards.\n"
    ));
    assert!(b.user.ends_with(&format!(
        "\nWhat is the special magic uuid for {} mentioned in the provided text?",
        b.query
    )));
    // Scored case-insensitively, as RULER's string_match_all.
    let upper = b.answers[0].to_uppercase();
    assert_eq!(score(Task::NiahSingle3, &upper, &b.answers), 1.0);
}

#[test]
fn multikey_2_and_3_hide_the_needle_among_needles_of_other_keys() {
    for (task, key_is_uuid) in [(Task::NiahMultikey2, false), (Task::NiahMultikey3, true)] {
        let ex = generate(task, &sources(), &Words, at(1024, 3, 1)).expect("fits");
        let b = &ex.built;
        let lines = context_lines(&b.user);
        assert!(lines.len() > 10, "{task}: {}", lines.len());
        let value_kind = if key_is_uuid { "uuids" } else { "numbers" };
        let prefix = format!("One of the special magic {value_kind} for ");
        assert!(lines.iter().all(|l| l.starts_with(&prefix)), "{task}");
        let asked = format!("{prefix}{} is: ", b.query);
        let with_key: Vec<&&str> = lines.iter().filter(|l| l.starts_with(&asked)).collect();
        assert_eq!(
            with_key.len(),
            1,
            "{task}: the asked key is on one line only"
        );
        assert_eq!(*with_key[0], format!("{asked}{}.", b.answers[0]));
        assert_eq!(is_uuid(&b.query), key_is_uuid, "{task}: {}", b.query);
        assert_eq!(is_uuid(&b.answers[0]), key_is_uuid, "{task}");
        assert_eq!(Config::of(task).needles(), 1);
    }
}

#[test]
fn multiquery_asks_four_keys_and_scores_the_share_found() {
    let ex = generate(Task::NiahMultiquery, &sources(), &Words, at(1024, 0, 2)).expect("fits");
    let b = &ex.built;
    assert_eq!(b.answers.len(), 4);
    let keys: Vec<&str> = b
        .query
        .split(", ")
        .map(|k| k.trim_start_matches("and "))
        .collect();
    assert_eq!(keys.len(), 4, "{}", b.query);
    assert!(b.query.contains(", and "), "{}", b.query);
    for (k, v) in keys.iter().zip(&b.answers) {
        let needle = format!("One of the special magic numbers for {k} is: {v}.");
        assert_eq!(b.user.matches(&needle).count(), 1, "{needle}");
    }
    assert!(b.user.starts_with("Some special magic numbers are hidden"));
    assert!(b
        .answer_prefix
        .ends_with("mentioned in the provided text are"));
    let half = format!("{} and {}", b.answers[0], b.answers[3]);
    assert_eq!(score(Task::NiahMultiquery, &half, &b.answers), 0.5);
    assert_eq!(
        score(Task::NiahMultiquery, &b.answers.join(", "), &b.answers),
        1.0
    );
}

#[test]
fn new_tasks_ask_distinct_keys_across_examples() {
    for task in [
        Task::NiahSingle1,
        Task::NiahSingle3,
        Task::NiahMultikey2,
        Task::NiahMultikey3,
        Task::NiahMultiquery,
    ] {
        let mut seen = std::collections::HashSet::new();
        for e in 0..12 {
            let ex = generate(task, &sources(), &Words, at(512, 0, e)).expect("fits");
            let q = &ex.built.query;
            for k in q.split(", ").map(|k| k.trim_start_matches("and ")) {
                assert!(seen.insert(k.to_string()), "{task} #{e}: {k} asked before");
            }
        }
    }
    // The permutation extends: example 1's keys do not depend on how many examples there are.
    let c = Config::of(Task::NiahMultiquery);
    let one = asked_keys(&c, 0, 12, 1).expect("ok").expect("distinct");
    assert_eq!(one.len(), 4);
    assert_eq!(asked_keys(&c, 0, 12, 1).expect("ok"), Some(one));
    let err = asked_keys(&c, 0, 12, 144).expect_err("576 / 4 examples at most");
    assert!(err.to_string().contains("144 distinct examples"), "{err}");
    // The tasks of protocol ruler-chat/v2 keep their own draws.
    assert_eq!(
        asked_keys(&Config::of(Task::NiahSingle2), 0, 1, 0).expect("ok"),
        None
    );
}

#[test]
fn line_haystacks_need_no_essay() {
    let none = Sources::in_memory(None, None, None, None);
    for task in [Task::NiahSingle1, Task::NiahMultikey2, Task::NiahMultikey3] {
        generate(task, &none, &Words, at(512, 0, 0)).expect("no essay needed");
    }
    let err = generate(Task::NiahSingle3, &none, &Words, at(512, 0, 0)).expect_err("essay");
    assert!(err.to_string().contains("the essays"), "{err}");
}
