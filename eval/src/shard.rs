//! A run split into shards, and shards merged back.
//!
//! `--shard i/n` (1 ≤ i ≤ n) keeps the run's prompts (the driver's units, in run order) whose
//! index is `i − 1` modulo `n`: deterministic for the same arguments, every prompt in exactly one
//! shard, each prompt's cells (all its methods, budgets and ratios) together, so a shard shares
//! its prefills as a whole run does. A shard writes its own records, table and results,
//! `<model>.<task>.shard-i-of-n.records.json` (and `.md`, `<model>.shard-i-of-n.results.json`),
//! under the same settings as the whole run: shards can run side by side in one folder or on
//! different machines.
//!
//! `--shard auto` takes `i/n` from the scheduler that started the process ([`Shard::from_env`]):
//! a SLURM job array (`SLURM_ARRAY_TASK_ID` − `SLURM_ARRAY_TASK_MIN` + 1 of
//! `SLURM_ARRAY_TASK_COUNT`) or a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX` + 1, 0-based,
//! of the count given as `--shard auto/N`, since the Job's completions are not in its pods'
//! environment). docs/commands.md has a job file for each.
//!
//! [`merge`] joins records files by cell key into one: their settings must be equal (a
//! difference is refused, naming the files and the setting); a cell in two files must have the
//! same response and score (a second identical copy is dropped). The merged file is named as the
//! whole run's, `<model>.<task>.records.json` ([`merged_name`]); `kvplan eval table` renders it.

use std::collections::HashMap;

use crate::records::{CellKey, CellRecord, Record, RecordsFile};
use crate::{Error, Result};

/// Which part of a run: shard `index` of `count` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1 to `count`.
    pub index: usize,
    /// Shards in all.
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self::WHOLE
    }
}

impl Shard {
    /// The whole run.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// `i/n`, 1 ≤ i ≤ n; `auto` or `auto/N` from the process's environment
    /// ([`Self::from_env`]).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        Self::parse_with(text, |k| std::env::var(k).ok())
    }

    /// [`Self::parse`] with the environment read through `env`.
    pub fn parse_with(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, String> {
        let text = text.trim();
        if text == "auto" {
            return Self::from_env(None, env);
        }
        if let Some(n) = text.strip_prefix("auto/") {
            let count = n
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    format!("--shard `{text}`: expected auto/N with N ≥ 1 shards, e.g. auto/8")
                })?;
            return Self::from_env(Some(count), env);
        }
        let bad =
            || format!("--shard `{text}`: expected i/n with 1 ≤ i ≤ n (e.g. 1/4), auto or auto/N");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// The shard a scheduler started this process as: a SLURM job array's task
    /// (`SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_MIN` (0 when unset), `SLURM_ARRAY_TASK_COUNT`)
    /// or a Kubernetes Indexed Job's pod (`JOB_COMPLETION_INDEX`, 0-based); `count` (from
    /// `auto/N`) is required for Kubernetes and, for SLURM, must equal the array's count.
    pub fn from_env(
        count: Option<usize>,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, String> {
        let number = |key: &str| -> std::result::Result<Option<usize>, String> {
            match env(key) {
                None => Ok(None),
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    format!("--shard auto: {key} = {v:?} is not a non-negative integer")
                }),
            }
        };
        let (index0, found) = if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let Some(i) = id.checked_sub(min) else {
                return Err(format!(
                    "--shard auto: SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"
                ));
            };
            let slurm = number("SLURM_ARRAY_TASK_COUNT")?;
            let n = match (slurm, count) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!(
                        "--shard auto/{b}: the SLURM array has SLURM_ARRAY_TASK_COUNT = {a} tasks"
                    ))
                }
                (Some(a), _) => a,
                (None, Some(b)) => b,
                (None, None) => {
                    return Err("--shard auto: SLURM_ARRAY_TASK_ID is set but not \
                                SLURM_ARRAY_TASK_COUNT; give the count as --shard auto/N"
                        .to_string())
                }
            };
            (i, n)
        } else if let Some(i) = number("JOB_COMPLETION_INDEX")? {
            let Some(n) = count else {
                return Err(format!(
                    "--shard auto: JOB_COMPLETION_INDEX = {i} (a Kubernetes Indexed Job), but \
                     its pods are not told the Job's completions; give them as --shard auto/N"
                ));
            };
            (i, n)
        } else {
            return Err(
                "--shard auto: neither SLURM_ARRAY_TASK_ID (a SLURM job array) nor \
                        JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give --shard i/n"
                    .to_string(),
            );
        };
        if index0 >= found {
            return Err(format!(
                "--shard auto: task {} of {found} shards (0-based index {index0}) is out of range",
                index0 + 1
            ));
        }
        Ok(Self {
            index: index0 + 1,
            count: found,
        })
    }

    /// The whole run (one shard).
    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// Whether the prompt at `unit` (its index in run order) is in this shard.
    pub fn takes(self, unit: usize) -> bool {
        unit % self.count == self.index - 1
    }

    /// What the shard adds to file names: `.shard-i-of-n`, nothing for the whole run.
    pub fn suffix(self) -> String {
        if self.is_whole() {
            String::new()
        } else {
            format!(".shard-{}-of-{}", self.index, self.count)
        }
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Shard::parse(s)
    }
}

/// The whole run's records file name of a shard's (`.shard-i-of-n` dropped); the name itself
/// when it has no shard part.
pub fn merged_name(name: &str) -> String {
    let Some(stem) = name.strip_suffix(".records.json") else {
        return name.to_string();
    };
    match stem.rsplit_once(".shard-") {
        Some((base, part)) if is_part(part) => format!("{base}.records.json"),
        _ => name.to_string(),
    }
}

/// `i-of-n` with digits.
fn is_part(part: &str) -> bool {
    part.split_once("-of-").is_some_and(|(i, n)| {
        !i.is_empty()
            && !n.is_empty()
            && i.chars().all(|c| c.is_ascii_digit())
            && n.chars().all(|c| c.is_ascii_digit())
    })
}

/// The records of `files` (name, parsed file) joined by cell key (module header).
pub fn merge(files: &[(String, RecordsFile<Record>)]) -> Result<RecordsFile<Record>> {
    let Some((first_name, first)) = files.first() else {
        return Err(Error::Request("nothing to merge".into()));
    };
    let mut out = RecordsFile::<Record>::new(first.settings.clone());
    let mut seen: HashMap<CellKey, (usize, &str)> = HashMap::new();
    for (name, file) in files {
        if file.settings != first.settings {
            let keys = first.settings.keys().chain(file.settings.keys());
            let mut diff: Vec<String> = keys
                .filter(|k| first.settings.get(*k) != file.settings.get(*k))
                .map(|k| {
                    let v = |f: &RecordsFile<Record>| {
                        f.settings
                            .get(k)
                            .cloned()
                            .unwrap_or_else(|| "(none)".into())
                    };
                    format!("{k}: {} vs {}", v(first), v(file))
                })
                .collect();
            diff.dedup();
            return Err(Error::Invalid {
                path: name.clone(),
                message: format!(
                    "made under other settings than {first_name} ({}); shards of one run share \
                     them",
                    diff.join("; ")
                ),
            });
        }
        for r in &file.records {
            let key = r.key();
            match seen.get(&key) {
                Some(&(i, other)) => {
                    let kept = &out.records[i];
                    if kept.response != r.response || kept.score != r.score {
                        return Err(Error::Invalid {
                            path: name.clone(),
                            message: format!(
                                "cell {} of {} is also in {other} with another response or \
                                 score",
                                r.label(),
                                key.prompt()
                            ),
                        });
                    }
                }
                None => {
                    seen.insert(key, (out.records.len(), name.as_str()));
                    out.records.push(r.clone());
                }
            }
        }
    }
    if out.records.is_empty() {
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Error::Request(format!(
            "no records in {}: nothing to merge, nothing written",
            names.join(", ")
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;
    use std::collections::BTreeMap;

    fn env_of<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn auto_reads_a_slurm_array_or_a_kubernetes_indexed_job() {
        let parse = |text: &str, env: &[(&str, &str)]| Shard::parse_with(text, env_of(env));
        // SLURM `--array=0-3`: task 2 is shard 3 of 4; `--array=5-7` counts from 5.
        let slurm = [
            ("SLURM_ARRAY_TASK_ID", "2"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ];
        assert_eq!(parse("auto", &slurm), Ok(Shard { index: 3, count: 4 }));
        let offset = [
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_MIN", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ];
        assert_eq!(parse("auto", &offset), Ok(Shard { index: 3, count: 3 }));
        assert_eq!(parse("auto/4", &slurm), Ok(Shard { index: 3, count: 4 }));
        assert!(parse("auto/5", &slurm)
            .unwrap_err()
            .contains("SLURM_ARRAY_TASK_COUNT = 4"));
        // Kubernetes: the index is 0-based and the count must be given.
        let k8s = [("JOB_COMPLETION_INDEX", "0")];
        assert_eq!(parse("auto/3", &k8s), Ok(Shard { index: 1, count: 3 }));
        assert!(parse("auto", &k8s).unwrap_err().contains("auto/N"));
        assert!(parse("auto/3", &[("JOB_COMPLETION_INDEX", "3")])
            .unwrap_err()
            .contains("out of range"));
        // Nothing set, or garbage: one error naming the variables.
        assert!(parse("auto", &[])
            .unwrap_err()
            .contains("SLURM_ARRAY_TASK_ID"));
        assert!(parse("auto/2", &[("JOB_COMPLETION_INDEX", "x")])
            .unwrap_err()
            .contains("JOB_COMPLETION_INDEX = \"x\""));
        assert!(parse("auto/0", &k8s).is_err());
        // Explicit shards are as before.
        assert_eq!(parse("2/5", &slurm), Ok(Shard { index: 2, count: 5 }));
    }

    fn file(seed: &str, records: Vec<Record>) -> RecordsFile<Record> {
        RecordsFile {
            settings: BTreeMap::from([("seed".to_string(), seed.to_string())]),
            records,
        }
    }

    fn rec(example: usize, method: &str, score: f64) -> Record {
        Record {
            example,
            ..test_record("vt", method, Some(64), 4096, score, 0.25)
        }
    }

    #[test]
    fn shards_parse_and_split_prompts_round_robin() {
        let s = Shard::parse("2/3").expect("ok");
        assert_eq!(
            (s.index, s.count, s.suffix()),
            (2, 3, ".shard-2-of-3".into())
        );
        let taken: Vec<usize> = (0..8).filter(|&u| s.takes(u)).collect();
        assert_eq!(taken, [1, 4, 7]);
        // Every prompt in exactly one shard.
        for u in 0..20 {
            let n = (1..=3)
                .filter(|&i| Shard { index: i, count: 3 }.takes(u))
                .count();
            assert_eq!(n, 1);
        }
        assert!(Shard::WHOLE.takes(5) && Shard::WHOLE.suffix().is_empty());
        for bad in ["0/3", "4/3", "1", "a/b", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn merged_names_drop_the_shard_part_only() {
        assert_eq!(
            merged_name("Qwen2.5-0.5B.ruler.shard-2-of-4.records.json"),
            "Qwen2.5-0.5B.ruler.records.json"
        );
        assert_eq!(merged_name("m.ruler.records.json"), "m.ruler.records.json");
        assert_eq!(
            merged_name("m.ruler.shard-x-of-4.records.json"),
            "m.ruler.shard-x-of-4.records.json"
        );
    }

    #[test]
    fn merge_joins_by_cell_key_and_refuses_other_settings_or_conflicts() {
        let a = file("0", vec![rec(0, "snapkv", 1.0), rec(0, "full", 1.0)]);
        let b = file("0", vec![rec(1, "snapkv", 0.0), rec(0, "snapkv", 1.0)]);
        let m = merge(&[("a".into(), a.clone()), ("b".into(), b)]).expect("merged");
        assert_eq!(m.records.len(), 3, "the identical copy is dropped");
        assert_eq!(m.settings, a.settings);
        let other = file("1", vec![rec(2, "snapkv", 1.0)]);
        let err = merge(&[("a".into(), a.clone()), ("c".into(), other)]).expect_err("seed");
        let msg = err.to_string();
        assert!(
            msg.starts_with("c: ") && msg.contains("seed: 0 vs 1"),
            "{msg}"
        );
        let conflict = file("0", vec![rec(0, "snapkv", 0.0)]);
        let err = merge(&[("a".into(), a), ("d".into(), conflict)]).expect_err("conflict");
        assert!(err.to_string().contains("also in a"), "{err}");
        assert!(merge(&[]).is_err());
    }

    #[test]
    fn shards_not_started_merge_with_the_others_but_not_alone() {
        let a = file("0", vec![rec(0, "snapkv", 1.0)]);
        let empty = file("0", Vec::new());
        let m = merge(&[("a".into(), a), ("e".into(), empty.clone())]).expect("merged");
        assert_eq!(m.records.len(), 1);
        let err = merge(&[("e".into(), empty.clone()), ("f".into(), empty)]).expect_err("empty");
        assert_eq!(
            err.to_string(),
            "no records in e, f: nothing to merge, nothing written"
        );
    }
}
