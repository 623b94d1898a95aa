//! Tests of the leaderboard form: folders, the three files kvpress writes, the table and the
//! figure's points, from hand-made records.

use super::*;
use crate::ratio::RatioCell;
use crate::records::test_record;

fn rec(task: &str, example: usize, method: &str, ratio: Option<(f64, f64)>, score: f64) -> Record {
    Record {
        example,
        needle: format!("{task} {example}"),
        expected: vec!["1234567".into()],
        response: format!("It is 1234567, {score}"),
        ratio: ratio.map(|(target, effective)| RatioCell {
            target,
            effective,
            budget: 2000,
            probes: 4,
        }),
        question: Some(format!("What is the special magic number for k{example}?")),
        answer_prefix: Some("The special magic number for k is".into()),
        ..test_record(task, method, None, 4096, score, 1.0)
    }
}

fn file(mode: &str) -> RecordsFile<Record> {
    let mut records = Vec::new();
    for (task, e) in [("vt", 0), ("vt", 1), ("cwe", 0)] {
        records.push(rec(task, e, "full", None, 1.0));
        records.push(rec(
            task,
            e,
            "snapkv",
            Some((0.5, 0.4999)),
            if e == 0 { 1.0 } else { 0.0 },
        ));
    }
    // A budget cell: not on the leaderboard.
    records.push(Record {
        budget: Some(128),
        ..rec("vt", 0, "snapkv", None, 1.0)
    });
    RecordsFile {
        settings: BTreeMap::from([
            ("model".to_string(), "Org/Model-1.5".to_string()),
            ("mode".to_string(), mode.to_string()),
            ("seed".to_string(), "0".to_string()),
            ("answer_tokens".to_string(), "task".to_string()),
        ]),
        records,
    }
}

#[test]
fn groups_are_full_and_each_method_at_each_target_named_as_kvpress_names_them() {
    let f = file("question-agnostic");
    let g = groups(&f);
    assert_eq!(g.len(), 2, "the budget cell is left out");
    assert_eq!((g[0].method.as_str(), g[0].ratio), ("full", None));
    assert_eq!((g[1].method.as_str(), g[1].ratio), ("snapkv", Some(0.5)));
    assert_eq!(g[1].records.len(), 3);
    assert_eq!(
        folder_name(&g[0], false),
        "ruler__4096__Org--Model-1.5__no_press__0.00"
    );
    assert_eq!(
        folder_name(&g[1], true),
        "ruler__4096__Org--Model-1.5__snapkv__0.50__query_aware"
    );
}

#[test]
fn config_holds_kvpress_fields_in_order_then_ours() {
    let f = file("question-agnostic");
    let g = groups(&f);
    let y = config_yaml(&g[1], &f.settings);
    let keys: Vec<&str> = y
        .lines()
        .take_while(|l| !l.starts_with("kvplan:"))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .collect();
    assert_eq!(
        keys,
        [
            "dataset",
            "data_dir",
            "model",
            "device",
            "press_name",
            "compression_ratio",
            "key_channel_compression_ratio",
            "fraction",
            "max_new_tokens",
            "max_context_length",
            "query_aware",
            "needle_depth",
            "compression_interval",
            "target_size",
            "hidden_states_buffer_size",
            "output_dir",
            "log_level",
            "model_kwargs",
            "press_init_command",
            "seed",
            "fp8",
        ]
    );
    assert!(y.contains("data_dir: '4096'\n") && y.contains("model: Org/Model-1.5\n"));
    assert!(y.contains("compression_ratio: 0.5\n") && y.contains("query_aware: false\n"));
    assert!(
        y.contains("  effective_compression_ratio: 0.499900\n"),
        "{y}"
    );
    assert!(y.contains("seed: 0\n") && y.contains("    mode: question-agnostic\n"));
    let full = config_yaml(&g[0], &f.settings);
    assert!(full.contains("press_name: no_press\n") && full.contains("compression_ratio: 0.0\n"));
    assert_eq!(yaml_str("it's"), "'it''s'");
    assert_eq!(yaml_str("null"), "'null'");
}

#[test]
fn metrics_are_task_means_in_percent_sorted_and_indented_by_four() {
    let f = file("question-agnostic");
    let g = groups(&f);
    // snapkv: vt 1 and 0 → 50.0; cwe 1 → 100.0; cwe before vt.
    assert_eq!(
        metrics_json(&g[1]),
        "{\n    \"cwe\": {\n        \"string_match\": 100.0\n    },\n    \"vt\": {\n        \
         \"string_match\": 50.0\n    }\n}"
    );
}

#[test]
fn predictions_quote_what_needs_quoting() {
    let f = file("question-agnostic");
    let g = groups(&f);
    let csv = predictions_csv(&g[1], None);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "question,answer_prefix,answer,task,max_new_tokens,predicted_answer,compression_ratio,\
         example,score,effective_compression_ratio,budget"
    );
    assert_eq!(
        lines[1],
        "What is the special magic number for k0?,The special magic number for k is,\
         ['1234567'],cwe,120,\"It is 1234567, 1\",0.4999,0,1,0.499900,2000"
    );
    assert_eq!(lines.len(), 4);
    assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
    assert_eq!(py_list(&["it's".into(), "b".into()]), "['it\\'s', 'b']");
}

fn csv_field(s: &str) -> String {
    super::csv(s)
}

#[test]
fn the_table_and_the_board_give_scores_against_effective_ratios() {
    let f = file("question-agnostic");
    let md = markdown(&f, &Marks::default(), "snapkv");
    let lines: Vec<&str> = md.lines().collect();
    assert!(
        lines[0].contains("RULER average of 2 task(s) (vt, cwe)"),
        "{}",
        lines[0]
    );
    assert!(
        lines[4].starts_with("| full | 0 (FullKV) | 100.0 [–] |"),
        "{md}"
    );
    // snapkv: vt (1 + 0)/2, cwe 1 → average 75.
    assert!(
        lines[5].starts_with("| snapkv @ 50% | 0.500 [0.500, 0.500] | 75.0 ["),
        "{md}"
    );
    // Its share of FullKV's score on the same prompts: 75 / 100; FullKV's own 100%.
    assert!(lines[5].contains("] | 75% | "), "{md}");
    assert!(lines[4].contains("[–] | 100% | – |"), "{md}");
    let b = board(&f, &Marks::default());
    assert_eq!(b.tasks, [Task::Vt, Task::Cwe]);
    assert_eq!(b.points.len(), 1);
    assert!((b.points[0].score - 75.0).abs() < 1e-9);
    assert!((b.points[0].effective - 0.4999).abs() < 1e-12);
    assert_eq!(b.full.map(|f| f.0), Some(100.0));
    // cwe ran one example: no interval, on the board as in the table (no error bars).
    assert_eq!(
        (b.full.and_then(|f| f.1), b.points[0].interval),
        (None, None)
    );
    assert_eq!(b.lengths, [4096]);
}

#[test]
fn folders_are_written_with_three_files_each() {
    let dir = std::env::temp_dir().join(format!("kvplan-lb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let input = Input::new(file("question-aware"), Companion::Absent);
    let written = write_folders(&input, &dir).expect("written");
    assert_eq!(written.len(), 2);
    for folder in &written {
        assert!(folder.to_string_lossy().ends_with("__query_aware"));
        for f in ["config.yaml", "metrics.json", "predictions.csv"] {
            assert!(folder.join(f).is_file(), "{}", folder.join(f).display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// kvpress's records as `tools/kvpress_side_by_side.py --ratios` writes them: a ratio cell per
/// example, its FullKV (no ratio) and a budget cell, which the leaderboard leaves out.
fn kvpress_file() -> RecordsFile<Record> {
    let mut records = Vec::new();
    for (task, e, score) in [("vt", 0, 0.0), ("vt", 1, 1.0), ("cwe", 0, 0.0)] {
        records.push(Record {
            ratio: Some(RatioCell {
                target: 0.5,
                effective: 0.5006,
                budget: 2047,
                probes: 0,
            }),
            ..rec(task, e, "kvpress-keydiff", None, score)
        });
        records.push(rec(task, e, "kvpress-full", None, 1.0));
    }
    records.push(Record {
        budget: Some(128),
        ..rec("vt", 0, "kvpress-snapkv", None, 1.0)
    });
    let mut settings = file("question-agnostic").settings;
    settings.insert("runner".into(), "kvpress 0.5.5".into());
    RecordsFile { settings, records }
}

#[test]
fn kvpress_ratio_cells_join_as_their_own_method_with_kvpress_settings() {
    let input = Input::new(file("question-agnostic"), Companion::Usable(kvpress_file()));
    assert!(input.note.is_none());
    let g = groups(&input.file);
    let names: Vec<(&str, Option<f64>)> = g.iter().map(|g| (g.method.as_str(), g.ratio)).collect();
    // kvpress's FullKV and its budget cell are not leaderboard cells; kvplan's full is the line.
    assert_eq!(
        names,
        [
            ("full", None),
            ("kvpress-keydiff", Some(0.5)),
            ("snapkv", Some(0.5))
        ]
    );
    let b = board(&input.file, &Marks::default());
    let keydiff = point(&b, "kvpress-keydiff");
    // Task means vt 50, cwe 0: the average 25.
    assert!((keydiff.score - 25.0).abs() < 1e-9, "{}", keydiff.score);
    assert!((keydiff.effective - 0.5006).abs() < 1e-12);
    let yaml = config_yaml(&g[1], input.settings_of(&g[1].method));
    assert!(yaml.contains("runner: kvpress 0.5.5"), "{yaml}");
    assert!(
        yaml.contains(
            "press_init_command: 'kvpress keydiff press, KeyDiffPress(compression_ratio=0.5) on"
        ),
        "{yaml}"
    );
    assert!(
        yaml.contains("  kvpress_registry_name: keydiff\n"),
        "{yaml}"
    );
    let kvplan_yaml = config_yaml(&g[2], input.settings_of(&g[2].method));
    assert!(!kvplan_yaml.contains("runner:"), "{kvplan_yaml}");
    assert!(
        !kvplan_yaml.contains("kvpress_registry_name"),
        "{kvplan_yaml}"
    );
    assert!(folder_name(&g[1], false).ends_with("__kvpress-keydiff__0.50"));
}

#[test]
fn kvpress_records_of_other_prompts_are_left_out_with_the_reason() {
    let input = Input::new(
        file("question-agnostic"),
        Companion::LeftOut("made on other prompts (seed: 1 here, 0 in this run)".into()),
    );
    assert_eq!(groups(&input.file).len(), 2);
    assert!(input.kvpress.is_none());
    assert!(input.note.expect("note").contains("seed"));
}

#[test]
fn read_takes_the_kvpress_file_beside_a_ruler_records_file() {
    let dir = std::env::temp_dir().join(format!("kvplan-lb-read-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let ours = dir.join("M.ruler.records.json");
    let theirs = dir.join("M.ruler.kvpress.records.json");
    std::fs::write(
        &ours,
        serde_json::to_string(&file("question-agnostic")).expect("json"),
    )
    .expect("write");
    let alone = read(&ours).expect("read");
    assert!(alone.kvpress.is_none() && alone.note.is_none());
    std::fs::write(
        &theirs,
        serde_json::to_string(&kvpress_file()).expect("json"),
    )
    .expect("write");
    let both = read(&ours).expect("read");
    assert!(both.kvpress.is_some());
    assert_eq!(both.file.records.len(), alone.file.records.len() + 3);
    // A kvpress file named as the records to read is not read twice over itself.
    let own = read(&theirs).expect("read");
    assert!(own.kvpress.is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The board's point of `method`.
fn point<'b>(b: &'b Board, method: &str) -> &'b BoardPoint {
    b.points
        .iter()
        .find(|p| p.method == method)
        .unwrap_or_else(|| panic!("no point of {method}"))
}

/// A selection of the rows of `methods` (none: every method), on the prompts every row holds
/// when `common_prompts`.
fn selecting(methods: &[&str], common_prompts: bool) -> Selection {
    Selection {
        methods: (!methods.is_empty()).then(|| methods.iter().map(|m| m.to_string()).collect()),
        common_prompts,
        versus: None,
        ratios: None,
    }
}

/// A file whose kvpress row holds fewer prompts than kvplan's rows: three prompts under FullKV
/// and SnapKV, two under `kvpress-keydiff`, one under `kvpress-kvzip`.
fn uneven() -> Input {
    let mut f = file("question-agnostic");
    for (task, e) in [("vt", 0), ("cwe", 0)] {
        f.records
            .push(rec(task, e, "kvpress-keydiff", Some((0.5, 0.5)), 1.0));
    }
    f.records
        .push(rec("vt", 0, "kvpress-kvzip", Some((0.5, 0.5)), 1.0));
    Input {
        file: f,
        kvpress: None,
        note: None,
    }
}

#[test]
fn common_prompts_keep_what_every_row_holds_and_methods_choose_rows() {
    // Every row: full (vt 0, vt 1, cwe 0), snapkv (the same), keydiff (vt 0, cwe 0), kvzip
    // (vt 0): only vt 0 is common.
    let mut all = uneven();
    let note = all.select(&selecting(&[], true)).expect("a note");
    assert!(note.contains("1 of 3 prompts"), "{note}");
    assert!(note.contains("kvpress-kvzip @ 50% with 1"), "{note}");
    let kept: Vec<(String, usize)> = all
        .file
        .records
        .iter()
        .filter(|r| r.budget.is_none())
        .map(|r| (r.task.clone(), r.example))
        .collect();
    assert!(kept.iter().all(|k| k == &("vt".to_string(), 0)), "{kept:?}");
    assert_eq!(kept.len(), 4, "full, snapkv, keydiff and kvzip on vt 0");
    // Without KVzip the common prompts are keydiff's two.
    let mut two = uneven();
    let note = two
        .select(&selecting(&["snapkv", "kvpress-keydiff"], true))
        .expect("a note");
    assert!(note.contains("2 of 3 prompts"), "{note}");
    let b = board(&two.file, &Marks::default());
    let methods: Vec<&str> = b.points.iter().map(|p| p.method.as_str()).collect();
    assert_eq!(methods, ["kvpress-keydiff", "snapkv"]);
    // SnapKV on vt 0 (1) and cwe 0 (1): 100 on the common prompts, where all three give 75 (the
    // mean of vt's 50 and cwe's 100).
    let snap = point(&b, "snapkv");
    assert!((snap.score - 100.0).abs() < 1e-9, "{}", snap.score);
    // A method the records do not hold is named in the note.
    let mut typo = uneven();
    let note = typo
        .select(&selecting(&["snapkv", "kvpress-keydif"], false))
        .expect("a note");
    assert!(note.contains("no ratio rows of kvpress-keydif"), "{note}");
    // FullKV, the reference line, is no ratio row but is never "absent".
    let mut named = uneven();
    let note = named.select(&selecting(&["full", "snapkv"], false));
    assert!(
        note.as_deref().is_none_or(|n| !n.contains("no ratio rows")),
        "{note:?}"
    );
    // Nothing asked, nothing changed.
    let mut same = uneven();
    assert_eq!(same.select(&Selection::default()), None);
    assert_eq!(same.file.records.len(), uneven().file.records.len());
}

/// Six vt prompts: FullKV, SnapKV and HeadKV answer all six, PoD none.
fn six_prompts() -> RecordsFile<Record> {
    let mut records = Vec::new();
    for e in 0..6 {
        records.push(rec("vt", e, "full", None, 1.0));
        for (m, score) in [("snapkv", 1.0), ("headkv", 1.0), ("pod", 0.0)] {
            records.push(rec("vt", e, m, Some((0.5, 0.5)), score));
        }
    }
    RecordsFile {
        settings: file("question-agnostic").settings,
        records,
    }
}

#[test]
fn the_table_adjusts_its_differences_by_holm_and_marks_rows_that_need_a_caveat() {
    let marks = Marks {
        r2_at_chance: Some(kvplan_planner::chance::ChanceTest::new(
            50,
            2,
            19.0,
            0.9999,
            Vec::new(),
        )),
        r2_variant: None,
        pod_untrained: true,
    };
    let md = markdown(&six_prompts(), &marks, "snapkv");
    // PoD loses all six pairs to FullKV and to SnapKV: exact McNemar 2 · 2⁻⁶ = 0.03125 each.
    // The family is every Δ with a p-value: those two and HeadKV's and SnapKV's (p 1), five in
    // all; Holm multiplies the smallest by 5 (0.156) and the next by 4 (0.125), kept monotone
    // (0.156): no longer below 5%, so both PoD rows read ≈.
    let pod = md
        .lines()
        .find(|l| l.starts_with("| pod ‡ @ 50% |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert_eq!(pod.matches("p 0.031 Holm 0.156 ≈").count(), 2, "{pod}");
    assert!(md.contains("| headkv † @ 50% |"), "{md}");
    assert!(md.contains("| snapkv @ 50% |"), "{md}");
    assert!(md.contains("PoD untrained"), "{md}");
    assert!(md.contains("2 of 50 answered right"), "{md}");
    let b = board(&six_prompts(), &marks);
    let labels: Vec<&str> = b.points.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(labels, ["headkv †", "pod ‡", "snapkv"]);
    // Without marks the rows keep their bare names and no footnote is added.
    let bare = markdown(&six_prompts(), &Marks::default(), "snapkv");
    assert!(bare.contains("| pod @ 50% |"), "{bare}");
    assert!(!bare.contains('‡') && !bare.contains('†'), "{bare}");
    assert!(bare.contains("p 0.031 Holm 0.156 ≈"), "{bare}");
}

#[test]
fn the_second_difference_pairs_every_row_with_the_method_asked_for() {
    // Against PoD (0 on all six prompts) SnapKV and HeadKV (1 on all six) gain 100 points on
    // each pair: exact McNemar 2 · 2⁻⁶ = 0.031. The family: those two, PoD's against FullKV
    // (0.031) and SnapKV's and HeadKV's against FullKV (p 1); Holm 5 · 0.031 = 0.156 for the
    // smallest, kept monotone for the next two.
    let md = markdown(&six_prompts(), &Marks::default(), "pod");
    assert!(md.contains("| Δ vs pod [95% CI] |"), "{md}");
    let column = |row: &str| -> String {
        let line = md
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row} in {md}"));
        line.split('|')
            .nth(6)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    for row in ["| snapkv @ 50% |", "| headkv @ 50% |"] {
        assert!(
            column(row).starts_with("+100.0 [100.0, 100.0] p 0.031 Holm 0.156"),
            "{row}: {}",
            column(row)
        );
    }
    // PoD's own row and FullKV's have no partner.
    assert_eq!(column("| pod @ 50% |"), "–");
    assert_eq!(column("| full |"), "–");
    // A method the records lack is named when asked for, and the column stays empty.
    let mut lacking = uneven();
    let note = lacking
        .select(&Selection {
            versus: Some("kvpress-tova".into()),
            ..Selection::default()
        })
        .expect("a note");
    assert!(note.contains("no ratio rows of kvpress-tova"), "{note}");
}

#[test]
fn kvpress_presses_carry_the_registry_s_name_and_their_constructor() {
    // evaluation/evaluate_registry.py: "expected_attention": AdaKVPress(ExpectedAttentionPress(
    // epsilon=1e-2)); "duo_attention_on_the_fly": DuoAttentionPress(on_the_fly_scoring=True);
    // ExpectedAttention at its default epsilon 0 is no entry of it.
    let e2 = kvpress_press("adakv-expected-e2").expect("e2");
    assert_eq!(e2.0, Some("expected_attention"));
    assert!(e2.1.contains("epsilon=0.01"), "{}", e2.1);
    assert_eq!(kvpress_press("expected").expect("expected").0, None);
    assert_eq!(kvpress_press("adakv-expected").expect("adakv").0, None);
    assert_eq!(
        kvpress_press("duo").expect("duo").0,
        Some("duo_attention_on_the_fly")
    );
    // evaluation/evaluate.py, `_setup_press`: `press.head_compression_ratio = compression_ratio`.
    let board = kvpress_press("duo-board").expect("duo-board");
    assert_eq!(board.0, Some("duo_attention_on_the_fly"));
    assert!(
        board
            .1
            .starts_with("DuoAttentionPress(head_compression_ratio={r},"),
        "{}",
        board.1
    );
    assert_eq!(
        kvpress_press("streaming").expect("streaming").0,
        Some("streaming_llm")
    );
    assert_eq!(kvpress_press("nonesuch"), None);
}

#[test]
fn every_press_the_side_by_side_script_runs_has_a_constructor_here() {
    // tools/kvpress_side_by_side.py's PRESSES list, read from the script itself.
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kvpress_side_by_side.py"),
    )
    .expect("the script");
    let list = script
        .split_once("PRESSES = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("PRESSES = [...]")
        .0;
    let names: Vec<&str> = list
        .split(',')
        .map(|n| n.trim().trim_matches('"'))
        .filter(|n| !n.is_empty())
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        assert!(kvpress_press(n).is_some(), "{n}: no row in KVPRESS_PRESSES");
    }
}

#[test]
fn a_row_short_of_its_target_is_shown_where_it_lands_and_compared_with_fullkv_only() {
    // PoD asked for 0.5 holds 0.10 (as untrained PoD did on the board): it keeps its Δ vs FullKV
    // (six losses, exact McNemar 2 · 2⁻⁶) but gets no Δ vs SnapKV; HeadKV at 0.505 is within
    // 0.01 of the target and keeps both.
    let mut f = six_prompts();
    for r in &mut f.records {
        match r.method.as_str() {
            "pod" => r.ratio.as_mut().expect("ratio").effective = 0.10,
            "headkv" => r.ratio.as_mut().expect("ratio").effective = 0.505,
            _ => {}
        }
    }
    let md = markdown(&f, &Marks::default(), "snapkv");
    let pod = md
        .lines()
        .find(|l| l.starts_with("| pod @ 50% (lands at 0.10) |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(pod.contains("| – (not at the target) |"), "{pod}");
    assert!(pod.contains("-100.0"), "{pod}");
    let headkv = md
        .lines()
        .find(|l| l.starts_with("| headkv @ 50% |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(!headkv.contains("not at the target"), "{headkv}");
    // The CSV gives each prompt's measured ratio, as kvpress's predictions do.
    let g = groups(&f);
    let pod_group = g.iter().find(|g| g.method == "pod").expect("pod folder");
    let csv = predictions_csv(pod_group, None);
    assert!(
        csv.lines()
            .nth(1)
            .expect("a row")
            .contains(",0.1,0,0,0.100000,2000"),
        "{csv}"
    );
}

#[test]
fn ratios_choose_targets_so_a_sparse_target_does_not_shrink_the_common_prompts() {
    // uneven() with SnapKV at 87.5% on vt 0 alone: at every target the common prompts are vt
    // 0's (1 of 3); at 50% alone, the two SnapKV and KeyDiff both hold there.
    let sparse = || {
        let mut i = uneven();
        i.file
            .records
            .push(rec("vt", 0, "snapkv", Some((0.875, 0.875)), 1.0));
        i
    };
    let sel = |ratios: Option<Vec<f64>>| Selection {
        ratios,
        ..selecting(&["snapkv", "kvpress-keydiff"], true)
    };
    let mut every = sparse();
    let note = every.select(&sel(None)).expect("a note");
    assert!(note.contains("1 of 3 prompts"), "{note}");
    let mut half = sparse();
    let note = half.select(&sel(Some(vec![0.5]))).expect("a note");
    assert!(note.contains("2 of 3 prompts"), "{note}");
    assert!(half
        .file
        .records
        .iter()
        .all(|r| r.ratio.as_ref().is_none_or(|c| c.target == 0.5)));
    // A target no row holds is named.
    let mut typo = sparse();
    let note = typo.select(&sel(Some(vec![0.5, 0.6]))).expect("a note");
    assert!(note.contains("no ratio rows at 60%"), "{note}");
}
