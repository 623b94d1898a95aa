//! RULER records in the kvpress leaderboard's form (`kvplan eval leaderboard`): one folder per
//! (model, length, method, target ratio) holding `config.yaml`, `metrics.json` and
//! `predictions.csv` as kvpress's evaluation writes them, a table of score against effective
//! compression ratio with intervals ([`markdown`]), and the points of the leaderboard's figure
//! ([`Board`], drawn by `kvplan_plots::figures::leaderboard`).
//!
//! Read from NVIDIA/kvpress at commit 243f71baa229ca1308e2540de164d064c053465c (snapshot
//! 8bb29b9c3078452a86d692f29123fa6c793e2b05): `evaluation/evaluate.py`
//! (`EvaluationConfig.get_results_dir`, `save_config`, `_save_results`,
//! `_calculate_and_save_metrics`) and `evaluation/benchmarks/ruler/calculate_metrics.py`,
//! `create_huggingface_dataset.py`. As there:
//! - the folder is `ruler__<length>__<model, / as -->__<press>__<ratio with 2 decimals>`, with
//!   `__query_aware` when the question was compressed with the context; FullKV is kvpress's
//!   `no_press` at ratio 0.00;
//! - `config.yaml` holds `EvaluationConfig`'s fields in its order (`head_compression_ratio` and
//!   `threshold` dropped when unset), then a `kvplan:` block of what kvpress has no field for
//!   (the effective ratio, the settings of the records, and for kvpress's presses the name its
//!   evaluation registry gives the same press, `kvpress_registry_name`); a kvpress press's
//!   `press_init_command` is the constructor `tools/kvpress_side_by_side.py` calls (kvpress's
//!   own is the press's `repr`, every default spelled out);
//! - `metrics.json` maps each task (sorted, as pandas' `groupby` sorts) to
//!   `{"string_match": score}`, the mean over its examples in percent rounded to 2 decimals,
//!   indented by 4;
//! - `predictions.csv` has kvpress's columns `question, answer_prefix, answer, task,
//!   max_new_tokens, predicted_answer, compression_ratio` (kvpress writes the data set's columns
//!   without `context`, in set order; here in that order) and then ours: `example`, `score`,
//!   `effective_compression_ratio`, `budget`. `answer` is a Python list literal.
//!
//! The ratio, as kvpress writes it: the folder name and `config.yaml`'s `compression_ratio` are
//! the ratio asked for (kvpress's `EvaluationConfig`); `predictions.csv`'s `compression_ratio` is
//! what the press reports after the prompt ran (`_run_inference` stores
//! `self.press.compression_ratio` per row: the measured ratio for presses that measure it, e.g.
//! DuoAttention's) — here the effective ratio measured on the prompt ([`crate::ratio`]), so a
//! method that falls short of its target (untrained PoD, SpindleKV) is read at the ratio it
//! reached; `effective_compression_ratio` repeats it to 6 decimals. Records at a budget rather
//! than a ratio are not written (the leaderboard has none).
//!
//! kvpress's own presses join kvplan's methods ([`read`]): `tools/kvpress_side_by_side.py
//! --ratios` runs them at kvpress's compression ratios on the token ids kvplan exported and
//! writes `<model>.ruler.kvpress.records.json` beside kvplan's records ([`crate::companion`]);
//! their ratio cells (methods `kvpress-<press>`, the effective ratio measured on kvpress's cache)
//! become folders, rows and points of their own, their `config.yaml` with kvpress's settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::aggregate::{
    prompt_key, rows, Overall, PromptKey, RecordRow, Scope, Summary, FULL, SNAPKV,
};
use crate::companion::{self, Companion};
use crate::marks::Marks;
use crate::records::{Record, RecordsFile};
use crate::row_method::KVPRESS_PREFIX;
use crate::stats::Estimate;
use crate::table::{cell, delta_cells, header};
use crate::tasks::ruler::Task;
use crate::{write_atomic, Result};

/// kvpress's name of FullKV.
pub const NO_PRESS: &str = "no_press";

/// One folder's records: a model at a length, one method at one target (FullKV: none).
#[derive(Debug, Clone)]
pub struct Group<'r> {
    /// Model name.
    pub model: String,
    /// Prompt length (RULER's `max_seq_length`, kvpress's `data_dir`).
    pub length: usize,
    /// Method (registry name).
    pub method: String,
    /// Target ratio; `None` for FullKV.
    pub ratio: Option<f64>,
    /// Its records, by task and example.
    pub records: Vec<&'r Record>,
}

/// A record's leaderboard row: its method and target (`ratio::key`, 0 for FullKV); `None` for a
/// record not on the leaderboard (a budget cell).
fn board_row(r: &Record) -> Option<(&str, u32)> {
    match (&r.ratio, r.method.as_str(), r.budget) {
        (Some(c), m, _) => Some((m, crate::ratio::key(c.target))),
        (None, FULL, None) => Some((FULL, 0)),
        _ => None,
    }
}

/// The records of `file` grouped by (length, method, target), FullKV and ratio cells only, in
/// order of length, method and target.
pub fn groups<'r>(file: &'r RecordsFile<Record>) -> Vec<Group<'r>> {
    let model = file.settings.get("model").cloned().unwrap_or_default();
    let mut by: BTreeMap<(usize, String, u32), Vec<&'r Record>> = BTreeMap::new();
    for r in &file.records {
        let Some((method, target)) = board_row(r) else {
            continue;
        };
        let key = (r.context_len, method.to_string(), target);
        by.entry(key).or_default().push(r);
    }
    by.into_iter()
        .map(|((length, method, t), mut records)| {
            records.sort_by(|a, b| (&a.task, a.example).cmp(&(&b.task, b.example)));
            Group {
                model: model.clone(),
                length,
                ratio: (method != FULL).then_some(f64::from(t) / 10_000.0),
                method,
                records,
            }
        })
        .collect()
}

/// A RULER records file for the leaderboard, with the kvpress records made on its prompts.
#[derive(Debug, Clone)]
pub struct Input {
    /// kvplan's records, kvpress's ratio cells appended.
    pub file: RecordsFile<Record>,
    /// The settings of kvpress's records, when some joined.
    pub kvpress: Option<BTreeMap<String, String>>,
    /// Why a kvpress file beside it was left out (made on other prompts), when one was.
    pub note: Option<String>,
}

/// How `tools/kvpress_side_by_side.py` builds a kvpress press (`make_press`, kvpress 0.5.5's
/// defaults for every argument not named), and the name kvpress's evaluation registry
/// (`evaluation/evaluate_registry.py`, `PRESS_REGISTRY`, at the snapshot of the module header)
/// gives that same press, where it has one: `(press, registry name, constructor with {r} for the
/// ratio)`. ExpectedAttention at epsilon 0, alone or under AdaKV, has no entry there since
/// October 2025: the registry's `expected_attention` is AdaKV over it at epsilon 1e-2
/// (`adakv-expected-e2`). DuoAttention's `head_compression_ratio` is chosen per prompt so that
/// the compression of its context is the target (the script's `duo_heads`); `duo-board` sets it
/// as `evaluate.py` does, to the ratio itself.
const KVPRESS_PRESSES: [(&str, Option<&str>, &str); 13] = [
    (
        "snapkv",
        Some("snapkv"),
        "SnapKVPress(compression_ratio={r})",
    ),
    (
        "pyramid",
        Some("pyramidkv"),
        "PyramidKVPress(compression_ratio={r})",
    ),
    (
        "streaming",
        Some("streaming_llm"),
        "StreamingLLMPress(compression_ratio={r})",
    ),
    ("tova", Some("tova"), "TOVAPress(compression_ratio={r})"),
    ("knorm", Some("knorm"), "KnormPress(compression_ratio={r})"),
    (
        "keydiff",
        Some("keydiff"),
        "KeyDiffPress(compression_ratio={r})",
    ),
    ("kvzip", Some("kvzip"), "KVzipPress(compression_ratio={r})"),
    (
        "expected",
        None,
        "ExpectedAttentionPress(compression_ratio={r})",
    ),
    (
        "adakv-expected",
        None,
        "AdaKVPress(ExpectedAttentionPress(compression_ratio={r}))",
    ),
    (
        "adakv-expected-e2",
        Some("expected_attention"),
        "AdaKVPress(ExpectedAttentionPress(compression_ratio={r}, epsilon=0.01))",
    ),
    (
        "duo",
        Some("duo_attention_on_the_fly"),
        "DuoAttentionPress(head_compression_ratio=h, on_the_fly_scoring=True), h per prompt so \
         that the compression of its context tokens is {r}",
    ),
    (
        "duo-board",
        Some("duo_attention_on_the_fly"),
        "DuoAttentionPress(head_compression_ratio={r}, on_the_fly_scoring=True), as the \
         registry's evaluate.py sets it (its compression of the context lands below {r})",
    ),
    ("full", Some(NO_PRESS), "no press"),
];

/// [`KVPRESS_PRESSES`]' row of kvpress press `press` (`keydiff` of `kvpress-keydiff`).
fn kvpress_press(press: &str) -> Option<(Option<&'static str>, &'static str)> {
    KVPRESS_PRESSES
        .iter()
        .find(|(p, _, _)| *p == press)
        .map(|&(_, name, make)| (name, make))
}

impl Input {
    /// `file` with the ratio cells of `beside` (kvpress's records next to it) when those were
    /// made on its prompts.
    pub fn new(file: RecordsFile<Record>, beside: Companion<Record>) -> Self {
        let mut input = Self {
            file,
            kvpress: None,
            note: None,
        };
        match beside {
            Companion::Absent => {}
            Companion::LeftOut(why) => input.note = Some(why),
            Companion::Usable(k) => {
                let cells: Vec<Record> = k
                    .records
                    .into_iter()
                    .filter(|r| r.ratio.is_some())
                    .collect();
                if !cells.is_empty() {
                    input.file.records.extend(cells);
                    input.kvpress = Some(k.settings);
                }
            }
        }
        input
    }

    /// The settings a group's `config.yaml` lists: kvpress's for its presses.
    fn settings_of(&self, method: &str) -> &BTreeMap<String, String> {
        match &self.kvpress {
            Some(k) if method.starts_with(KVPRESS_PREFIX) => k,
            _ => &self.file.settings,
        }
    }
}

/// Which rows and prompts a leaderboard reads (`kvplan eval leaderboard --methods`,
/// `--common-prompts`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Only these methods' ratio rows (kvplan's registry names, kvpress's `kvpress-…`), when
    /// given; FullKV is always kept.
    pub methods: Option<Vec<String>>,
    /// Only the prompts every kept row holds, so that every row's average is over the same
    /// prompts (a run still under way, or kvpress's side covering fewer prompts than kvplan's).
    pub common_prompts: bool,
    /// The method of the second Δ column: each row is paired with this method's row at the same
    /// target (kvplan's name or kvpress's `kvpress-…`); SnapKV (`snapkv`) when not given.
    pub versus: Option<String>,
    /// Only the ratio rows at these targets, when given (before `common_prompts`, so a target
    /// one method still covers on fewer prompts does not shrink the others).
    pub ratios: Option<Vec<f64>>,
}

impl Selection {
    /// The second Δ column's method.
    pub fn versus(&self) -> &str {
        self.versus.as_deref().unwrap_or(SNAPKV)
    }
}

impl Input {
    /// Keeps the leaderboard's records `sel` asks for (budget cells, not on it, are dropped with
    /// `--methods`); returns a line saying what was left out, when anything was.
    pub fn select(&mut self, sel: &Selection) -> Option<String> {
        let mut notes = Vec::new();
        if let Some(methods) = &sel.methods {
            let absent: Vec<&str> = methods
                .iter()
                // FullKV is the leaderboard's reference line, kept whether named or not.
                .filter(|m| {
                    *m != FULL
                        && !self
                            .file
                            .records
                            .iter()
                            .any(|r| r.ratio.is_some() && &r.method == *m)
                })
                .map(String::as_str)
                .collect();
            if !absent.is_empty() {
                notes.push(format!(
                    "--methods: no ratio rows of {} in these records",
                    absent.join(", ")
                ));
            }
            let before = self.file.records.len();
            self.file.records.retain(|r| {
                board_row(r)
                    .is_some_and(|(m, _)| r.ratio.is_none() || methods.iter().any(|x| x == m))
            });
            notes.push(format!(
                "--methods kept {} of {} records",
                self.file.records.len(),
                before
            ));
        }
        if let Some(ratios) = &sel.ratios {
            notes.push(self.keep_ratios(ratios));
        }
        let versus = sel.versus();
        if sel.versus.is_some()
            && !self
                .file
                .records
                .iter()
                .any(|r| r.ratio.is_some() && r.method == versus)
        {
            notes.push(format!(
                "--versus: no ratio rows of {versus} kept, so the Δ vs {versus} column is empty"
            ));
        }
        if sel.common_prompts {
            let (keep, note) = common_prompts(&self.file.records);
            let mut keep = keep.into_iter();
            self.file.records.retain(|_| keep.next().unwrap_or(true));
            notes.push(note);
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}

impl Input {
    /// Keeps the ratio rows at `ratios` (and every record that is no ratio cell); the note names
    /// what was kept and any target no row holds.
    fn keep_ratios(&mut self, ratios: &[f64]) -> String {
        let keys: Vec<u32> = ratios.iter().map(|&r| crate::ratio::key(r)).collect();
        let held = |k: u32| {
            self.file.records.iter().any(|r| {
                r.ratio
                    .as_ref()
                    .is_some_and(|c| crate::ratio::key(c.target) == k)
            })
        };
        let absent: Vec<String> = ratios
            .iter()
            .zip(&keys)
            .filter(|(_, &k)| !held(k))
            .map(|(&r, _)| format!("{}%", crate::ratio::fmt_pct(r)))
            .collect();
        let before = self.file.records.len();
        self.file.records.retain(|r| {
            r.ratio
                .as_ref()
                .is_none_or(|c| keys.contains(&crate::ratio::key(c.target)))
        });
        let mut note = format!(
            "--ratios kept {} of {} records",
            self.file.records.len(),
            before
        );
        if !absent.is_empty() {
            note.push_str(&format!(" (no ratio rows at {})", absent.join(", ")));
        }
        note
    }
}

/// Which of `records` to keep for `--common-prompts` (those off the leaderboard, and those of the
/// prompts every leaderboard row holds), and the line saying how many prompts that is.
fn common_prompts(records: &[Record]) -> (Vec<bool>, String) {
    use std::collections::{BTreeMap, BTreeSet};
    let mut held: BTreeMap<(&str, u32), BTreeSet<PromptKey<'_>>> = BTreeMap::new();
    for r in records {
        if let Some(row) = board_row(r) {
            held.entry(row).or_default().insert(prompt_key(r));
        }
    }
    let all: BTreeSet<PromptKey<'_>> = held.values().flatten().copied().collect();
    let common: BTreeSet<PromptKey<'_>> = held
        .values()
        .fold(all.clone(), |acc, p| acc.intersection(p).copied().collect());
    let fewest = held
        .iter()
        .min_by_key(|(_, p)| p.len())
        .map(|(&(m, t), p)| {
            let row = if t == 0 && m == FULL {
                FULL.to_string()
            } else {
                crate::ratio::label(m, f64::from(t) / 10_000.0)
            };
            format!("{row} with {}", p.len())
        })
        .unwrap_or_default();
    let keep = records
        .iter()
        .map(|r| board_row(r).is_none() || common.contains(&prompt_key(r)))
        .collect();
    let note = format!(
        "--common-prompts: {} of {} prompts are held by every row (the fewest: {fewest})",
        common.len(),
        all.len()
    );
    (keep, note)
}

/// Reads the RULER records file at `path` and, when it is named `<model>.ruler.records.json`
/// ([`crate::render`]'s reading of a records file and its name), the kvpress records beside it
/// ([`Input::new`]).
pub fn read(path: &Path) -> Result<Input> {
    let file = crate::render::read(path)?;
    let beside = match crate::render::name_parts(path) {
        Ok((model, task)) if task == "ruler" => {
            let dir = path.parent().unwrap_or(Path::new("."));
            companion::load(&companion::path(dir, &model, &task), &file.settings)?
        }
        _ => Companion::Absent,
    };
    Ok(Input::new(file, beside))
}

/// Whether the question was compressed with the context (kvpress's `query_aware`).
fn query_aware(settings: &BTreeMap<String, String>) -> bool {
    settings.get("mode").map(String::as_str) == Some("question-aware")
}

/// kvpress's folder name of `g`.
pub fn folder_name(g: &Group<'_>, query_aware: bool) -> String {
    let press = if g.ratio.is_none() {
        NO_PRESS
    } else {
        &g.method
    };
    let mut parts = vec![
        "ruler".to_string(),
        g.length.to_string(),
        g.model.replace('/', "--"),
        press.to_string(),
        format!("{:.2}", g.ratio.unwrap_or(0.0)),
    ];
    if query_aware {
        parts.push("query_aware".into());
    }
    parts.join("__")
}

/// A YAML scalar as PyYAML's `dump` writes it: plain where it reads back as the same string,
/// single-quoted otherwise.
fn yaml_str(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./ ".contains(c))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !s.ends_with(' ')
        && !["true", "false", "null", "yes", "no", "on", "off", "y", "n"]
            .contains(&s.to_lowercase().as_str());
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

/// Mean effective ratio of a group's records (0 for FullKV).
fn mean_effective(g: &Group<'_>) -> f64 {
    let e: Vec<f64> = g
        .records
        .iter()
        .filter_map(|r| r.ratio.as_ref().map(|c| c.effective))
        .collect();
    e.iter().sum::<f64>() / e.len().max(1) as f64
}

/// `config.yaml` of `g` (module header).
pub fn config_yaml(g: &Group<'_>, settings: &BTreeMap<String, String>) -> String {
    let press = if g.ratio.is_none() {
        NO_PRESS
    } else {
        &g.method
    };
    let cap = settings.get("answer_tokens").filter(|c| *c != "task");
    let seed = settings.get("seed").map_or("0", String::as_str);
    let mut y = String::new();
    let mut line = |k: &str, v: String| y.push_str(&format!("{k}: {v}\n"));
    line("dataset", "ruler".into());
    line("data_dir", yaml_str(&g.length.to_string()));
    line("model", yaml_str(&g.model));
    line("device", "cpu".into());
    line("press_name", yaml_str(press));
    line("compression_ratio", format!("{:?}", g.ratio.unwrap_or(0.0)));
    line("key_channel_compression_ratio", "null".into());
    line("fraction", "1.0".into());
    line("max_new_tokens", cap.map_or("null".into(), |c| c.clone()));
    line("max_context_length", "null".into());
    line("query_aware", query_aware(settings).to_string());
    line("needle_depth", "null".into());
    line("compression_interval", "null".into());
    line("target_size", "null".into());
    line("hidden_states_buffer_size", "null".into());
    line("output_dir", yaml_str("."));
    line("log_level", "INFO".into());
    line("model_kwargs", "{}".into());
    let peer = g.method.strip_prefix(KVPRESS_PREFIX);
    // The press's row of the table (registry name, constructor), when it has one.
    let row = peer.and_then(kvpress_press);
    let command = match (g.ratio, peer) {
        (Some(r), Some(press)) => {
            let how = row.map_or(format!(" at compression_ratio {r}"), |(_, make)| {
                format!(", {}", make.replace("{r}", &r.to_string()))
            });
            format!(
                "kvpress {press} press{how} on kvplan's token ids \
                 (tools/kvpress_side_by_side.py --ratios)"
            )
        }
        (Some(r), None) => format!(
            "kvplan {} at the largest budget whose effective ratio is not below {r}, per prompt \
             (the measured ratio: kvplan.effective_compression_ratio)",
            g.method
        ),
        (None, _) => "kvplan full (no compression)".to_string(),
    };
    line("press_init_command", yaml_str(&command));
    // kvpress's seed is an integer.
    line(
        "seed",
        seed.parse::<u64>()
            .map_or(yaml_str(seed), |s| s.to_string()),
    );
    line("fp8", "false".into());
    y.push_str("kvplan:\n");
    y.push_str(&format!("  method: {}\n", yaml_str(&g.method)));
    if peer.is_some() {
        // The press's name in kvpress's evaluation registry (null: none there).
        let name = row.and_then(|(name, _)| name);
        y.push_str(&format!(
            "  kvpress_registry_name: {}\n",
            name.map_or("null".into(), yaml_str)
        ));
    }
    y.push_str(&format!(
        "  effective_compression_ratio: {:.6}\n",
        mean_effective(g)
    ));
    y.push_str(&format!("  records: {}\n", g.records.len()));
    y.push_str("  settings:\n");
    for (k, v) in settings {
        y.push_str(&format!("    {k}: {}\n", yaml_str(v)));
    }
    y
}

/// `metrics.json` of `g`: each task's mean score in percent, rounded to 2 decimals.
pub fn metrics_json(g: &Group<'_>) -> String {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in &g.records {
        by.entry(r.task.as_str()).or_default().push(r.score);
    }
    let mut m = serde_json::Map::new();
    for (task, s) in by {
        let mean = 100.0 * s.iter().sum::<f64>() / s.len() as f64;
        let v = serde_json::json!({ "string_match": (mean * 100.0).round() / 100.0 });
        m.insert(task.to_string(), v);
    }
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    serde::Serialize::serialize(&m, &mut ser).expect("a map of numbers serialises");
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// A CSV field, quoted (quotes doubled) when it holds a comma, a quote or a line break.
fn csv(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A Python list literal of strings: `['a', 'b']`.
fn py_list(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// `predictions.csv` of `g` (module header); `cap`: the run's answer-token cap, if any.
pub fn predictions_csv(g: &Group<'_>, cap: Option<usize>) -> String {
    let mut out = String::from(
        "question,answer_prefix,answer,task,max_new_tokens,predicted_answer,compression_ratio,\
         example,score,effective_compression_ratio,budget\n",
    );
    for r in &g.records {
        let tokens = Task::from_name(&r.task).map_or(0, |t| t.tokens_to_generate());
        let tokens = cap.map_or(tokens, |c| c.min(tokens));
        let (measured, effective, budget) = match &r.ratio {
            Some(c) => (
                format!("{:?}", c.effective),
                format!("{:.6}", c.effective),
                c.budget.to_string(),
            ),
            None => ("0.0".into(), "0.0".into(), String::new()),
        };
        let fields = [
            csv(r.question.as_deref().unwrap_or("")),
            csv(r.answer_prefix.as_deref().unwrap_or("")),
            csv(&py_list(&r.expected)),
            csv(&r.task),
            tokens.to_string(),
            csv(&r.response),
            measured,
            r.example.to_string(),
            format!("{}", r.score),
            effective,
            budget,
        ];
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// Writes every group of `input` into `dir` (a folder each, three files); returns the folders.
pub fn write_folders(input: &Input, dir: &Path) -> Result<Vec<PathBuf>> {
    let file = &input.file;
    let aware = query_aware(&file.settings);
    let cap = file
        .settings
        .get("answer_tokens")
        .and_then(|c| c.parse().ok());
    let mut out = Vec::new();
    for g in groups(file) {
        let folder = dir.join(folder_name(&g, aware));
        write_atomic(
            &folder.join("config.yaml"),
            &config_yaml(&g, input.settings_of(&g.method)),
        )?;
        write_atomic(&folder.join("metrics.json"), &metrics_json(&g))?;
        write_atomic(&folder.join("predictions.csv"), &predictions_csv(&g, cap))?;
        out.push(folder);
    }
    Ok(out)
}

/// One point of the leaderboard figure: a method at a target, its mean effective ratio, the
/// RULER average in percent and its 95% interval.
#[derive(Debug, Clone, PartialEq)]
pub struct BoardPoint {
    /// Method.
    pub method: String,
    /// Its name in a legend: the method with its mark (`pod ‡`, `headkv †`), if any.
    pub label: String,
    /// Target ratio.
    pub target: f64,
    /// Mean effective ratio.
    pub effective: f64,
    /// Average of the task means, in percent.
    pub score: f64,
    /// Its 95% interval in percent.
    pub interval: Option<(f64, f64)>,
}

/// A model's leaderboard: its ratio points and FullKV.
#[derive(Debug, Clone, PartialEq)]
pub struct Board {
    /// Model name.
    pub model: String,
    /// Tasks behind the average.
    pub tasks: Vec<Task>,
    /// Lengths of the records.
    pub lengths: Vec<usize>,
    /// Each method at each target.
    pub points: Vec<BoardPoint>,
    /// FullKV's average in percent with its interval.
    pub full: Option<(f64, Option<(f64, f64)>)>,
}

/// The tasks `records` hold, in RULER's order.
fn tasks_of(records: &[Record]) -> Vec<Task> {
    Task::ALL
        .into_iter()
        .filter(|t| records.iter().any(|r| r.task == t.name()))
        .collect()
}

/// The rows of the FullKV and ratio records of `file`, a column per task.
fn board_rows<'r>(records: &'r [Record], tasks: &[Task]) -> Vec<RecordRow<'r>> {
    rows(records, tasks.len(), |r| {
        board_row(r)?;
        tasks.iter().position(|t| t.name() == r.task)
    })
}

/// The leaderboard of `file`'s records; each point's `label` carries its method's mark.
pub fn board(file: &RecordsFile<Record>, marks: &Marks) -> Board {
    let tasks = tasks_of(&file.records);
    let rows = board_rows(&file.records, &tasks);
    let scope = Scope::Overall(Overall::Columns);
    let pct = |e: &crate::stats::Estimate| {
        (
            100.0 * e.mean,
            e.interval.map(|i| (100.0 * i.lo, 100.0 * i.hi)),
        )
    };
    let mut points = Vec::new();
    let mut full = None;
    for row in &rows {
        let Some(e) = row.estimate(scope) else {
            continue;
        };
        let (score, interval) = pct(&e);
        match row.ratio {
            Some(target) => points.push(BoardPoint {
                label: marks.label(&row.method),
                method: row.method.clone(),
                target,
                effective: row.effective_ratio().map_or(0.0, |x| x.0),
                score,
                interval,
            }),
            None => full = Some((score, interval)),
        }
    }
    points.sort_by(|a, b| {
        (&a.method, a.target)
            .partial_cmp(&(&b.method, b.target))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut lengths: Vec<usize> = file.records.iter().map(|r| r.context_len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    Board {
        model: file.settings.get("model").cloned().unwrap_or_default(),
        tasks,
        lengths,
        points,
        full,
    }
}

/// The table of `file`'s leaderboard: a row per method and target (FullKV first), its mean
/// effective ratio, the RULER average with its 95% interval, the paired difference against
/// FullKV and against `versus` (SnapKV by default) at the same target (Holm-adjusted over the
/// table's differences), prompts and clusters; rows that need a caveat carry `marks` (†: HeadKV
/// budgets on retrieval-reasoning scores at chance, ‡: PoD untrained) with their footnotes.
pub fn markdown(file: &RecordsFile<Record>, marks: &Marks, versus: &str) -> String {
    let tasks = tasks_of(&file.records);
    let rows = board_rows(&file.records, &tasks);
    let scope = Scope::Overall(Overall::Columns);
    let order = board_order(&rows);
    let model = file.settings.get("model").map_or("", String::as_str);
    let names: Vec<&str> = tasks.iter().map(|t| t.name()).collect();
    let mut out = format!(
        "### {model}: RULER average of {} task(s) ({}) against effective compression ratio\n\n",
        tasks.len(),
        names.join(", ")
    );
    out.push_str(&header(&[
        "method @ target",
        "effective ratio",
        "score [95% CI]",
        "of FullKV",
        "Δ vs full [95% CI]",
        &format!("Δ vs {versus} [95% CI]"),
        "n",
        "clusters",
    ]));
    let summaries: Vec<_> = order.iter().map(|row| row.summary(&rows, scope)).collect();
    let full = order
        .iter()
        .zip(&summaries)
        .find(|(row, _)| row.ratio.is_none())
        .and_then(|(_, s)| s.score);
    // The second column: `versus`'s row at the row's target (the summary already holds SnapKV's).
    let pairs: Vec<_> = order
        .iter()
        .zip(&summaries)
        .map(|(row, s)| {
            let vs = if versus == SNAPKV {
                s.vs_snapkv
            } else {
                row.paired_beside(&rows, versus, scope)
            };
            (
                [s.vs_full, vs],
                s.score.map_or(0, |e| e.n),
                row.method.as_str(),
            )
        })
        .collect();
    for ((row, s), [vs_full, vs_versus]) in order.iter().zip(&summaries).zip(delta_cells(&pairs)) {
        let share = share_of_full(s.score, full);
        out.push_str(&board_line(
            row,
            s,
            &rows,
            versus,
            [share, vs_full, vs_versus],
        ));
    }
    out.push_str(LEGEND);
    marks.apply(&out)
}

/// The rows of a board in its order: FullKV first, then by method and target.
fn board_order<'r, 'a>(rows: &'r [RecordRow<'a>]) -> Vec<&'r RecordRow<'a>> {
    let mut order: Vec<&RecordRow<'_>> = rows.iter().collect();
    order.sort_by(|a, b| {
        let key = |r: &RecordRow<'_>| (r.ratio.is_some(), r.method.clone());
        key(a)
            .cmp(&key(b))
            .then(a.ratio.unwrap_or(0.0).total_cmp(&b.ratio.unwrap_or(0.0)))
    });
    order
}

/// A row's score as a share of FullKV's, `97%`, where both hold the same number of prompts (on a
/// `--common-prompts` board, the same prompts); `–` otherwise.
fn share_of_full(score: Option<Estimate>, full: Option<Estimate>) -> String {
    match (score, full) {
        (Some(s), Some(f)) if s.n == f.n && f.mean > 0.0 => {
            format!("{:.0}%", 100.0 * s.mean / f.mean)
        }
        _ => "–".to_string(),
    }
}

/// One row of [`markdown`]'s table: its label (with where it lands when that is off its
/// target), effective ratio, score, its share of FullKV's and the two Δ cells (the second only
/// where both rows land at the target).
fn board_line(
    row: &RecordRow<'_>,
    s: &Summary,
    rows: &[RecordRow<'_>],
    versus: &str,
    [share, vs_full, vs_versus]: [String; 3],
) -> String {
    let n = s.score.map_or(0, |e| e.n);
    let effective = row
        .effective_ratio()
        .map_or("0 (FullKV)".to_string(), |(m, lo, hi)| {
            format!("{m:.3} [{lo:.3}, {hi:.3}]")
        });
    let label = if row.lands() {
        row.label()
    } else {
        let m = row.effective_ratio().map_or(0.0, |(m, _, _)| m);
        format!("{} (lands at {m:.2})", row.label())
    };
    let vs_versus = if row.comparable_at_target(rows, versus) {
        vs_versus
    } else {
        "– (not at the target)".to_string()
    };
    format!(
        "| {label} | {effective} | {} | {share} | {vs_full} | {vs_versus} | {n} | {} |\n",
        cell(s.score),
        s.score.map_or(0, |e| e.clusters),
    )
}

/// The legend under [`markdown`]'s table.
const LEGEND: &str = "\nScore: the mean of the task means in percent (RULER's average), its 95% interval by \
         the cluster bootstrap within each task ([–]: none, where a task holds one example); \
         Δ paired over the prompts both rows scored (paired cluster bootstrap interval; p: the cluster sign test, or exact McNemar for pass \
         rates of independent prompts; Holm: p adjusted within the row's family — the main \
         comparison (kvplan's methods and kvpress's presses) apart from each diagnostic: \
         engine reductions, the β sweep, permutation and placement controls, kvpress's \
         versions of kvplan's methods; ≈: the \
         interval includes 0 or Holm's p ≥ 0.05; mdd: the smallest difference these prompts \
         could have detected, 80% power, two-sided 5%). Of FullKV: the score over FullKV's on the \
         same prompts (– where the row holds a different number of prompts). Effective ratio: the mean over prompts of \
         1 − KV bytes held / FullKV bytes of the compressed tokens, [smallest, largest]; each \
         prompt's budget the largest not below the target. A row whose mean effective ratio is \
         more than 0.01 from its target (\"lands at\") is compared with FullKV only: the second Δ \
         pairs two methods at a target only where both land within 0.01 of it.\n";

#[cfg(test)]
mod tests;
