//! Helpers shared by the planner's integration tests: the hand-made SmolLM2 profile
//! (`fixtures/README.md`) and the plans built from it.

#![allow(dead_code)]

use kvplan_planner::{build_plan, Method, Plan, PlanOptions, Profile, Target};
use std::fs;
use std::path::{Path, PathBuf};

/// The hand-made SmolLM2 profile, `fixtures/smollm2-handmade.profile.json`.
pub fn profile() -> Profile {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/smollm2-handmade.profile.json");
    Profile::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The plan of `methods` at `target` that `opts` build from `profile`; panics with the
/// planner's error.
pub fn build(profile: &Profile, methods: &[Method], target: Target, opts: &PlanOptions) -> Plan {
    build_plan(profile, methods, target, opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Folders never walked: build outputs, git's own, fuzzing corpora (`fuzz/<crate>/corpus`,
/// generated inputs), and the root folders the repository's `.gitignore` names (`/models/`,
/// `/data/`, `/runs/`: downloads and run outputs, whose sources are not ours).
pub struct Walk {
    ignored: Vec<PathBuf>,
}

impl Walk {
    pub fn new(root: &Path) -> Walk {
        let gitignore = fs::read_to_string(root.join(".gitignore")).unwrap_or_default();
        let ignored = gitignore
            .lines()
            .filter_map(|l| l.trim().strip_prefix('/')?.strip_suffix('/'))
            .filter(|name| !name.contains(['*', '?', '[', '/']))
            .map(|name| root.join(name))
            .collect();
        Walk { ignored }
    }

    fn skipped(&self, dir: &Path) -> bool {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name == ".git"
            || name == "target"
            || name.starts_with("target-")
            || name == "corpus"
            || self.ignored.iter().any(|i| i == dir)
    }

    /// Every file under `dir`, skipped folders left out.
    pub fn files(&self, dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                if !self.skipped(&path) {
                    self.files(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
}

/// The targets of the Markdown links `[text](target)` in `text`, outside code.
pub fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with("    ") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}
