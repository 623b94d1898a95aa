//! Two rows of NIAH or RULER records compared on the prompts both scored (`kvplan eval paired`):
//! two methods of one run, or one method under two runs made on the same prompts (question-aware
//! against question-agnostic records of the same model, length and seed). The tables pair each
//! row with SnapKV and FullKV of its own run; this pairs any two, with the tables' statistics
//! ([`RecordRow::paired`]: the difference of the averages of the task means, its cluster
//! bootstrap interval, the cluster sign test's — or for 0/1 scores of independent prompts in one
//! task, exact McNemar's — p and the smallest difference the sample could detect), so its numbers
//! are theirs. One comparison, so its p is not adjusted; a reader making several adjusts them.

use std::fmt;
use std::str::FromStr;

use crate::aggregate::{prompt_key, rows, Overall, RecordRow, Scope};
use crate::records::Record;
use crate::stats::Paired;
use crate::table::delta;
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
}
