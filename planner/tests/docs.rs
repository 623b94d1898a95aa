//! The documentation against the code: `docs/methods.md` lists exactly the method table's names,
//! in its order, and `tools/methods.sh` every one of them once; every Markdown file a code comment
//! cites exists; every relative link in the README, CONTRIBUTING and `docs/` reaches a file (and,
//! with a `#fragment`, one of its headings). Plain file reads, no model: cheap enough for every
//! `cargo test -p kvplan-planner`.

mod common;

use common::{links, Walk};
use kvplan_planner::methods::NAMES;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root (the planner crate lives one level below it).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first-column names of the Markdown table in `text` whose rows start with "| `name` |".
fn table_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn methods_doc_lists_the_method_table_in_order() {
    let listed = table_names(&read(&root().join("docs/methods.md")));
    assert_eq!(
        listed, NAMES,
        "docs/methods.md must list the method table's names (`method_table!`, planner/src/method.rs) in order"
    );
}

#[test]
fn the_tools_method_list_holds_every_method_of_the_table_once() {
    let text = read(&root().join("tools/methods.sh"));
    let line = text.lines().find_map(|l| l.strip_prefix("KVPLAN_METHODS="));
    let listed: Vec<&str> = line
        .unwrap_or_default()
        .trim_matches('"')
        .split(',')
        .collect();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let mut table = NAMES.to_vec();
    table.sort_unstable();
    assert_eq!(
        (sorted, listed.len()),
        (table, NAMES.len()),
        "tools/methods.sh's KVPLAN_METHODS must name every method of the table \
         (`method_table!`, planner/src/method.rs) once"
    );
}

/// Source files whose comments are checked, by extension, with their comment marker.
const COMMENTED: &[(&str, &str)] = &[("rs", "//"), ("sh", "#"), ("py", "#"), ("toml", "#")];

/// Names of files the code writes, which comments name without citing a document.
const WRITTEN: &[&str] = &[
    "niah.md",
    "ruler.md",
    "ppl.md",
    "leaderboard.md",
    "summary.md",
];

/// The Markdown paths a comment line cites: runs of path characters ending in `.md`, leaving out
/// templates (`<out>/<model>.niah.md`), a bare extension (`.md`), URLs and the files in WRITTEN.
fn cited_md(comment: &str) -> Vec<String> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-<>{}*$~".contains(c);
    let mut found = Vec::new();
    let chars: Vec<char> = comment.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if !is_path(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_path(chars[i]) {
            i += 1;
        }
        let token: String = chars[start..i].iter().collect();
        let token = token.trim_end_matches('.');
        let Some(stem) = token.strip_suffix(".md") else {
            continue;
        };
        let template = token.contains(['<', '>', '{', '}', '*', '$']);
        let url = token.starts_with("//");
        let bare_extension = stem.is_empty() || stem.ends_with('/');
        if !template && !url && !bare_extension && !WRITTEN.contains(&token) {
            found.push(token.to_string());
        }
    }
    found
}

/// Whether `cited` names a file relative to the citing file's folder or to any folder above it,
/// up to the repository root (comments cite paths from the root, the crate or their own folder).
fn resolves(cited: &str, file: &Path, root: &Path) -> bool {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d.join(cited).is_file() {
            return true;
        }
        if d == root {
            break;
        }
        dir = d.parent();
    }
    false
}

#[test]
fn every_markdown_file_a_comment_cites_exists() {
    let root = fs::canonicalize(root()).unwrap_or_else(|e| panic!("repository root: {e}"));
    let mut files = Vec::new();
    Walk::new(&root).files(&root, &mut files);
    files.sort();
    let mut missing = Vec::new();
    let mut checked = 0;
    for file in &files {
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        let Some(&(_, marker)) = COMMENTED.iter().find(|(e, _)| *e == ext) else {
            continue;
        };
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let Some(comment) = line.trim_start().strip_prefix(marker) else {
                continue;
            };
            for cited in cited_md(comment) {
                checked += 1;
                if !resolves(&cited, file, &root) {
                    let rel = file.strip_prefix(&root).unwrap_or(file);
                    missing.push(format!("{}:{}: {cited}", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(
        checked > 0,
        "no comment cites a Markdown file: is the walk finding the sources?"
    );
    assert!(
        missing.is_empty(),
        "comments cite Markdown files that do not exist:\n{}",
        missing.join("\n")
    );
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces to `-`,
/// everything else dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_docs_reaches_a_file_and_heading() {
    let root = root();
    let mut docs = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut under_docs = Vec::new();
    Walk::new(&root).files(&root.join("docs"), &mut under_docs);
    under_docs.retain(|p| p.extension().is_some_and(|e| e == "md"));
    under_docs.sort();
    docs.extend(under_docs);
    let mut broken = Vec::new();
    for doc in &docs {
        let text = read(doc);
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let dir = doc.parent().unwrap_or(&root);
            let file = if path.is_empty() {
                doc.clone()
            } else {
                dir.join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", doc.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if file.is_file() && !anchors(&read(&file)).iter().any(|a| a == fragment) {
                    broken.push(format!("{}: {target} (no such heading)", doc.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn tools_readme_lists_every_script_in_tools() {
    let dir = root().join("tools");
    let listing = read(&dir.join("README.md"));
    let mut missing = Vec::new();
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a tools/ entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let script = [".sh", ".py"].iter().any(|ext| name.ends_with(ext));
        if path.is_file() && script && !listing.contains(&format!("`{name}`")) {
            missing.push(name.to_string());
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "tools/README.md must list every script in tools/ (as `name`); missing: {missing:?}"
    );
}
