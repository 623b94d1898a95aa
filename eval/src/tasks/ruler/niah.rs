//! RULER's needle tasks (`data/synthetic/niah.py`, template and answer prefix from
//! `data/synthetic/constants.py`, arguments from `synthetic.yaml`), all eight:
//!
//! | task | haystack | key | value | keys | values | asked |
//! |---|---|---|---|---|---|---|
//! | `niah_single_1` | repeat | words | numbers | 1 | 1 | 1 |
//! | `niah_single_2` | essay | words | numbers | 1 | 1 | 1 |
//! | `niah_single_3` | essay | words | uuids | 1 | 1 | 1 |
//! | `niah_multikey_1` | essay | words | numbers | 4 | 1 | 1 |
//! | `niah_multikey_2` | needle | words | numbers | 1 | 1 | 1 |
//! | `niah_multikey_3` | needle | uuids | uuids | 1 | 1 | 1 |
//! | `niah_multivalue` | essay | words | numbers | 1 | 4 | 1 |
//! | `niah_multiquery` | essay | words | numbers | 4 (`max(k, q)`) | 1 | 4 |
//!
//! As in RULER: the essay haystack is the first `n` words of the Paul Graham essays of
//! `PaulGrahamEssays.json` (whitespace collapsed), split into sentences; the needles, shuffled,
//! go between sentences at depths drawn from 40 evenly spaced percentages. The `repeat` and
//! `needle` haystacks are `n` lines with the needles inserted among them ([`super::haystack`]).
//! The asked keys' values are the answers; with one value asked the template turns singular
//! ("Some … are" → "A … is", the value type's last letter dropped); several keys asked read
//! "a, b, and c". Score: `string_match_all` of the asked values.
//!
//! **Distinct examples** (the tasks added for the leaderboard protocol, [`Config::distinct`]):
//! the asked word keys of example `i` are slots `i·q … i·q + q − 1` of a seeded permutation of
//! the 576 adjective-noun keys ([`asked_keys`]), so no two examples of a task ask the same key
//! (at most ⌊576 / q⌋ examples); UUID keys are 128 random bits per example. The three tasks of
//! protocol `ruler-chat/v2` (`niah_single_2`, `niah_multikey_1`, `niah_multivalue`) keep their
//! independent draws, so their prompts are unchanged.
//!
//! Differences from RULER: sentences are split by a rule (a word ending in `.`, `!` or `?`,
//! closing quotes allowed, followed by a word starting with a capital or a digit; common
//! abbreviations excepted) instead of NLTK's Punkt model; keys come from the 24 × 24
//! adjective-noun list of [`crate::tasks::niah`] instead of the `wonderwords` lists, which the
//! package does not ship, and the keys of one example are distinct.

use super::haystack::{lines, Haystack, Kind};
use super::{fill, Built, Task};
use crate::rng::Rng;
use crate::tasks::niah::{ADJECTIVES, KEYS, NOUNS};
use crate::{Error, Result};

/// RULER's `niah` template.
pub const TEMPLATE: &str = "Some special magic {type_needle_v} are hidden within the following \
text. Make sure to memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\n\
What are all the special magic {type_needle_v} for {query} mentioned in the provided text?";
/// RULER's `niah` answer prefix.
pub const ANSWER_PREFIX: &str =
    " The special magic {type_needle_v} for {query} mentioned in the provided text are";
/// RULER's needle.
pub const NEEDLE: &str = "One of the special magic {type_needle_v} for {key} is: {value}.";
/// RULER's `tokens_to_generate` for `niah`.
pub const TOKENS_TO_GENERATE: usize = 128;

/// A needle task's arguments (`synthetic.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// `type_haystack`.
    pub haystack: Haystack,
    /// `type_needle_k`.
    pub key: Kind,
    /// `type_needle_v`.
    pub value: Kind,
    /// Keys (`num_needle_k`, raised to `num_needle_q` as RULER does).
    pub keys: usize,
    /// Values per key (`num_needle_v`).
    pub values: usize,
    /// Keys asked (`num_needle_q`).
    pub queries: usize,
    /// Asked keys distinct across the task's examples (module header).
    pub distinct: bool,
}

impl Config {
    /// The arguments of a needle task (other tasks: those of `niah_single_2`).
    pub fn of(task: Task) -> Config {
        use Haystack::{Essay, Needle, Repeat};
        use Kind::{Numbers, Uuids, Words};
        let (haystack, key, value, keys, values, queries, distinct) = match task {
            Task::NiahSingle1 => (Repeat, Words, Numbers, 1, 1, 1, true),
            Task::NiahSingle3 => (Essay, Words, Uuids, 1, 1, 1, true),
            Task::NiahMultikey1 => (Essay, Words, Numbers, 4, 1, 1, false),
            Task::NiahMultikey2 => (Needle, Words, Numbers, 1, 1, 1, true),
            Task::NiahMultikey3 => (Needle, Uuids, Uuids, 1, 1, 1, true),
            Task::NiahMultivalue => (Essay, Words, Numbers, 1, 4, 1, false),
            Task::NiahMultiquery => (Essay, Words, Numbers, 1, 1, 4, true),
            _ => (Essay, Words, Numbers, 1, 1, 1, false),
        };
        Config {
            haystack,
            key,
            value,
            keys: keys.max(queries),
            values,
            queries,
            distinct,
        }
    }

    /// Needles hidden: keys × values.
    pub fn needles(&self) -> usize {
        self.keys * self.values
    }
}

/// The asked keys of example `index` when the task's asked word keys are distinct across
/// examples (module header); `None` otherwise. An error past ⌊576 / q⌋ examples.
pub fn asked_keys(
    config: &Config,
    seed: u64,
    stream: u64,
    index: usize,
) -> Result<Option<Vec<String>>> {
    if !config.distinct || config.key != Kind::Words {
        return Ok(None);
    }
    let q = config.queries;
    let most = KEYS / q;
    if index >= most {
        return Err(Error::Request(format!(
            "example {index}: a task asking {q} key(s) per example has {most} distinct examples \
             ({KEYS} adjective-noun keys); ask for fewer examples"
        )));
    }
    let mut rng = Rng::derive(seed, &[stream, KEYS_STREAM]);
    let order = rng.sample_indices(KEYS, (index + 1) * q);
    let key = |k: usize| format!("{}-{}", ADJECTIVES[k / NOUNS.len()], NOUNS[k % NOUNS.len()]);
    Ok(Some(order[index * q..].iter().map(|&k| key(k)).collect()))
}

/// The stream of [`asked_keys`]' permutation ("keys").
const KEYS_STREAM: u64 = 0x6b65_7973;
/// No essay: what a line haystack's example is built with.
pub(crate) static NO_ESSAY: Essay = Essay {
    words: Vec::new(),
    ends: Vec::new(),
};

/// The haystack: the essays' words and where sentences end.
#[derive(Debug, Clone, Default)]
pub struct Essay {
    words: Vec<String>,
    /// `ends[i]`: a sentence ends after word `i`.
    ends: Vec<bool>,
}

const ABBREVIATIONS: [&str; 12] = [
    "mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "jr.", "sr.", "inc.", "e.g.", "i.e.", "etc.",
];

fn closes_sentence(word: &str, next: &str) -> bool {
    let core = word.trim_end_matches(['"', '\'', ')', ']', '\u{201d}', '\u{2019}']);
    let ends = core.ends_with(['.', '!', '?']);
    let bare = core.trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}']);
    let abbreviation = ABBREVIATIONS.contains(&bare.to_lowercase().as_str());
    let starts = next
        .trim_start_matches(['"', '\'', '(', '[', '\u{201c}', '\u{2018}'])
        .chars()
        .next()
        .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
    ends && starts && !abbreviation
}

impl Essay {
    /// The haystack of `text`: whitespace collapsed into single spaces, as RULER does.
    pub fn from_text(text: &str) -> Self {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        let ends = (0..words.len())
            .map(|i| {
                words
                    .get(i + 1)
                    .is_some_and(|n| closes_sentence(&words[i], n))
            })
            .collect();
        Self { words, ends }
    }

    /// Words in the haystack.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// No words.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// First word of each sentence of the first `n` words.
    fn sentence_starts(&self, n: usize) -> Vec<usize> {
        let n = n.min(self.words.len());
        let mut starts = vec![0];
        starts.extend(
            (0..n.saturating_sub(1))
                .filter(|&i| self.ends[i])
                .map(|i| i + 1),
        );
        starts
    }
}

/// RULER's `DEPTHS`: `round(linspace(0, 100, 40))`.
fn depths() -> Vec<usize> {
    (0..40)
        .map(|i| (100.0 * i as f64 / 39.0).round() as usize)
        .collect()
}

/// The template and answer prefix, singular when one value is asked (RULER's replacements),
/// and the value type's name as they use it.
fn templates(config: &Config) -> (String, String, &'static str) {
    if config.queries * config.values == 1 {
        let singular = |t: &str| {
            t.replace("Some", "A")
                .replace("are all", "is")
                .replace("are", "is")
                .replace("answers", "answer")
        };
        (
            singular(TEMPLATE),
            singular(ANSWER_PREFIX),
            config.value.singular(),
        )
    } else {
        (
            TEMPLATE.to_string(),
            ANSWER_PREFIX.to_string(),
            config.value.plural(),
        )
    }
}

/// A needle sentence of `key` and `value` (the value type plural, as RULER writes it).
fn needle(config: &Config, key: &str, value: &str) -> String {
    fill(
        NEEDLE,
        &[
            ("type_needle_v", config.value.plural()),
            ("key", key),
            ("value", value),
        ],
    )
}

/// The example of size `n` (haystack words, or lines of a line haystack; `generate_input_output`)
/// asking `asked` when given (distinct examples, [`asked_keys`]), else keys drawn here.
pub fn build(
    config: &Config,
    essay: &Essay,
    n: usize,
    asked: Option<&[String]>,
    rng: &mut Rng,
) -> Built {
    let fixed = asked.unwrap_or_default();
    let mut keys: Vec<String> = Vec::new();
    let mut values: Vec<Vec<String>> = Vec::new();
    let mut needles = Vec::new();
    for i in 0..config.keys {
        let key = match fixed.get(i) {
            Some(k) => k.clone(),
            None => loop {
                let k = config.key.draw(rng);
                if !keys.contains(&k) && !fixed.contains(&k) {
                    break k;
                }
            },
        };
        let mut vs = Vec::new();
        for _ in 0..config.values {
            let v = config.value.draw(rng);
            needles.push(needle(config, &key, &v));
            vs.push(v);
        }
        keys.push(key);
        values.push(vs);
    }
    rng.shuffle(&mut needles);

    let context = match config.haystack {
        Haystack::Essay => essay_context(essay, n, &needles, rng),
        Haystack::Repeat => lines(vec![super::haystack::REPEAT.to_string(); n], &needles, rng),
        Haystack::Needle => {
            let filler = (0..n)
                .map(|_| loop {
                    let k = config.key.draw(rng);
                    let v = config.value.draw(rng);
                    if !keys.contains(&k) {
                        break needle(config, &k, &v);
                    }
                })
                .collect();
            lines(filler, &needles, rng)
        }
    };

    let chosen: Vec<usize> = if asked.is_some() {
        (0..config.queries).collect()
    } else {
        rng.sample_indices(keys.len(), config.queries)
    };
    let queries: Vec<&str> = chosen.iter().map(|&i| keys[i].as_str()).collect();
    let answers: Vec<String> = chosen.iter().flat_map(|&i| values[i].clone()).collect();
    let query = match queries.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{}, and {last}", rest.join(", ")),
        _ => queries.concat(),
    };
    let (template, prefix, type_v) = templates(config);
    Built {
        user: fill(
            &template,
            &[
                ("type_needle_v", type_v),
                ("context", &context),
                ("query", &query),
            ],
        ),
        answer_prefix: fill(&prefix, &[("type_needle_v", type_v), ("query", &query)]),
        answers,
        query,
    }
}

/// The essay haystack's first `n` words with `needles` between sentences at sampled depths.
fn essay_context(essay: &Essay, n: usize, needles: &[String], rng: &mut Rng) -> String {
    let n = n.min(essay.len());
    let starts = essay.sentence_starts(n);
    let sentences = starts.len();
    let word_of = |s: usize| starts.get(s).copied().unwrap_or(n);
    let mut at: Vec<usize> = rng
        .sample(&depths(), needles.len())
        .into_iter()
        .map(|d| (sentences as f64 * (d as f64 / 100.0)) as usize)
        .collect();
    at.sort_unstable();
    let mut positions = vec![0];
    positions.extend(at);
    positions.push(sentences);
    let mut parts = Vec::with_capacity(2 * needles.len() + 1);
    for i in 1..positions.len() {
        parts.push(essay.words[word_of(positions[i - 1])..word_of(positions[i])].join(" "));
        if let Some(needle) = needles.get(i - 1) {
            parts.push(needle.clone());
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::ruler::tests::{at, essay_text, Words};
    use crate::tasks::ruler::{generate, score, Sources};

    /// `task`'s example over an essay of `words` generated words, its keys drawn from `seed`.
    fn built(task: Task, words: usize, seed: u64) -> Built {
        let essay = Essay::from_text(&essay_text(words));
        build(&Config::of(task), &essay, words, None, &mut Rng::new(seed))
    }

    #[test]
    fn sentences_split_after_end_marks_before_capitals_but_not_abbreviations() {
        let e = Essay::from_text("One two. Three (Mr. Smith) came! \"Four\" five. six. 7 up");
        // words: One two. Three (Mr. Smith) came! "Four" five. six. 7 up
        assert_eq!(e.sentence_starts(e.len()), vec![0, 2, 6, 9]);
        assert_eq!(e.sentence_starts(3), vec![0, 2]);
    }

    #[test]
    fn single_needle_uses_the_singular_template_and_holds_its_value() {
        let b = built(Task::NiahSingle2, 300, 1);
        assert_eq!(b.answers.len(), 1);
        let value = &b.answers[0];
        assert_eq!(value.len(), 7);
        let needle = format!(
            "One of the special magic numbers for {} is: {value}.",
            b.query
        );
        assert_eq!(b.user.matches(&needle).count(), 1, "{}", b.user);
        assert!(b.user.starts_with(
            "A special magic number is hidden within the following text. Make sure to memorize \
             it. I will quiz you about the number afterwards.\n"
        ));
        assert!(b.user.ends_with(&format!(
            "\nWhat is the special magic number for {} mentioned in the provided text?",
            b.query
        )));
        assert_eq!(
            b.answer_prefix,
            format!(
                " The special magic number for {} mentioned in the provided text is",
                b.query
            )
        );
        // The needle sits between sentences: after a sentence end or at the start.
        let at = b.user.find(&needle).expect("needle");
        let before = b.user[..at].trim_end();
        assert!(before.ends_with('.') || before.ends_with('\n'), "{before}");
        // Every haystack word is kept.
        let hay = b
            .user
            .split_whitespace()
            .filter(|w| {
                let t = w.trim_end_matches('.');
                t.len() > 1
                    && t.starts_with(['w', 'W'])
                    && t[1..].chars().all(|c| c.is_ascii_digit())
            })
            .count();
        assert_eq!(hay, 300);
    }

    #[test]
    fn multikey_hides_four_keys_and_asks_one() {
        let b = built(Task::NiahMultikey1, 400, 2);
        assert_eq!(
            b.user
                .matches("One of the special magic numbers for ")
                .count(),
            4
        );
        assert_eq!(b.answers.len(), 1);
        let asked = format!("for {} is: {}.", b.query, b.answers[0]);
        assert!(b.user.contains(&asked));
        assert!(b.user.starts_with("A special magic number is hidden"));
    }

    #[test]
    fn multivalue_keeps_the_plural_template_and_asks_all_four_values() {
        let b = built(Task::NiahMultivalue, 400, 3);
        assert_eq!(b.answers.len(), 4);
        for v in &b.answers {
            assert!(b.user.contains(&format!("for {} is: {v}.", b.query)));
        }
        assert!(b.user.starts_with(
            "Some special magic numbers are hidden within the following text. Make sure to \
             memorize it. I will quiz you about the numbers afterwards.\n"
        ));
        assert!(b.user.ends_with(&format!(
            "\nWhat are all the special magic numbers for {} mentioned in the provided text?",
            b.query
        )));
        assert_eq!(
            b.answer_prefix,
            format!(
                " The special magic numbers for {} mentioned in the provided text are",
                b.query
            )
        );
    }

    #[test]
    fn niah_scores_the_share_of_values_found() {
        let answers = vec!["1234567".to_string(), "7654321".to_string()];
        let s = |r: &str| score(Task::NiahMultivalue, r, &answers);
        assert_eq!(s(" 1234567, 7654321."), 1.0);
        assert_eq!(s("1234567 and 1111111"), 0.5);
        assert_eq!(s("none"), 0.0);
    }

    #[test]
    fn examples_fill_the_length_to_within_a_word() {
        let sources = Sources::in_memory(Some(&essay_text(5000)), None, None, None);
        for task in [Task::NiahSingle2, Task::NiahMultikey1, Task::NiahMultivalue] {
            let ex = generate(task, &sources, &Words, at(1024, 0, 0)).expect("fits");
            let budget = 1024 - TOKENS_TO_GENERATE;
            assert!(
                ex.tokens <= budget && ex.tokens + 2 > budget,
                "{task}: {}",
                ex.tokens
            );
            assert_eq!(
                ex,
                generate(task, &sources, &Words, at(1024, 0, 0)).expect("again")
            );
            assert_ne!(
                ex.built.answers,
                generate(task, &sources, &Words, at(1024, 1, 0))
                    .expect("seed 1")
                    .built
                    .answers
            );
        }
    }
}
