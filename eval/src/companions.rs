//! Records of other tools beside a task's own: `<model>.<task>.<tool>.records.json` next to
//! `<model>.<task>.records.json` (kvpress's presses, run by a script on the same token ids, write
//! `<model>.<task>.kvpress.records.json` with methods `kvpress-<press>`). They join the task's
//! tables and results, each row placed by its measured bytes and paired with kvplan's rows on the
//! same prompts — a prompt is (task, context length, depth, example).
//!
//! A companion file must hold records of the same model that ask what kvplan's record of the same
//! prompt asks (the same expected answers): otherwise the prompts differ and pairing them would
//! compare different questions, so the file is refused with an error naming it.

use std::path::{Path, PathBuf};

use crate::records::{Record, RecordsFile};
use crate::{io_err, Error, Result};

/// The companion files of `task` for `model` in `dir`, sorted by name.
fn files(dir: &Path, model: &str, task: &str) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let prefix = format!("{model}.{task}.");
    let own = format!("{model}.{task}.records.json");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with(&prefix) && name.ends_with(".records.json") && name != own
        })
        .collect();
    out.sort();
    Ok(out)
}

/// `r`'s prompt identity.
fn prompt(r: &Record) -> (&str, usize, u64, usize) {
    (&r.task, r.context_len, r.depth.to_bits(), r.example)
}

/// Checks that each of `records` (read from `path`) is of `model` and expects what `own`'s
/// record of the same prompt expects.
fn check(path: &Path, model: &str, records: &[Record], own: &[Record]) -> Result<()> {
    let invalid = |i: usize, message: String| Error::Invalid {
        path: format!("{}: records[{i}]", path.display()),
        message,
    };
    for (i, r) in records.iter().enumerate() {
        if r.model != model {
            return Err(invalid(
                i,
                format!("model {} where this run's is {model}", r.model),
            ));
        }
        let mine = own.iter().find(|o| prompt(o) == prompt(r));
        if let Some(o) = mine.filter(|o| o.expected != r.expected) {
            return Err(invalid(
                i,
                format!(
                    "{} #{} expects {:?} where kvplan's prompt expects {:?}: not the same prompts",
                    r.task, r.example, r.expected, o.expected
                ),
            ));
        }
    }
    Ok(())
}

/// The records of every companion file of `task` for `model` in `dir` on the prompts of `own`
/// (the run's own records; a companion's other prompts are left out, as the run leaves out its
/// own records of other lengths or budgets), checked against them, in file-name order.
pub fn companions(dir: &Path, model: &str, task: &str, own: &[Record]) -> Result<Vec<Record>> {
    let prompts: std::collections::HashSet<_> = own.iter().map(prompt).collect();
    let mut out = Vec::new();
    for path in files(dir, model, task)? {
        let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
        let file: RecordsFile<Record> =
            serde_json::from_str(&text).map_err(|e| Error::Invalid {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
        let records: Vec<Record> = file
            .records
            .into_iter()
            .filter(|r| prompts.contains(&prompt(r)))
            .collect();
        check(&path, model, &records, own)?;
        out.extend(records);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;
    use std::collections::BTreeMap;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("kvplan-companions-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn write(path: &Path, records: Vec<Record>) {
        let file = RecordsFile {
            settings: BTreeMap::from([("tool".to_string(), "kvpress".to_string())]),
            records,
        };
        std::fs::write(path, serde_json::to_string(&file).expect("json")).expect("write");
    }

    #[test]
    fn companion_records_join_when_they_ask_the_same() {
        let d = dir("join");
        let own = vec![test_record("niah", "full", None, 512, 1.0, 1.0)];
        let theirs = test_record("niah", "kvpress-snapkv", Some(64), 512, 0.0, 0.25);
        write(&d.join("m.niah.kvpress.records.json"), vec![theirs.clone()]);
        write(&d.join("m.niah.records.json"), own.clone());
        write(
            &d.join("m.ruler.kvpress.records.json"),
            vec![theirs.clone()],
        );
        let got = companions(&d, "m", "niah", &own).expect("valid");
        assert_eq!(
            got,
            vec![theirs.clone()],
            "own file and other tasks' files left out"
        );
        let longer = test_record("niah", "full", None, 1024, 1.0, 1.0);
        let none = companions(&d, "m", "niah", &[longer]).expect("valid");
        assert!(
            none.is_empty(),
            "prompts the run does not have are left out"
        );
        // Another needle for the same prompt: refused, naming the file and the record.
        let other = Record {
            expected: vec!["7654321".into()],
            ..theirs
        };
        write(&d.join("m.niah.kvpress.records.json"), vec![other]);
        let err = companions(&d, "m", "niah", &own).expect_err("other prompts");
        let msg = err.to_string();
        assert!(
            msg.contains("m.niah.kvpress.records.json: records[0]"),
            "{msg}"
        );
        assert!(msg.contains("not the same prompts"), "{msg}");
        let err = companions(&d, "other", "niah", &own);
        assert!(err.is_ok_and(|r| r.is_empty()), "no file of model `other`");
        let _ = std::fs::remove_dir_all(&d);
    }
}
