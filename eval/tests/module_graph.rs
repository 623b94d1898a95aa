//! The eval crate's modules depend on each other one way only: no module names, through a
//! `crate::` path, a module that names it back, directly or through others. Data flows from the
//! tasks (`tasks::niah`, `tasks::ruler`, `tasks::ppl`) through the driver and the runner into
//! the records, from the records through `aggregate` into the results, and from there into the
//! tables; shared pieces (scoring, statistics, prompts, cells) sit below all of them.
//!
//! A node is a top-level module of `eval/src` (a file or a folder), each task under
//! `eval/src/tasks/` its own (`tasks` itself is `tasks/mod.rs`); an edge is any `crate::` path
//! in code, tests included, comments not. A module's own children (`mod x;`, `super::`) and the
//! crate root (`Error`, `Result`) are not edges. `cargo test -p kvplan-eval --test module_graph
//! -- --nocapture` prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module → the modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The modules `lib.rs` declares (`pub mod x;`, `mod x;`).
fn modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub mod ")
                .or_else(|| l.strip_prefix("mod "))?;
            Some(rest.strip_suffix(';')?.to_string())
        })
        .collect()
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap_or_else(|e| panic!("{e}")).path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The node of a file at `rel` (relative to `src`): its top-level module, `tasks::<task>` for a
/// task's files; `None` for the crate root.
fn node(rel: &Path) -> Option<String> {
    let parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [root] if root == "lib" => None,
        [tasks, task, ..] if tasks == "tasks" && task != "mod" => Some(format!("tasks::{task}")),
        [first, ..] => Some(first.clone()),
        [] => None,
    }
}

/// `text` without its line comments (doc comments included).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_ws(s: &[u8], i: &mut usize) {
    while *i < s.len() && s[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

/// The paths of the use tree at `s[*i..]` (after a `crate::`), each after `prefix`:
/// `a::b`, `a::{b, c::d as e}`, `{a, b::{self, c}}`.
fn use_tree(s: &[u8], i: &mut usize, prefix: &str, out: &mut Vec<String>) {
    skip_ws(s, i);
    if s.get(*i) == Some(&b'{') {
        *i += 1;
        loop {
            skip_ws(s, i);
            match s.get(*i) {
                None => return,
                Some(b'}') => {
                    *i += 1;
                    return;
                }
                Some(b',') => *i += 1,
                Some(_) => {
                    let before = *i;
                    use_tree(s, i, prefix, out);
                    skip_ws(s, i);
                    if s[*i..].starts_with(b"as ") {
                        *i += 3;
                        skip_ws(s, i);
                        while *i < s.len() && is_ident(s[*i]) {
                            *i += 1;
                        }
                    }
                    if *i == before {
                        *i += 1;
                    }
                }
            }
        }
    }
    let mut path = prefix.to_string();
    loop {
        let start = *i;
        while *i < s.len() && is_ident(s[*i]) {
            *i += 1;
        }
        if *i == start {
            break;
        }
        if !path.is_empty() {
            path.push_str("::");
        }
        path.push_str(&String::from_utf8_lossy(&s[start..*i]));
        if !s[*i..].starts_with(b"::") {
            break;
        }
        *i += 2;
        if s.get(*i) == Some(&b'{') {
            use_tree(s, i, &path, out);
            return;
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// Every path named after `crate::` in `code`.
fn crate_paths(code: &str) -> Vec<String> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = code[at..].find("crate::") {
        let start = at + found;
        let mut i = start + "crate::".len();
        if start == 0 || !is_ident(s[start - 1]) && s[start - 1] != b'$' {
            use_tree(s, &mut i, "", &mut out);
        }
        at = i.max(start + 1);
    }
    out
}

/// The node a path names: its first segment when that is a module, `tasks::<task>` for a
/// task's items.
fn target(path: &str, modules: &BTreeSet<String>, tasks: &BTreeSet<String>) -> Option<String> {
    let mut segs = path.split("::");
    let first = segs.next()?;
    if !modules.contains(first) {
        return None;
    }
    match segs.next() {
        Some(task) if first == "tasks" && tasks.contains(task) => Some(format!("tasks::{task}")),
        _ => Some(first.to_string()),
    }
}

/// The module graph of the crate at `src`.
fn graph(src: &Path) -> Graph {
    let modules = modules(&read(&src.join("lib.rs")));
    let tasks: BTreeSet<String> = files(&src.join("tasks"))
        .iter()
        .filter_map(|f| {
            node(f.strip_prefix(src).ok()?)?
                .strip_prefix("tasks::")
                .map(String::from)
        })
        .collect();
    let mut g = Graph::new();
    for f in files(src) {
        let rel = f.strip_prefix(src).unwrap_or(&f);
        let Some(from) = node(rel) else { continue };
        let names = crate_paths(&code(&read(&f)));
        let edges = g.entry(from.clone()).or_default();
        for t in names.iter().filter_map(|p| target(p, &modules, &tasks)) {
            if t != from {
                edges.insert(t);
            }
        }
    }
    g
}

/// A cycle of `g` (its nodes in order, the first repeated at the end), if there is one.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &Graph,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == n) {
            let mut c = path[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(n, g, &mut done, &mut Vec::new()))
}

fn show(g: &Graph) -> String {
    g.iter()
        .map(|(n, to)| {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            format!("{n:14} -> {}\n", to.join(", "))
        })
        .collect()
}

#[test]
fn eval_modules_depend_on_each_other_one_way() {
    let g = graph(&src());
    print!("{}", show(&g));
    for n in [
        "records",
        "aggregate",
        "results",
        "table",
        "driver",
        "runner",
        "tasks::niah",
    ] {
        assert!(g.contains_key(n), "no module {n} found:\n{}", show(&g));
    }
    if let Some(c) = cycle(&g) {
        panic!("module cycle {}\n{}", c.join(" → "), show(&g));
    }
}

#[test]
fn records_only_store_and_aggregation_reads_them() {
    let g = graph(&src());
    let of = |n: &str| g.get(n).cloned().unwrap_or_default();
    for above in ["aggregate", "table", "stats", "driver", "runner"] {
        assert!(!of("records").contains(above), "records → {above}");
    }
    assert!(of("aggregate").contains("records") && of("aggregate").contains("results"));
    assert!(!of("results").contains("records"), "results → records");
}

#[test]
fn use_trees_and_cycles_are_read_as_written() {
    let text = "use crate::{a::{self, B}, c as d};\nlet x = crate::tasks::niah::f(crate::e::G);\n\
                // crate::comment\nuse kvplan_crate::z;";
    let paths = crate_paths(&code(text));
    assert_eq!(
        paths,
        ["a::self", "a::B", "c", "tasks::niah::f", "e::G"],
        "{paths:?}"
    );
    let g: Graph = [
        ("a", &["b"][..]),
        ("b", &["c"]),
        ("c", &["a"]),
        ("d", &["a"]),
    ]
    .into_iter()
    .map(|(n, to)| (n.to_string(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    assert_eq!(
        cycle(&g).map(|c| c.join(" → ")),
        Some("a → b → c → a".to_string())
    );
    let mut acyclic = g.clone();
    acyclic.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle(&acyclic), None);
    assert_eq!(
        node(Path::new("tasks/ruler/cwe.rs")).as_deref(),
        Some("tasks::ruler")
    );
    assert_eq!(node(Path::new("tasks/mod.rs")).as_deref(), Some("tasks"));
    assert_eq!(node(Path::new("lib.rs")), None);
}
