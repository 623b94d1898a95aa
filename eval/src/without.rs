//! A records file without some rows' cells (`kvplan eval without`), so that a run into the copy
//! measures them again (a run skips every cell its records already hold) while the table still
//! pairs them with the cells kept. A row is [`RowName`]'s: a bare method drops every cell of it
//! (`trtllm:headkv-r`, a control such as `headkv@perm1`), `METHOD@BUDGET` its cells at that
//! budget, `METHOD@RATIO` those at that target ratio.

use crate::paired::RowName;
use crate::records::{Record, RecordsFile};
use crate::{Error, Result};

/// `file` without the cells of `rows`, and how many were dropped; an error naming every row that
/// has no cell in it (nothing is dropped then).
pub fn without(
    file: &RecordsFile<Record>,
    rows: &[RowName],
) -> Result<(RecordsFile<Record>, usize)> {
    let idle: Vec<String> = rows
        .iter()
        .filter(|row| !file.records.iter().any(|r| drops(row, r)))
        .map(RowName::to_string)
        .collect();
    if !idle.is_empty() {
        return Err(Error::Request(format!(
            "no cells of {}; nothing written",
            idle.join(", ")
        )));
    }
    let mut out = file.clone();
    out.records
        .retain(|r| !rows.iter().any(|row| drops(row, r)));
    let dropped = file.records.len() - out.records.len();
    Ok((out, dropped))
}

/// Whether `row` names the cell `r`.
fn drops(row: &RowName, r: &Record) -> bool {
    r.method == row.method
        && match (row.budget, row.ratio) {
            (Some(b), _) => r.budget == Some(b),
            (None, Some(t)) => r
                .target_ratio()
                .is_some_and(|x| crate::ratio::key(x) == crate::ratio::key(t)),
            (None, None) => true,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratio::RatioCell;
    use crate::records::test_record;

    #[test]
    fn rows_drop_a_method_a_budget_or_a_ratio_and_an_absent_row_writes_nothing() {
        let mut file = RecordsFile::<Record>::new(Default::default());
        for (method, budget) in [("snapkv", 128), ("snapkv", 512), ("headkv@perm1", 128)] {
            file.insert(test_record("niah", method, Some(budget), 1024, 1.0, 0.5));
        }
        file.insert(Record {
            ratio: Some(RatioCell {
                target: 0.5,
                effective: 0.5,
                budget: 600,
                probes: 3,
            }),
            ..test_record("niah", "tova", None, 1024, 1.0, 0.5)
        });
        let rows = |s: &[&str]| -> Vec<RowName> { s.iter().map(|x| x.parse().expect(x)).collect() };
        let (kept, n) =
            without(&file, &rows(&["snapkv@512", "headkv@perm1", "tova@0.5"])).expect("rows");
        assert_eq!(n, 3);
        assert_eq!(kept.records.len(), 1);
        assert_eq!(kept.records[0].budget, Some(128));
        let (kept, n) = without(&file, &rows(&["snapkv"])).expect("every budget");
        assert_eq!((n, kept.records.len()), (2, 2));
        let e = without(&file, &rows(&["snapkv@256", "h2o"])).expect_err("absent");
        assert!(e.to_string().contains("no cells of snapkv@256, h2o"), "{e}");
    }
}
