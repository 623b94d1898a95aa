//! Two records files on the cells they share (`kvplan eval agree`): per method, how many shared
//! cells have the same answer text, the same score and the same effective ratio (to 6 digits),
//! and the first few whose text differs. For cross-checks: kvpress on the CPU against kvpress on
//! a GPU, a re-run against the committed records, kvplan's SnapKV configured as kvpress's against
//! kvpress's SnapKV (`--as snapkv=kvpress-snapkv`: the methods differ by name only).
//!
//! A cell is keyed as a run keys it ([`CellKey`]: task, length, depth, example, method, budget or
//! target ratio); reads only.

use std::collections::{BTreeMap, HashMap};

use crate::records::{CellKey, CellRecord, Record};

/// One method's agreement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodAgreement {
    /// Method (file A's name).
    pub method: String,
    /// Cells both files hold.
    pub shared: usize,
    /// Of them, with the same answer text.
    pub same_text: usize,
    /// With the same score.
    pub same_score: usize,
    /// With the same effective ratio to 6 digits (or both without one).
    pub same_effective: usize,
}

/// A shared cell whose answer text differs: its label, then A's and B's text and score.
#[derive(Debug, Clone, PartialEq)]
pub struct Differing {
    /// `task #example, method @ budget`.
    pub cell: String,
    /// File A's answer and score.
    pub a: (String, f64),
    /// File B's answer and score.
    pub b: (String, f64),
}

/// How far two records files agree.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Cells in A, in B.
    pub cells: (usize, usize),
    /// Per method of the shared cells, by name.
    pub methods: Vec<MethodAgreement>,
    /// The first `show` cells of each method whose text differs.
    pub differing: Vec<Differing>,
    /// Whether any shared cell's text differs.
    pub texts_differ: bool,
}

/// `a` and `b` on the cells both hold, B's methods renamed by `renames` (`(A's name, B's name)`)
/// first; at most `show` differing cells listed per method.
pub fn agree(a: &[Record], b: &[Record], renames: &[(String, String)], show: usize) -> Agreement {
    let to_a: HashMap<&str, &str> = renames
        .iter()
        .map(|(x, y)| (y.as_str(), x.as_str()))
        .collect();
    // Only a renamed record is copied, to key it under A's name.
    let key_b = |r: &Record| match to_a.get(r.method.as_str()) {
        Some(m) => Record {
            method: (*m).to_string(),
            ..r.clone()
        }
        .key(),
        None => r.key(),
    };
    let theirs: HashMap<CellKey, &Record> = b.iter().map(|r| (key_b(r), r)).collect();
    let mut by: BTreeMap<&str, Vec<(&Record, &Record)>> = BTreeMap::new();
    let mut ours: Vec<(CellKey, &Record)> = a.iter().map(|r| (r.key(), r)).collect();
    ours.sort_by(|x, y| x.0.cmp(&y.0));
    ours.dedup_by(|x, y| x.0 == y.0);
    for (k, r) in &ours {
        if let Some(o) = theirs.get(k) {
            by.entry(r.method.as_str()).or_default().push((r, o));
        }
    }
    let effective = |r: &Record| r.ratio.as_ref().map(|c| (c.effective * 1e6).round() as i64);
    let mut differing = Vec::new();
    let methods = by
        .into_iter()
        .map(|(method, pairs)| {
            let count = |same: &dyn Fn(&Record, &Record) -> bool| {
                pairs.iter().filter(|(x, y)| same(x, y)).count()
            };
            differing.extend(
                pairs
                    .iter()
                    .filter(|(x, y)| x.response != y.response)
                    .take(show)
                    .map(|(x, y)| Differing {
                        cell: format!("{} #{}, {}", x.task, x.example, x.label()),
                        a: (x.response.clone(), x.score),
                        b: (y.response.clone(), y.score),
                    }),
            );
            MethodAgreement {
                method: method.to_string(),
                shared: pairs.len(),
                same_text: count(&|x, y| x.response == y.response),
                same_score: count(&|x, y| x.score == y.score),
                same_effective: count(&|x, y| effective(x) == effective(y)),
            }
        })
        .collect::<Vec<_>>();
    let texts_differ = methods.iter().any(|m| m.same_text < m.shared);
    Agreement {
        cells: (a.len(), b.len()),
        methods,
        differing,
        texts_differ,
    }
}

impl Agreement {
    /// The table (a row per method) and the differing cells, under a line naming the files.
    pub fn markdown(&self, a: &str, b: &str) -> String {
        let shared: usize = self.methods.iter().map(|m| m.shared).sum();
        if shared == 0 {
            return format!(
                "no cell in both files ({} in {a}, {} in {b})\n",
                self.cells.0, self.cells.1
            );
        }
        let mut out = format!(
            "{shared} cells in both ({} in {a}, {} in {b})\n\n\
             | method | shared | same text | same score | same effective ratio |\n\
             |---|---:|---:|---:|---:|\n",
            self.cells.0, self.cells.1
        );
        for m in &self.methods {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                m.method, m.shared, m.same_text, m.same_score, m.same_effective
            ));
        }
        for d in &self.differing {
            out.push_str(&format!(
                "\n{}: {:?} (score {}) vs {:?} (score {})",
                d.cell, d.a.0, d.a.1, d.b.0, d.b.1
            ));
        }
        if !self.differing.is_empty() {
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::test_record;

    fn rec(example: usize, method: &str, response: &str, score: f64) -> Record {
        Record {
            example,
            response: response.into(),
            ..test_record("niah", method, Some(128), 1024, score, 0.5)
        }
    }

    #[test]
    fn shared_cells_are_counted_per_method_and_a_rename_pairs_two_names() {
        let a = vec![
            rec(0, "snapkv", "7", 1.0),
            rec(1, "snapkv", "7", 1.0),
            rec(2, "snapkv", "7", 1.0),
            rec(0, "h2o", "x", 0.0),
        ];
        // B: kvpress's name for SnapKV; example 1's text differs (same score), example 2 absent.
        let b = vec![
            rec(0, "kvpress-snapkv", "7", 1.0),
            rec(1, "kvpress-snapkv", "7.", 1.0),
            rec(0, "h2o", "x", 0.0),
        ];
        let renames = [("snapkv".to_string(), "kvpress-snapkv".to_string())];
        let g = agree(&a, &b, &renames, 5);
        let row = |m: &str| g.methods.iter().find(|x| x.method == m).expect(m).clone();
        let snap = row("snapkv");
        assert_eq!(
            (
                snap.shared,
                snap.same_text,
                snap.same_score,
                snap.same_effective
            ),
            (2, 1, 2, 2)
        );
        assert_eq!(row("h2o").same_text, 1);
        assert!(g.texts_differ);
        assert_eq!(g.differing.len(), 1);
        assert_eq!(g.differing[0].b.0, "7.");
        let md = g.markdown("A", "B");
        assert!(md.starts_with("3 cells in both (4 in A, 3 in B)"), "{md}");
        assert!(md.contains("| snapkv | 2 | 1 | 2 | 2 |"), "{md}");
        // Without the rename only H2O is shared, and it agrees.
        let plain = agree(&a, &b, &[], 5);
        assert_eq!(plain.methods.len(), 1);
        assert!(!plain.texts_differ);
        // Nothing shared says so.
        let none = agree(&a[..1], &b[2..], &[], 5);
        assert!(none
            .markdown("A", "B")
            .starts_with("no cell in both files (1 in A, 1 in B)"));
    }
}
