//! The committed evaluation (`results/` at the repository root) is what its records imply: the
//! aggregation into the results file and the Markdown tables, run on the committed records,
//! reproduce the committed `results.json`, `niah.md`, `ruler.md` and `ppl.md` byte for byte. This
//! pins the summarising half of the eval driver (the model half is pinned by the end-to-end
//! `eval_quick` test) and holds for any consistent regeneration of `results/`.

use std::path::{Path, PathBuf};

use kvplan_eval::aggregate::aggregate_niah;
use kvplan_eval::marks::Marks;
use kvplan_eval::records::{Record, RecordsFile};
use kvplan_eval::results::{EvalResults, RESULTS_SCHEMA_VERSION};
use kvplan_eval::table;
use kvplan_eval::tasks::ppl::report::markdown as ppl_markdown;
use kvplan_eval::tasks::ppl::{curves, PplRecord};
use kvplan_eval::tasks::ruler::{report, Task};
use serde::de::DeserializeOwned;

const MODEL: &str = "SmolLM2-135M-Instruct";

fn results_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../results")
}

fn read(name: &str) -> String {
    let path = results_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn records_file<R: DeserializeOwned>(task: &str) -> RecordsFile<R> {
    let text = read(&format!("{MODEL}.{task}.records.json"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"))
}

fn records<R: DeserializeOwned>(task: &str) -> Vec<R> {
    records_file(task).records
}

/// The positions of the committed perplexity table: those of the table below the streamed length.
fn ppl_positions(tokens: usize) -> Vec<usize> {
    [256, 512, 1024, 2048, 4096]
        .into_iter()
        .filter(|&p| p < tokens)
        .collect()
}

#[test]
fn committed_results_and_tables_are_what_the_records_imply() {
    let niah_file: RecordsFile<Record> = records_file("niah");
    // The rows' marks as `kvplan eval table` sets them from the records' settings: no plan with
    // the settings' hash is committed (no † rows), and no PoD weights were given (‡ rows).
    let marks = Marks::of(None, &niah_file.settings);
    assert!(
        marks.pod_untrained,
        "the committed NIAH run used PoD untrained"
    );
    let niah = niah_file.records;
    let ruler: Vec<Record> = records("ruler");
    // The tasks the records hold, in RULER's order: a table has a column per recorded task, as
    // `kvplan eval table` renders it (eval/src/render.rs).
    let recorded: Vec<Task> = Task::ALL
        .into_iter()
        .filter(|t| ruler.iter().any(|r| r.task == t.name()))
        .collect();
    let ppl: Vec<PplRecord> = records("ppl");
    let (cells, mut quality) = aggregate_niah("niah", &niah);
    quality.extend(report::quality(&ruler, &Task::ALL));
    let streams: Vec<&PplRecord> = ppl.iter().collect();
    let perplexity = curves(&streams, 128);
    let results = EvalResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        model: MODEL.to_string(),
        niah: cells,
        quality,
        perplexity,
    };
    let json = results.to_json().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        json == read(&format!("{MODEL}.results.json")),
        "results.json differs"
    );
    assert_eq!(
        marks.apply(&table::markdown("niah", &niah)),
        read(&format!("{MODEL}.niah.md"))
    );
    assert_eq!(
        report::markdown(&ruler, &recorded),
        read(&format!("{MODEL}.ruler.md"))
    );
    let tokens = ppl.first().map_or(0, |r| r.tokens);
    assert_eq!(
        ppl_markdown(&results.perplexity, &ppl_positions(tokens)),
        read(&format!("{MODEL}.ppl.md"))
    );
}
