//! `kvplan eval leaderboard RECORDS… --out DIR`: RULER records of ratio runs (`kvplan eval ruler
//! --ratios …`) in the kvpress leaderboard's form (`kvplan_eval::leaderboard`), no model loaded:
//! a folder per (model, length, method, target ratio) with kvpress's `config.yaml`,
//! `metrics.json` and `predictions.csv`; `leaderboard.md`, the score against the effective ratio
//! with intervals, one section per records file; and per model the leaderboard's figure
//! (`kvplan_plots::figures::leaderboard`) into `DIR/figures/`.

use std::path::PathBuf;

use anyhow::Context;
use kvplan_eval::leaderboard::{board, markdown, write_folders, Board};
use kvplan_eval::records::{Record, RecordsFile};
use kvplan_eval::write_atomic;
use kvplan_plots::figures::leaderboard::{Leaderboard, Point};

/// Arguments of `kvplan eval leaderboard`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Example (after `kvplan eval ruler --ratios 0.25,0.5,0.75 --mode question-agnostic`):
  kvplan eval leaderboard results/SmolLM2-135M-Instruct.ruler.records.json --out results/lb")]
pub struct LeaderboardArgs {
    /// RULER records files (`<model>.ruler.records.json`, merged shards), one per model.
    #[arg(required = true, value_name = "RECORDS")]
    pub records: Vec<PathBuf>,
    /// Folder of the result folders, the table and the figures.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The figure of `b`.
fn figure(b: &Board) -> anyhow::Result<kvplan_plots::Rendered> {
    let points: Vec<Point> = b
        .points
        .iter()
        .map(|p| Point {
            method: p.method.clone(),
            effective: p.effective,
            score: p.score,
            interval: p.interval,
        })
        .collect();
    let lengths: Vec<String> = b.lengths.iter().map(usize::to_string).collect();
    let what = format!(
        "RULER {} tokens, average of {} task(s)",
        lengths.join("/"),
        b.tasks.len()
    );
    let fig = Leaderboard {
        model: &b.model,
        what: &what,
        points: &points,
        full: b.full.map(|f| f.0),
    };
    Ok(kvplan_plots::render::render(
        &fig,
        kvplan_plots::Format::Both,
    )?)
}

/// Runs `kvplan eval leaderboard`.
pub fn run(args: LeaderboardArgs) -> anyhow::Result<()> {
    let mut md = String::new();
    let mut figures = Vec::new();
    let mut folders = 0;
    for path in &args.records {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: RecordsFile<Record> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a RULER records file", path.display()))?;
        let written = write_folders(&file, &args.out)?;
        folders += written.len();
        let b = board(&file);
        if b.points.is_empty() {
            eprintln!(
                "kvplan: note: {} holds no ratio cells (run with --ratios); only FullKV is written",
                path.display()
            );
        }
        md.push_str(&markdown(&file));
        md.push('\n');
        figures.push(figure(&b)?);
    }
    let table = args.out.join("leaderboard.md");
    write_atomic(&table, &md)?;
    let dir = args.out.join("figures");
    let drawn = kvplan_plots::write_figures(&dir, &figures)?;
    super::write_stdout(&md)?;
    eprintln!(
        "kvplan: {folders} result folders, table {}, {} figure files in {}",
        table.display(),
        drawn.len(),
        dir.display()
    );
    Ok(())
}
