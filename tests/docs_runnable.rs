//! The documentation's runnable commands, run as written. A fenced block whose info string holds
//! the word `runnable` (```` ```sh runnable ````; docs/README.md says so to its readers) is a
//! shell script a reader can paste: every such block in `README.md`, `CONTRIBUTING.md` and
//! `docs/**/*.md` runs here with `bash -e -o pipefail`, from the repository root, with `kvplan` on
//! the PATH being the binary under test — the README first, then CONTRIBUTING, then `docs/` in the
//! order of the files' paths, and the blocks in each file in order. The blocks work on the tiny
//! model of `tests/fixtures/guide/` and write under `runs/guide/` (git-ignored), which this test
//! empties first; commands that need the real models or a network sit in plain ```` ```sh ````
//! blocks and do not run.
//!
//! It fails when a block exits non-zero; when a path a runnable block names (a word whose first
//! component is an entry of the repository root, or `runs`) does not exist once the block has
//! run; when a path a block that does not run reads (not an `--out`-like value, not under
//! `runs/`) does not exist; when a guide (`docs/guides/*.md`) has no runnable block; and when
//! there is none at all.
//!
//! The tiny converter-made models declare a 256-token context, shorter than the quick profile's
//! 512-token needle prompts and than a NIAH prompt's frame in their 400-token vocabulary, so the
//! guides use `tests/fixtures/guide/llama3-tiny-1k.gguf`: `llama3-tiny` with
//! `llama.context_length` set to 1,024 and nothing else changed (kvplan's RoPE reads no context
//! length, so the copy computes what the file computes). A test here checks the copy against its
//! source byte for byte, and rewrites it when `KVPLAN_WRITE_FIXTURES` is set.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use kvplan_runtime::gguf::MetaValue;

/// The word of a fence's info string that marks a block as runnable.
const RUNNABLE: &str = "runnable";

/// Where runnable blocks write; emptied before they run.
const SCRATCH: &str = "runs/guide";

/// The guides' model, the converter-made file it copies, and the context it declares.
const GUIDE_MODEL: &str = "tests/fixtures/guide/llama3-tiny-1k.gguf";
const GUIDE_SOURCE: &str = "tests/fixtures/llama3-tiny/model-f32.gguf";
const GUIDE_CONTEXT: u32 = 1024;

/// Characters that make a word a template or a shell expansion rather than a path.
const NOT_A_PATH: &[char] = &[
    '<', '>', '*', '?', '$', '{', '}', '…', '[', ']', '|', '`', '=',
];

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fenced code block: the file, the line of its opening fence, whether it is runnable, its text.
#[derive(Debug, PartialEq)]
struct Block {
    file: String,
    line: usize,
    runnable: bool,
    text: String,
}

/// A fence line's character and length (three or more backticks or tildes), if `line` is one.
fn fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let n = t.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The fenced blocks (```` ``` ```` or `~~~`) of the Markdown `text`, labelled `file`. A block
/// closes at a line of its fence character alone, at least as long as its opening; an unclosed
/// block runs to the end of the text, as CommonMark reads it.
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    // The open block: its fence, and the Block being filled.
    let mut open: Option<((char, usize), Block)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(((c, n), block)) = open.as_mut() {
            let closes = fence(line).is_some_and(|(c2, n2)| c2 == *c && n2 >= *n)
                && line.trim().chars().all(|x| x == *c);
            if closes {
                out.extend(open.take().map(|(_, b)| b));
            } else {
                block.text.push_str(line);
                block.text.push('\n');
            }
        } else if let Some((c, n)) = fence(line) {
            let info = &line.trim_start()[c.len_utf8() * n..];
            let block = Block {
                file: file.to_string(),
                line: i + 1,
                runnable: info.split_whitespace().any(|w| w == RUNNABLE),
                text: String::new(),
            };
            open = Some(((c, n), block));
        }
    }
    out.extend(open.map(|(_, b)| b));
    // Each line was pushed with its newline; a block's text ends at its last line.
    for b in &mut out {
        b.text.pop();
    }
    out
}

/// Every `.md` file under `dir`, sorted by path.
fn markdown(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                .path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every fenced block of the README, CONTRIBUTING and every Markdown file under `docs/` (these
/// in path order).
fn doc_blocks() -> Vec<Block> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    files.extend(markdown(&root.join("docs")));
    files
        .iter()
        .flat_map(|path| {
            let text =
                fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let label = path
                .strip_prefix(&root)
                .unwrap_or(path)
                .display()
                .to_string();
            blocks(&label, &text)
        })
        .collect()
}

/// Options whose value is a path a command writes (which need not exist before it runs).
const OUTPUT_OPTIONS: &[&str] = &[
    "--out",
    "--plan-out",
    "--figures",
    "--json",
    "--export-prompts",
];

/// A path a shell block names, and whether it is an output (the value of an [`OUTPUT_OPTIONS`]).
#[derive(Debug, PartialEq)]
struct Named {
    path: String,
    output: bool,
}

/// `line` without its shell comment (a `#` at the start or after white space).
fn code(line: &str) -> &str {
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if c == '#' && prev.is_whitespace() {
            return &line[..i];
        }
        prev = c;
    }
    line
}

/// The words of a shell block that name paths in the repository: relative paths whose first
/// component is an entry of the repository root (or `runs`, where runs write), without template
/// or expansion characters; paths out of the repository (`/…`, `../…`) and comments are left
/// out.
fn paths_named(text: &str) -> Vec<Named> {
    let root = root();
    let words: Vec<&str> = text
        .lines()
        .flat_map(|l| code(l).split_whitespace())
        .map(|w| w.trim_matches(|c| matches!(c, '"' | '\'' | ';' | '(' | ')' | ',')))
        .collect();
    words
        .iter()
        .enumerate()
        .filter(|(_, w)| w.contains('/') && !w.starts_with(['/', '.']) && !w.contains(NOT_A_PATH))
        .filter(|(_, w)| {
            let first = w.split('/').next().unwrap_or("");
            !first.is_empty() && (first == "runs" || root.join(first).exists())
        })
        .map(|(i, w)| Named {
            path: w.to_string(),
            output: i > 0 && OUTPUT_OPTIONS.contains(&words[i - 1]),
        })
        .collect()
}

/// Runs the runnable `block` from the repository root with the binary under test on the PATH;
/// panics with its output when it fails.
fn run(block: &Block) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_kvplan"));
    let dir = bin.parent().expect("the binary's folder");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let path = std::env::join_paths(dirs).expect("a PATH");
    let out = Command::new("bash")
        .args(["-e", "-o", "pipefail", "-c", &block.text])
        .current_dir(root())
        .env("PATH", path)
        .env("KVPLAN_PLANS", common::no_user_plans())
        .output()
        .unwrap_or_else(|e| panic!("cannot run bash: {e}"));
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };
    assert!(
        out.status.success(),
        "{}:{}: the runnable block failed ({})\n--- block\n{}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
        block.file,
        block.line,
        out.status,
        block.text,
        tail(&out.stdout),
        tail(&out.stderr)
    );
}

#[test]
fn every_runnable_block_in_docs_runs_as_written() {
    let runnable: Vec<Block> = doc_blocks().into_iter().filter(|b| b.runnable).collect();
    assert!(
        !runnable.is_empty(),
        "no block in docs/ is marked `{RUNNABLE}`"
    );
    let scratch = root().join(SCRATCH);
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).unwrap_or_else(|e| panic!("{}: {e}", scratch.display()));
    for block in &runnable {
        run(block);
        let missing: Vec<String> = paths_named(&block.text)
            .into_iter()
            .map(|n| n.path)
            .filter(|p| !root().join(p).exists())
            .collect();
        assert!(
            missing.is_empty(),
            "{}:{}: the block ran but names paths that do not exist: {missing:?}",
            block.file,
            block.line
        );
    }
}

#[test]
fn every_guide_has_a_runnable_block() {
    let guides = markdown(&root().join("docs/guides"));
    assert!(!guides.is_empty(), "docs/guides/ holds no guide");
    let blocks = doc_blocks();
    for guide in guides {
        let label = guide
            .strip_prefix(root())
            .unwrap_or(&guide)
            .display()
            .to_string();
        assert!(
            blocks.iter().any(|b| b.file == label && b.runnable),
            "{label} has no block marked `{RUNNABLE}`"
        );
    }
}

#[test]
fn paths_the_docs_read_in_blocks_that_do_not_run_exist() {
    // Runnable blocks are checked once they have run; the others (real models, network) never
    // run here, so what they read must at least be there: scripts, fixtures, committed plans.
    // What they write (an output option's value, anything under runs/) need not.
    let missing: Vec<String> = doc_blocks()
        .iter()
        .filter(|b| !b.runnable)
        .flat_map(|b| {
            paths_named(&b.text)
                .into_iter()
                .filter(|n| !n.output && !n.path.starts_with("runs/"))
                .filter(|n| !root().join(&n.path).exists())
                .map(move |n| format!("{}:{}: {}", b.file, b.line, n.path))
        })
        .collect();
    assert!(missing.is_empty(), "missing: {missing:#?}");
}

#[test]
fn the_guide_model_is_the_tiny_llama3_with_a_longer_context() {
    let (model, source) = (root().join(GUIDE_MODEL), root().join(GUIDE_SOURCE));
    let key = "llama.context_length";
    let want = common::gguf_with_key(&source, key, MetaValue::U32(GUIDE_CONTEXT));
    if std::env::var_os("KVPLAN_WRITE_FIXTURES").is_some() {
        fs::create_dir_all(model.parent().expect("a folder")).expect("the fixture folder");
        fs::write(&model, &want).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    }
    let have = fs::read(&model).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
    assert!(
        have == want,
        "{GUIDE_MODEL} is not {GUIDE_SOURCE} with {key} = {GUIDE_CONTEXT}; rewrite it with \
         KVPLAN_WRITE_FIXTURES=1 cargo test --test docs_runnable the_guide_model"
    );
}

#[test]
fn fences_mark_runnable_blocks_by_a_word_of_their_info_string() {
    let md = "text\n\
              ```sh runnable\nkvplan models\n```\n\
              ```sh\nkvplan fetch\n```\n\
              ````text runnable\n```\ninner\n````\n\
              ~~~ sh runnable extra\na \\\n  b\n~~~\n\
              ```sh not-runnable\nx\n```\n\
              ```sh runnable\nunclosed";
    let got = blocks("f.md", md);
    let got: Vec<(usize, bool, &str)> = got
        .iter()
        .map(|b| (b.line, b.runnable, b.text.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (2, true, "kvplan models"),
            (5, false, "kvplan fetch"),
            (8, true, "```\ninner"),
            (12, true, "a \\\n  b"),
            (16, false, "x"),
            (19, true, "unclosed"),
        ]
    );
}

#[test]
fn paths_named_are_repository_paths_without_templates() {
    let text = "kvplan eval niah --model tests/fixtures/guide/llama3-tiny-1k.gguf --shard 1/2 \\\n\
                --out runs/guide/niah  # writes runs/guide/x\n\
                tools/methods.sh results/<model>/x /tmp/abs 'docs/guides/plans.md',\n\
                kvplan export --to all --out plans/exports/x docs/README.md#guides";
    let named = |path: &str, output: bool| Named {
        path: path.to_string(),
        output,
    };
    assert_eq!(
        paths_named(text),
        vec![
            named("tests/fixtures/guide/llama3-tiny-1k.gguf", false),
            named("runs/guide/niah", true),
            named("tools/methods.sh", false),
            named("docs/guides/plans.md", false),
            named("plans/exports/x", true),
            named("docs/README.md#guides", false),
        ]
    );
}
