//! Two rows of NIAH or RULER records compared on the prompts both scored (`kvplan eval paired`):
//! two methods of one run, or one method under two runs made on the same prompts (question-aware
//! against question-agnostic records of the same model, length and seed). The tables pair each
//! row with SnapKV and FullKV of its own run; this pairs any two, with the tables' statistics
//! ([`RecordRow::paired`]: the difference of the averages of the task means, its cluster
//! bootstrap interval, the cluster sign test's — or for 0/1 scores of independent prompts in one
//! task, exact McNemar's — p and the smallest difference the sample could detect), so its numbers
//! are theirs. One comparison, so its p is not adjusted; a reader making several adjusts them.
//!
//! Two rows of a perplexity run ([`ppl_ratio`]) streamed the same texts, so their per-token
//! losses pair up: the perplexity ratio `exp(mean(nll_a − nll_b))` with the block bootstrap of
//! the run's own intervals (`crate::tasks::ppl`) applied to the differences — blocks of
//! [`BLOCK`] tokens of each text, every text's blocks resampled together.

use std::fmt;
use std::str::FromStr;

use crate::aggregate::{prompt_key, rows, Overall, RecordRow, Scope};
use crate::records::Record;
use crate::stats::{bootstrap_ratio, Interval, Paired, LEVEL, RESAMPLES, SEED};
use crate::table::delta;
use crate::tasks::ppl::{PplRecord, BLOCK};
use crate::tasks::ruler::Task;
use crate::{Error, Result};

/// A row named on the command line: `METHOD`, `METHOD@BUDGET` or `METHOD@RATIO` (a number with a
/// point, a target compression ratio). A method may hold `@` itself (`headkv@perm1`,
/// `headkv-r@beta2@128`): the part after the last `@` is a budget or ratio only when it is a
/// number.
#[derive(Debug, Clone, PartialEq)]
pub struct RowName {
    /// Method (registry name, or kvpress's `kvpress-…`).
    pub method: String,
    /// `--budget` target.
    pub budget: Option<usize>,
    /// Target compression ratio.
    pub ratio: Option<f64>,
}

impl FromStr for RowName {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let whole = || RowName {
            method: s.to_string(),
            budget: None,
            ratio: None,
        };
        let Some((method, at)) = s.rsplit_once('@') else {
            return Ok(whole());
        };
        if method.is_empty() {
            return Err(Error::Request(format!("row `{s}`: expected METHOD@BUDGET")));
        }
        let method = method.to_string();
        if at.contains('.') {
            return match at.parse::<f64>() {
                Ok(r) if r > 0.0 && r < 1.0 => Ok(RowName {
                    method,
                    budget: None,
                    ratio: Some(r),
                }),
                _ => Err(Error::Request(format!(
                    "row `{s}`: a target ratio lies strictly between 0 and 1, found `{at}`"
                ))),
            };
        }
        Ok(match at.parse::<usize>() {
            Ok(b) => RowName {
                method,
                budget: Some(b),
                ratio: None,
            },
            Err(_) => whole(),
        })
    }
}

impl fmt::Display for RowName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.budget, self.ratio) {
            (Some(b), _) => write!(f, "{}@{b}", self.method),
            (None, Some(r)) => write!(f, "{}@{r}", self.method),
            (None, None) => f.write_str(&self.method),
        }
    }
}

/// The comparison of two rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Row A minus row B over the prompts both scored.
    pub paired: Paired,
    /// Tasks (the groups whose means are averaged).
    pub tasks: usize,
}

impl Comparison {
    /// `A − B: +1.6 [−0.6, 4.5] p 0.500 ≈ mdd 4.1 (13 tasks, 69 paired prompts in 69 clusters)`,
    /// in points, as the tables write a difference.
    pub fn line(&self, a: &str, b: &str) -> String {
        let (a, b) = if a == b {
            (format!("{a} (A)"), format!("{b} (B)"))
        } else {
            (a.to_string(), b.to_string())
        };
        format!(
            "{a} − {b}: {} ({} tasks, {} paired prompts in {} clusters)",
            delta(Some(self.paired), None, self.paired.n),
            self.tasks,
            self.paired.n,
            self.paired.clusters
        )
    }
}

/// Row `a` of `records_a` against row `b` of `records_b` on the prompts (task, length, depth,
/// example) both scored: an error naming the row when a file holds no record of it, and naming
/// the task when one of either row's tasks has no prompt both scored.
pub fn compare(
    (records_a, a): (&[Record], &RowName),
    (records_b, b): (&[Record], &RowName),
) -> Result<Comparison> {
    let mut tasks: Vec<&str> = records_a
        .iter()
        .filter(|r| is(r, a))
        .chain(records_b.iter().filter(|r| is(r, b)))
        .map(|r| r.task.as_str())
        .collect();
    // RULER's tasks in RULER's order (the tables' columns, so the bootstrap draws as theirs),
    // any other task (NIAH's) after them in the order first met.
    let ruler = |t: &str| Task::ALL.iter().position(|r| r.name() == t);
    let mut seen = Vec::new();
    for t in tasks.drain(..) {
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen.sort_by_key(|t| ruler(t).unwrap_or(usize::MAX));
    let tasks = seen;
    let (row_a, row_b) = (row(records_a, a, &tasks)?, row(records_b, b, &tasks)?);
    for (i, task) in tasks.iter().enumerate() {
        let theirs: Vec<_> = row_b.columns[i].iter().map(|r| prompt_key(r)).collect();
        if !row_a.columns[i]
            .iter()
            .any(|r| theirs.contains(&prompt_key(r)))
        {
            return Err(Error::Request(format!(
                "task {task}: no prompt scored by both {a} and {b}"
            )));
        }
    }
    let paired = row_a
        .paired(&row_b, Scope::Overall(Overall::Columns))
        .ok_or_else(|| Error::Request(format!("no prompt scored by both {a} and {b}")))?;
    Ok(Comparison {
        paired,
        tasks: tasks.len(),
    })
}

/// The perplexity ratio of two rows of a perplexity run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PplRatio {
    /// `exp(mean(nll_a − nll_b))` over the tokens both streamed.
    pub ratio: f64,
    /// Its 95% interval (the ends of the mean difference's, exponentiated).
    pub interval: Option<Interval>,
    /// Tokens paired.
    pub tokens: usize,
    /// Blocks resampled.
    pub blocks: usize,
    /// Texts.
    pub texts: usize,
}

impl PplRatio {
    /// `ppl(A) / ppl(B) = 1.083 [1.051, 1.117] over 4095 tokens (128 blocks of 32, 1 text)`.
    pub fn line(&self, a: &str, b: &str) -> String {
        let interval = self.interval.map_or("[–]".to_string(), |i| {
            format!("[{:.3}, {:.3}]", i.lo.exp(), i.hi.exp())
        });
        format!(
            "ppl({a}) / ppl({b}) = {:.3} {interval} over {} tokens ({} blocks of {BLOCK}, {} text{})",
            self.ratio,
            self.tokens,
            self.blocks,
            self.texts,
            if self.texts == 1 { "" } else { "s" }
        )
    }
}

/// Row `a` against row `b` of a perplexity run's `records` over the texts both streamed (`text`:
/// that one alone): an error naming the row when none of its records is there, the text when
/// the two streamed different lengths of it, and a ratio row (perplexity runs have none).
pub fn ppl_ratio(
    records: &[PplRecord],
    a: &RowName,
    b: &RowName,
    text: Option<&str>,
) -> Result<PplRatio> {
    let streams = |name: &RowName| -> Result<Vec<&PplRecord>> {
        if name.ratio.is_some() {
            return Err(Error::Request(format!(
                "row {name}: a perplexity run has budget rows, not ratio rows"
            )));
        }
        let of: Vec<&PplRecord> = records
            .iter()
            .filter(|r| r.method == name.method && r.budget == name.budget)
            .filter(|r| text.is_none_or(|t| r.text == t))
            .collect();
        if of.is_empty() {
            let on = text.map_or(String::new(), |t| format!(" on {t}"));
            return Err(Error::Request(format!("no record of row {name}{on}")));
        }
        Ok(of)
    };
    let (theirs, ours) = (streams(b)?, streams(a)?);
    let mut blocks = Vec::new();
    let (mut texts, mut tokens, mut sum) = (0, 0, 0.0);
    for r in ours {
        let Some(o) = theirs.iter().find(|o| o.text == r.text) else {
            continue;
        };
        if o.nll.len() != r.nll.len() {
            return Err(Error::Request(format!(
                "{}: {a} has {} scored tokens, {b} {}: not the same stream",
                r.text,
                r.nll.len(),
                o.nll.len()
            )));
        }
        let diff: Vec<f64> = r.nll.iter().zip(&o.nll).map(|(x, y)| x - y).collect();
        blocks.extend(
            diff.chunks(BLOCK)
                .map(|c| (c.iter().sum::<f64>(), c.len() as f64)),
        );
        (texts, tokens, sum) = (
            texts + 1,
            tokens + diff.len(),
            sum + diff.iter().sum::<f64>(),
        );
    }
    if tokens == 0 {
        return Err(Error::Request(format!(
            "no text streamed by both {a} and {b}"
        )));
    }
    Ok(PplRatio {
        ratio: (sum / tokens as f64).exp(),
        interval: bootstrap_ratio(&blocks, RESAMPLES, SEED, LEVEL),
        tokens,
        blocks: blocks.len(),
        texts,
    })
}

/// Row `name` of `records`, a column per task of `tasks`.
fn row<'r>(records: &'r [Record], name: &RowName, tasks: &[&str]) -> Result<RecordRow<'r>> {
    rows(records, tasks.len(), |r| {
        is(r, name)
            .then(|| tasks.iter().position(|t| *t == r.task))
            .flatten()
    })
    .into_iter()
    .next()
    .ok_or_else(|| Error::Request(format!("no record of row {name}")))
}

/// Whether `r` is a record of row `name`.
fn is(r: &Record, name: &RowName) -> bool {
    r.method == name.method
        && r.budget == name.budget
        && match (name.ratio, r.target_ratio()) {
            (Some(want), Some(have)) => crate::ratio::key(want) == crate::ratio::key(have),
            (None, have) => have.is_none(),
            (Some(_), None) => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    fn rec(task: &str, example: usize, method: &str, score: f64) -> Record {
        Record {
            example,
            needle: format!("{task} {example}"),
            ..test_record(task, method, Some(512), 4096, score, 1.0)
        }
    }

    #[test]
    fn names_take_a_budget_or_ratio_only_when_the_last_part_is_a_number() {
        let n = |s: &str| s.parse::<RowName>().expect(s);
        assert_eq!(n("full").method, "full");
        assert_eq!(n("snapkv@128").budget, Some(128));
        assert_eq!(n("headkv@0.5").ratio, Some(0.5));
        let perm = n("headkv@perm1");
        assert_eq!((perm.method.as_str(), perm.budget), ("headkv@perm1", None));
        let beta = n("headkv-r@beta2@128");
        assert_eq!(
            (beta.method.as_str(), beta.budget),
            ("headkv-r@beta2", Some(128))
        );
        assert!("headkv@1.5".parse::<RowName>().is_err());
        assert!("@128".parse::<RowName>().is_err());
        assert_eq!(n("headkv-r@beta2@128").to_string(), "headkv-r@beta2@128");
    }

    #[test]
    fn a_difference_by_hand_and_the_errors_name_what_is_missing() {
        // Two tasks of two prompts; A − B: task a (1−0, 1−1) → 0.5, task b (0−0, 1−0) → 0.5:
        // the average of the task means is +50 points over 4 pairs, in 4 clusters.
        let mut records = Vec::new();
        for (task, e, sa, sb) in [
            ("a", 0, 1.0, 0.0),
            ("a", 1, 1.0, 1.0),
            ("b", 0, 0.0, 0.0),
            ("b", 1, 1.0, 0.0),
        ] {
            records.push(rec(task, e, "snapkv", sa));
            records.push(rec(task, e, "h2o", sb));
        }
        let (a, b) = (
            "snapkv@512".parse().expect("a"),
            "h2o@512".parse().expect("b"),
        );
        let c = compare((&records, &a), (&records, &b)).expect("both rows");
        assert_eq!((c.tasks, c.paired.n, c.paired.clusters), (2, 4, 4));
        assert!((c.paired.mean - 0.5).abs() < 1e-12, "{}", c.paired.mean);
        let line = c.line("snapkv@512", "h2o@512");
        assert!(line.starts_with("snapkv@512 − h2o@512: +50.0 ["), "{line}");
        assert!(
            line.ends_with("(2 tasks, 4 paired prompts in 4 clusters)"),
            "{line}"
        );
        // A row the records do not hold, and a task the other row did not score.
        let typo: RowName = "h2o@256".parse().expect("name");
        let e = compare((&records, &a), (&records, &typo)).expect_err("absent");
        assert!(e.to_string().contains("no record of row h2o@256"), "{e}");
        let only_a: Vec<Record> = records
            .iter()
            .filter(|r| !(r.method == "h2o" && r.task == "b"))
            .cloned()
            .collect();
        let e = compare((&only_a, &a), (&only_a, &b)).expect_err("task b unpaired");
        assert!(
            e.to_string().contains("task b: no prompt scored by both"),
            "{e}"
        );
    }

    fn stream(text: &str, method: &str, budget: Option<usize>, nll: Vec<f64>) -> PplRecord {
        PplRecord {
            model: "m".into(),
            text: text.into(),
            method: method.into(),
            budget,
            tokens: nll.len() + 1,
            nll,
            kv_fraction: 1.0,
            seconds: 0.1,
        }
    }

    #[test]
    fn a_perplexity_ratio_by_hand() {
        // 64 tokens: A loses 0.5 more than B on every one, so ppl(A)/ppl(B) = e^0.5 = 1.6487, and
        // every resample of the constant difference gives it too.
        let records = vec![
            stream("t.txt", "h2o", Some(128), vec![2.5; 64]),
            stream("t.txt", "full", None, vec![2.0; 64]),
        ];
        let (a, b): (RowName, RowName) =
            ("h2o@128".parse().expect("a"), "full".parse().expect("b"));
        let r = ppl_ratio(&records, &a, &b, None).expect("both rows");
        assert!((r.ratio - 0.5f64.exp()).abs() < 1e-12, "{r:?}");
        let i = r.interval.expect("two blocks");
        assert!(
            (i.lo - 0.5).abs() < 1e-12 && (i.hi - 0.5).abs() < 1e-12,
            "{i:?}"
        );
        assert_eq!((r.tokens, r.blocks, r.texts), (64, 2, 1));
        assert!(r
            .line("h2o@128", "full")
            .starts_with("ppl(h2o@128) / ppl(full) = 1.649 [1.649, 1.649]"));
        // A text of another length, a row not there, a text not there.
        let short = vec![
            records[0].clone(),
            stream("t.txt", "full", None, vec![2.0; 63]),
        ];
        let e = ppl_ratio(&short, &a, &b, None).expect_err("lengths differ");
        assert!(e.to_string().contains("not the same stream"), "{e}");
        let e = ppl_ratio(&records, &"h2o@64".parse().expect("n"), &b, None).expect_err("absent");
        assert!(e.to_string().contains("no record of row h2o@64"), "{e}");
        let e = ppl_ratio(&records, &a, &b, Some("u.txt")).expect_err("no such text");
        assert!(
            e.to_string().contains("no record of row full on u.txt"),
            "{e}"
        );
    }
}
