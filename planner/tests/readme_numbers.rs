//! The numbers the README and docs/results.md quote are the numbers of the committed tables
//! (issue 58: "every README number matches its table"). The tables under `results/` are rendered
//! from the records alone (`kvplan eval leaderboard`); the prose is written by hand, and a number
//! copied before a re-render goes stale without anything failing — this test is what fails.
//!
//! Two checks:
//! - **The README's result tables.** A bold model name and a link to its table
//!   (`([table](results/<board>/leaderboard.md), N prompts):`), then a Markdown table whose
//!   header names targets (`50%: score [95% CI]`, `share of FullKV`, …). Every row's score and
//!   share at each target must be those of the linked table's row for that method at that target
//!   (`FullKV` is the linked table's `full`, `DuoAttention` its `kvpress-duo`; a name kvplan does
//!   not have is looked up as `kvpress-<name>`; a row naming no single method — "kvpress's best
//!   run here: …" — must equal *some* row at that target).
//! - **Every interval quoted in prose.** Each `x [lo, hi]` in the README must appear in a results
//!   table the README links; each in docs/results.md in some Markdown file under `results/`
//!   (docs/results.md links dozens). A leading `+` and the typographic minus (−) are ignored.
//!
//! Plain file reads, beside `docs.rs` (whose link reader and folder walk it shares, `common`).

mod common;

use common::{links, Walk};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (the planner crate lives one level below it).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` with the typographic minus written as `-`.
fn ascii_minus(text: &str) -> String {
    text.replace('\u{2212}', "-")
}

/// The decimal number (optional sign, digits, a point and digits) that ends `s`, if any.
fn trailing_number(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let mut i = b.len();
    while i > 0 && b[i - 1].is_ascii_digit() {
        i -= 1;
    }
    let frac = b.len() - i;
    if frac == 0 || i == 0 || b[i - 1] != b'.' {
        return None;
    }
    i -= 1;
    let int_end = i;
    while i > 0 && b[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i == int_end {
        return None;
    }
    if i > 0 && matches!(b[i - 1], b'-' | b'+') {
        i -= 1;
    }
    // Part of a longer token (a version, a word) is not a quoted number.
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.') {
        return None;
    }
    Some(&s[i..])
}

/// The decimal number that starts `s` and its length, if any.
fn leading_number(s: &str) -> Option<(&str, usize)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && matches!(b[i], b'-' | b'+') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == int_start || i >= b.len() || b[i] != b'.' {
        return None;
    }
    i += 1;
    let frac_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    (i > frac_start).then(|| (&s[..i], i))
}

/// A number as compared: without a leading `+`.
fn unsigned_plus(n: &str) -> &str {
    n.strip_prefix('+').unwrap_or(n)
}

/// Every interval `x [lo, hi]` of `text` (after [`ascii_minus`], white space — line breaks of
/// wrapped prose included — read as one space), as `"x [lo, hi]"` without leading `+` signs.
fn intervals(text: &str) -> Vec<String> {
    let text = ascii_minus(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for (at, _) in text.match_indices(" [") {
        let Some(x) = trailing_number(&text[..at]) else {
            continue;
        };
        let rest = &text[at + 2..];
        let Some((lo, n)) = leading_number(rest) else {
            continue;
        };
        let Some(rest) = rest[n..].strip_prefix(", ") else {
            continue;
        };
        let Some((hi, n)) = leading_number(rest) else {
            continue;
        };
        if !rest[n..].starts_with(']') {
            continue;
        }
        out.push(format!(
            "{} [{}, {}]",
            unsigned_plus(x),
            unsigned_plus(lo),
            unsigned_plus(hi)
        ));
    }
    out
}

/// The cells of a Markdown table row (`| a | b |`), trimmed; `None` for other lines.
fn cells(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(|c| c.trim().to_string()).collect())
}

/// Whether `cells` is a table's delimiter row (`|---|---:|`).
fn is_delimiter(cells: &[String]) -> bool {
    cells
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|x| matches!(x, '-' | ':')))
}

/// A Markdown table: its header cells and its rows.
#[derive(Debug)]
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// The table that starts at `lines[start]` (a header row followed by a delimiter row).
fn table_at(lines: &[&str], start: usize) -> Option<Table> {
    let header = cells(lines.get(start)?)?;
    if !is_delimiter(&cells(lines.get(start + 1)?)?) {
        return None;
    }
    let rows = lines[start + 2..]
        .iter()
        .map_while(|l| cells(l))
        .collect::<Vec<_>>();
    Some(Table { header, rows })
}

/// A README results table: the table it links and what it shows.
#[derive(Debug)]
struct Quoted {
    /// The line of the link (1-based).
    line: usize,
    link: String,
    table: Table,
}

/// The README's result tables: a line linking `([table](PATH)` followed (after a blank line at
/// most) by a table.
fn quoted_tables(readme: &str) -> Vec<Quoted> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("([table](") else {
            continue;
        };
        let rest = &line[at + "([table](".len()..];
        let Some(end) = rest.find(')') else {
            continue;
        };
        let link = rest[..end].to_string();
        let start = (i + 1..lines.len().min(i + 3)).find(|&j| cells(lines[j]).is_some());
        if let Some(table) = start.and_then(|j| table_at(&lines, j)) {
            out.push(Quoted {
                line: i + 1,
                link,
                table,
            });
        }
    }
    out
}

/// The target a README header cell names (`50%: score [95% CI]` → `50%`).
fn header_target(cell: &str) -> Option<&str> {
    let (target, what) = cell.split_once(':')?;
    (target.ends_with('%') && what.trim().starts_with("score")).then_some(target)
}

/// The method a README row names, as the rendered tables label it: the name before any
/// parenthesis, lower-cased; `FullKV` is `full`, `DuoAttention` kvpress's `duo`.
fn method_key(label: &str) -> String {
    let name = label.split(" (").next().unwrap_or(label).trim();
    let key = name.to_lowercase();
    match key.as_str() {
        "fullkv" => "full".into(),
        "duoattention" => "kvpress-duo".into(),
        _ => key,
    }
}

/// A rendered table's row: its method, target (`None` for FullKV), score and share of FullKV.
#[derive(Debug)]
struct BoardRow {
    method: String,
    target: Option<String>,
    score: String,
    share: String,
}

/// The rows of a rendered leaderboard table (`| method @ target | effective ratio | score [95%
/// CI] | of FullKV | …`).
fn board_rows(text: &str) -> Vec<BoardRow> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for i in 0..lines.len() {
        let Some(header) = cells(lines[i]) else {
            continue;
        };
        if header.first().map(String::as_str) != Some("method @ target") {
            continue;
        }
        let col = |name: &str| header.iter().position(|h| h.starts_with(name));
        let (Some(score), Some(share)) = (col("score"), col("of FullKV")) else {
            continue;
        };
        let Some(table) = table_at(&lines, i) else {
            continue;
        };
        for row in table.rows {
            let label = &row[0];
            let (method, target) = match label.split_once(" @ ") {
                Some((m, t)) => (
                    m.to_string(),
                    Some(t.split(" (").next().unwrap_or(t).to_string()),
                ),
                None => (label.clone(), None),
            };
            out.push(BoardRow {
                method,
                target,
                score: row.get(score).cloned().unwrap_or_default(),
                share: row.get(share).cloned().unwrap_or_default(),
            });
        }
    }
    out
}

/// What is wrong with one README table against its board's rows: one line per cell that does
/// not match, naming the row, the target, what the README says and what the table holds.
fn mismatches(quoted: &Quoted, board: &[BoardRow]) -> Vec<String> {
    let header = &quoted.table.header;
    let mut out = Vec::new();
    let targets: Vec<(usize, &str)> = header
        .iter()
        .enumerate()
        .filter_map(|(i, h)| header_target(h).map(|t| (i, t)))
        .collect();
    if targets.is_empty() {
        out.push(format!(
            "README.md:{}: the table after it names no target (`50%: score …`)",
            quoted.line
        ));
    }
    for row in &quoted.table.rows {
        let key = method_key(&row[0]);
        for &(col, target) in &targets {
            let (score, share) = (
                ascii_minus(row.get(col).map(String::as_str).unwrap_or("")),
                row.get(col + 1).cloned().unwrap_or_default(),
            );
            let at_target = |r: &&BoardRow| {
                if key == "full" {
                    r.method == "full"
                } else {
                    r.target.as_deref() == Some(target)
                }
            };
            let named: Vec<&BoardRow> = board
                .iter()
                .filter(at_target)
                .filter(|r| r.method == key || r.method == format!("kvpress-{key}"))
                .collect();
            let candidates: Vec<&BoardRow> = if named.is_empty() {
                board.iter().filter(at_target).collect()
            } else {
                named
            };
            let found = candidates
                .iter()
                .any(|r| ascii_minus(&r.score) == score && r.share == share);
            if !found {
                let held = candidates
                    .iter()
                    .map(|r| format!("{} {} ({})", r.method, r.score, r.share))
                    .collect::<Vec<_>>()
                    .join("; ");
                out.push(format!(
                    "README.md:{}: `{}` at {target}: the README says {score} ({share}), {} holds {}",
                    quoted.line,
                    row[0],
                    quoted.link,
                    if held.is_empty() {
                        "no such row".to_string()
                    } else {
                        held
                    }
                ));
            }
        }
    }
    out
}

/// The `results/…md` files `text` links (relative to `base`, the linking file's folder).
fn linked_results(text: &str, base: &Path) -> BTreeSet<PathBuf> {
    links(text)
        .iter()
        .map(|link| link.split('#').next().unwrap_or(""))
        .filter(|link| link.ends_with(".md") && link.contains("results/"))
        .map(|link| base.join(link))
        .collect()
}

/// Every Markdown file under `dir`.
fn markdown_under(root: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    Walk::new(root).files(dir, &mut files);
    files.retain(|p| p.extension().is_some_and(|e| e == "md"));
    files
}

/// The intervals of `quoted_in` that none of `sources` holds.
fn unsourced(quoted_in: &str, sources: &[PathBuf]) -> Vec<String> {
    let held: BTreeSet<String> = sources.iter().flat_map(|p| intervals(&read(p))).collect();
    intervals(quoted_in)
        .into_iter()
        .filter(|i| !held.contains(i))
        .collect()
}

#[test]
fn the_readme_result_tables_are_their_linked_tables() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let quoted = quoted_tables(&readme);
    assert!(
        quoted.len() >= 2,
        "README.md: expected the two models' result tables, found {}",
        quoted.len()
    );
    let mut wrong = Vec::new();
    for q in &quoted {
        assert!(
            q.table.rows.len() >= 3,
            "README.md:{}: a table of {} rows",
            q.line,
            q.table.rows.len()
        );
        let board = board_rows(&read(&root.join(&q.link)));
        assert!(
            !board.is_empty(),
            "{}: no `method @ target` table in it",
            q.link
        );
        wrong.extend(mismatches(q, &board));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_interval_the_readme_quotes_is_in_a_table_it_links() {
    let root = root();
    let readme = read(&root.join("README.md"));
    let sources: Vec<PathBuf> = linked_results(&readme, &root).into_iter().collect();
    assert!(!sources.is_empty(), "README.md links no results table");
    assert!(
        intervals(&readme).len() >= 10,
        "README.md: fewer intervals than its two tables hold"
    );
    let missing = unsourced(&readme, &sources);
    assert!(
        missing.is_empty(),
        "README.md quotes intervals no table it links holds ({}): {}",
        sources
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap_or(p).display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        missing.join("; ")
    );
}

#[test]
fn every_interval_docs_results_quotes_is_in_a_results_table() {
    let root = root();
    let doc = read(&root.join("docs/results.md"));
    let sources = markdown_under(&root, &root.join("results"));
    let missing = unsourced(&doc, &sources);
    assert!(
        missing.is_empty(),
        "docs/results.md quotes intervals no Markdown file under results/ holds: {}",
        missing.join("; ")
    );
}

#[test]
fn intervals_are_read_with_their_signs_and_only_whole_numbers() {
    let text = "HeadKV † − KVzip: −0.9 [−3.4, 1.7], mdd 3.7; +15.2 [11.0, +19.4]; v0.5.5 [1.0, 2.0]; \
                [1.0, 2.0]; 3 [1.0, 2.0]; 4.5 [1.0, 2.0) ; 12.25 [10.5, 14.75]; wrapped −1.3\n  [−4.0, 1.5]";
    assert_eq!(
        intervals(text),
        [
            "-0.9 [-3.4, 1.7]",
            "15.2 [11.0, 19.4]",
            "12.25 [10.5, 14.75]",
            "-1.3 [-4.0, 1.5]"
        ]
    );
}

/// A hand-made README table and board: equal cells pass, a stale score or share is named with
/// the row, the target and what the table holds, and a row no method names matches any row at
/// its target.
#[test]
fn a_stale_readme_cell_is_named_with_what_the_table_holds() {
    let board = board_rows(
        "| method @ target | effective ratio | score [95% CI] | of FullKV | n |\n\
         |---|---:|---:|---:|---:|\n\
         | full | 0 (FullKV) | 66.1 [62.2, 69.9] | 100% | 260 |\n\
         | headkv † @ 50% | 0.500 | 65.2 [61.7, 68.9] | 99% | 260 |\n\
         | kvpress-kvzip @ 50% | 0.500 | 64.0 [60.0, 68.0] | 97% | 260 |\n\
         | spindle @ 50% (lands at 0.54) | 0.539 | 20.7 [18.0, 23.4] | 31% | 260 |\n\
         | snapkv @ 50% | 0.500 | 26.3 [22.9, 29.7] | 40% | 260 |\n",
    );
    assert_eq!(board.len(), 5);
    assert_eq!(board[3].target.as_deref(), Some("50%"));
    assert_eq!(board[3].method, "spindle");
    let readme = |headkv: &str, share: &str| {
        format!(
            "**Model**\n([table](x/leaderboard.md), 260 prompts):\n\n\
             | method | 50%: score [95% CI] | share of FullKV |\n|---|---:|---:|\n\
             | FullKV | 66.1 [62.2, 69.9] | 100% |\n\
             | HeadKV † (kvplan's best) | {headkv} | {share} |\n\
             | KVzip (kvpress's best) | 64.0 [60.0, 68.0] | 97% |\n\
             | kvpress's best run here: KVzip | 64.0 [60.0, 68.0] | 97% |\n"
        )
    };
    let good = quoted_tables(&readme("65.2 [61.7, 68.9]", "99%"));
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].link, "x/leaderboard.md");
    assert_eq!(good[0].table.rows.len(), 4);
    assert!(mismatches(&good[0], &board).is_empty());

    let stale = quoted_tables(&readme("65.3 [61.7, 68.9]", "99%"));
    let wrong = mismatches(&stale[0], &board);
    assert_eq!(
        wrong,
        ["README.md:2: `HeadKV † (kvplan's best)` at 50%: the README says 65.3 [61.7, 68.9] (99%), \
          x/leaderboard.md holds headkv † 65.2 [61.7, 68.9] (99%)"]
    );
    let share = quoted_tables(&readme("65.2 [61.7, 68.9]", "98%"));
    assert_eq!(mismatches(&share[0], &board).len(), 1);
    // The composite row is checked against every row at the target: a number none holds fails.
    let composite = quoted_tables(&readme("65.2 [61.7, 68.9]", "99%").replace(
        "| kvpress's best run here: KVzip | 64.0",
        "| kvpress's best run here: KVzip | 64.1",
    ));
    assert_eq!(mismatches(&composite[0], &board).len(), 1);
}

/// `DuoAttention` is kvpress's `duo`, not a composite row: quoting another press's numbers under
/// its name fails even where that press is at the same target.
#[test]
fn duoattention_is_read_as_kvpress_duo() {
    assert_eq!(
        method_key("DuoAttention (kvpress's best at 50%)"),
        "kvpress-duo"
    );
    assert_eq!(method_key("FullKV"), "full");
    let board = board_rows(
        "| method @ target | effective ratio | score [95% CI] | of FullKV | n |\n\
         |---|---:|---:|---:|---:|\n\
         | kvpress-duo @ 50% | 0.507 | 66.5 [63.0, 69.9] | 101% | 260 |\n\
         | kvpress-kvzip @ 50% | 0.500 | 66.1 [62.3, 69.9] | 100% | 260 |\n",
    );
    let readme = |row: &str| {
        format!(
            "**Model** ([table](x/leaderboard.md), 260 prompts):\n\n\
             | method | 50%: score [95% CI] | share of FullKV |\n|---|---:|---:|\n\
             | DuoAttention | {row} |\n"
        )
    };
    let right = quoted_tables(&readme("66.5 [63.0, 69.9] | 101%"));
    assert_eq!(right.len(), 1);
    assert!(mismatches(&right[0], &board).is_empty());
    let kvzips = quoted_tables(&readme("66.1 [62.3, 69.9] | 100%"));
    assert_eq!(
        mismatches(&kvzips[0], &board),
        [
            "README.md:1: `DuoAttention` at 50%: the README says 66.1 [62.3, 69.9] (100%), \
          x/leaderboard.md holds kvpress-duo 66.5 [63.0, 69.9] (101%)"
        ]
    );
}
