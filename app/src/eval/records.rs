//! What is made from records alone, no model loaded: a run's tables re-rendered
//! (`kvplan_eval::render`), the records of a run's shards merged (`kvplan_eval::shard::merge`),
//! and RULER ratio records in the kvpress leaderboard's form (`kvplan_eval::leaderboard`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kvplan_common::fetch::sha256_file;
use kvplan_eval::leaderboard::{self, board, markdown, write_folders, Board};
use kvplan_eval::marks::Marks;
use kvplan_eval::paired::{compare, ppl_ratio, RowName};
use kvplan_eval::records::{Record, RecordsFile};
use kvplan_eval::render::{plan_sha256, render, settings_plan_sha256, Rendered};
use kvplan_eval::shard::{merge, merged_name};
use kvplan_eval::tasks::ppl::PplRecords;
use kvplan_eval::write_atomic;
use kvplan_planner::Plan;
use kvplan_plots::figures::leaderboard::{Leaderboard, Point};

/// Re-renders the table and results entries of the records file at `path`, under the plan they
/// were made under (`plan`, else the plan with their hash, [`plan_of`]); returns what it wrote.
pub fn render_table(path: &Path, plan: Option<&Path>) -> anyhow::Result<Rendered> {
    let plan = plan_of(path, plan, " (give --plan)")?;
    render(path, plan.as_ref()).map_err(|e| {
        // Most of render's errors name the file already; the others get it said once.
        let shown = path.display().to_string();
        if e.to_string().contains(&shown) {
            anyhow::Error::new(e)
        } else {
            anyhow::Error::new(e).context(format!("rendering {shown}"))
        }
    })
}

/// The plan the records at `path` were made under: `explicit` (its hash must be theirs), else
/// the plan with their hash where kvplan keeps plans ([`kept_plan`]); `None` when they name none,
/// or, with a note (ending in `hint`), when no plan has it.
fn plan_of(path: &Path, explicit: Option<&Path>, hint: &str) -> anyhow::Result<Option<Plan>> {
    // Its errors name the file.
    let Some(want) = plan_sha256(path)? else {
        return Ok(None);
    };
    let Some(file) = explicit else {
        return kept_plan(path, &want, hint);
    };
    let have = sha256_file(file).context("--plan")?;
    if have != want {
        bail!(
            "{}: plan_sha256 {have}, but {} were made under plan_sha256 {want}",
            file.display(),
            path.display()
        );
    }
    load_plan(file).map(Some)
}

/// The plan with SHA-256 `want` (the one the records at `path` name) in `./plans/`, the
/// per-user plans folder or the plans shipped with kvplan ([`crate::plans::with_sha256`]), so
/// that an installed kvplan run anywhere finds a catalog model's plan; `None`, with a note
/// (ending in `hint`), when no plan there has it.
fn kept_plan(path: &Path, want: &str, hint: &str) -> anyhow::Result<Option<Plan>> {
    let places = crate::plans::Places::here();
    if let Some((plan, _)) = crate::plans::with_sha256(&places, want)? {
        return Ok(Some(plan));
    }
    eprintln!(
        "kvplan: note: {} were made under a plan (sha256 {want}) found neither in {} nor in {} \
         nor among the plans shipped with kvplan; rows are not checked for retrieval-reasoning \
         scores at chance{hint}",
        path.display(),
        places.working.display(),
        places.user.display()
    );
    Ok(None)
}

/// The plan file `file`, parsed.
fn load_plan(file: &Path) -> anyhow::Result<Plan> {
    Plan::load(file, None).with_context(|| format!("reading {}", file.display()))
}

/// Row `a` of the records at `path_a` against row `b` of those at `path_b`
/// (`kvplan_eval::paired`): the line saying the difference, its interval, p and mdd; for a
/// perplexity run (`<model>.ppl.records.json`, one file given twice: its rows streamed the same
/// texts) the perplexity ratio over the texts both streamed, or over `text` alone. The same
/// file may be given twice (two rows of one run); it is read once.
pub fn paired_rows(
    (path_a, a): (&Path, &str),
    (path_b, b): (&Path, &str),
    text: Option<&str>,
) -> anyhow::Result<String> {
    let (row_a, row_b): (RowName, RowName) = (a.parse()?, b.parse()?);
    let context = || {
        format!(
            "comparing {a} of {} with {b} of {}",
            path_a.display(),
            path_b.display()
        )
    };
    let is_ppl = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".ppl.records.json"))
    };
    if is_ppl(path_a) || is_ppl(path_b) {
        if path_a != path_b {
            bail!(
                "{} and {}: perplexity rows pair within one run (the same texts streamed token by \
                 token); give its records file twice",
                path_a.display(),
                path_b.display()
            );
        }
        let json = std::fs::read_to_string(path_a)
            .with_context(|| format!("reading {}", path_a.display()))?;
        let file: PplRecords = serde_json::from_str(&json)
            .with_context(|| format!("{}: not a perplexity records file", path_a.display()))?;
        let r = ppl_ratio(&file.records, &row_a, &row_b, text).with_context(context)?;
        return Ok(r.line(a, b));
    }
    if text.is_some() {
        bail!("--text picks a text of a perplexity run (<model>.ppl.records.json) only");
    }
    let file_a = kvplan_eval::render::read(path_a)?;
    let file_b = if path_b == path_a {
        None
    } else {
        Some(kvplan_eval::render::read(path_b)?)
    };
    let records_b = file_b.as_ref().map_or(&file_a.records, |f| &f.records);
    let c = compare((&file_a.records, &row_a), (records_b, &row_b)).with_context(context)?;
    Ok(c.line(a, b))
}

/// The records at `a` and `b` on the cells both hold (`kvplan_eval::agree`; `renames`:
/// `A_METHOD=B_METHOD` pairs, B's name read as A's): the table, and whether a shared cell's
/// answer text differs.
pub fn records_agree(
    a: &Path,
    b: &Path,
    renames: &[String],
    show: usize,
) -> anyhow::Result<(String, bool)> {
    let renames = renames
        .iter()
        .map(|p| match p.split_once('=') {
            Some((x, y)) if !x.is_empty() && !y.is_empty() => Ok((x.to_string(), y.to_string())),
            _ => bail!("--as: expected A_METHOD=B_METHOD, found `{p}`"),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (file_a, file_b) = (kvplan_eval::render::read(a)?, kvplan_eval::render::read(b)?);
    let g = kvplan_eval::agree::agree(&file_a.records, &file_b.records, &renames, show);
    let md = g.markdown(&a.display().to_string(), &b.display().to_string());
    Ok((md, g.texts_differ))
}

/// The records at `input` without the cells of `rows` (`kvplan_eval::without`), written whole
/// to `out`, which must not exist (no silent overwrite); (dropped, kept).
pub fn records_without(
    input: &Path,
    out: &Path,
    rows: &[String],
) -> anyhow::Result<(usize, usize)> {
    if out.exists() {
        bail!(
            "{}: exists; remove it first or name another file",
            out.display()
        );
    }
    let rows = rows
        .iter()
        .map(|r| r.parse::<RowName>())
        .collect::<Result<Vec<_>, _>>()?;
    let file = kvplan_eval::render::read(input)?;
    let (kept, dropped) = kvplan_eval::without::without(&file, &rows)
        .with_context(|| format!("{}", input.display()))?;
    kept.save(out)
        .with_context(|| format!("writing {}", out.display()))?;
    Ok((dropped, kept.records.len()))
}

/// A merge's outcome.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Records in the merged file.
    pub records: usize,
    /// Files merged.
    pub files: usize,
    /// The merged file.
    pub out: PathBuf,
}

/// Merges the records files of one run's shards by cell key into `<out_dir>/<the run's name>`;
/// an existing file of that name is merged into only when listed among `records`.
pub fn merge_shards(records: &[PathBuf], out_dir: &Path) -> anyhow::Result<Merged> {
    let mut names = Vec::new();
    let mut files = Vec::new();
    for path in records {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let file: RecordsFile<Record> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a NIAH or RULER records file", path.display()))?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        names.push(merged_name(name));
        files.push((path.display().to_string(), file));
    }
    names.dedup();
    if names.len() != 1 {
        bail!(
            "the files are of different runs (merged names {}); merge one run's shards at a time",
            names.join(", ")
        );
    }
    let out = out_dir.join(&names[0]);
    let listed = records
        .iter()
        .any(|p| p.canonicalize().ok() == out.canonicalize().ok() && out.exists());
    if out.exists() && !listed {
        bail!(
            "{} exists: list it among the files to merge into it, or give another --out",
            out.display()
        );
    }
    let merged = merge(&files)?;
    merged.save(&out)?;
    Ok(Merged {
        records: merged.records.len(),
        files: files.len(),
        out,
    })
}

/// What the leaderboard wrote.
#[derive(Debug, Clone)]
pub struct LeaderboardFiles {
    /// The Markdown of every records file, one section each.
    pub markdown: String,
    /// Result folders written.
    pub folders: usize,
    /// The table file (`<out>/leaderboard.md`).
    pub table: PathBuf,
    /// Figure files written.
    pub figures: usize,
    /// Their folder (`<out>/figures`).
    pub figures_dir: PathBuf,
}

/// RULER ratio records in the kvpress leaderboard's form, into `out`: kvpress's result folders,
/// `leaderboard.md`, one figure per model into `out/figures/`. Each records file's rows are
/// marked under the plan it was made under: the one of `plans` whose hash its records name, else
/// the plan with that hash where kvplan keeps plans ([`plan_of`]); a file of `plans` that no
/// records file was made under is refused (a wrong plan would mark nothing, silently).
pub fn leaderboard(
    records: &[PathBuf],
    plans: &[PathBuf],
    out: &Path,
    selection: &kvplan_eval::leaderboard::Selection,
) -> anyhow::Result<LeaderboardFiles> {
    // Every file read and checked before anything is written: a bad second file leaves no
    // folders of the first behind.
    let mut inputs = Vec::with_capacity(records.len());
    let mut named = Vec::with_capacity(records.len());
    for path in records {
        let input = leaderboard::read(path)?;
        if input.file.records.is_empty() {
            bail!(
                "{}: holds no records, nothing to put on a leaderboard (records of `kvplan eval \
                 ruler --ratios …`)",
                path.display()
            );
        }
        named.push(settings_plan_sha256(&input.file.settings));
        inputs.push((path, input));
    }
    let mut given = Vec::with_capacity(plans.len());
    for file in plans {
        let have = sha256_file(file).context("--plan")?;
        if !named.iter().any(|w| w.as_deref() == Some(have.as_str())) {
            let names: Vec<String> = records
                .iter()
                .zip(&named)
                .map(|(p, w)| format!("{} {}", p.display(), w.as_deref().unwrap_or("none")))
                .collect();
            bail!(
                "{}: plan_sha256 {have}, but no records file given was made under it (their \
                 plan_sha256: {})",
                file.display(),
                names.join("; ")
            );
        }
        given.push((file.as_path(), have));
    }
    // Each file's plan read (and a given one parsed) before anything is written, too.
    let mut marked = Vec::with_capacity(inputs.len());
    for ((path, input), want) in inputs.into_iter().zip(named) {
        let plan = match want {
            None => None,
            Some(want) => match given.iter().find(|(_, have)| *have == want) {
                Some((file, _)) => Some(load_plan(file)?),
                None => kept_plan(path, &want, " (give --plan)")?,
            },
        };
        marked.push((path, input, plan));
    }
    let mut md = String::new();
    let mut figures = Vec::new();
    let mut folders = 0;
    for (path, mut input, plan) in marked {
        if let Some(why) = &input.note {
            eprintln!("kvplan: note: {why}");
        }
        let had_ratio_cells = input.file.records.iter().any(|r| r.ratio.is_some());
        if let Some(what) = input.select(selection) {
            eprintln!("kvplan: {}: {what}", path.display());
        }
        folders += write_folders(&input, out)?.len();
        let file = &input.file;
        let marks = Marks::of(plan.as_ref(), &file.settings);
        let b = board(file, &marks);
        if b.points.is_empty() {
            let why = if had_ratio_cells {
                "none of its ratio cells is kept by --methods and --common-prompts"
            } else {
                "it holds no ratio cells (run with --ratios)"
            };
            eprintln!(
                "kvplan: note: {}: {why}; only FullKV is written",
                path.display()
            );
        }
        md.push_str(&markdown(file, &marks, selection.versus()));
        md.push('\n');
        figures.push(figure(&b)?);
    }
    let table = out.join("leaderboard.md");
    write_atomic(&table, &md)?;
    let dir = out.join("figures");
    let drawn = kvplan_plots::write_figures(&dir, &figures)?;
    Ok(LeaderboardFiles {
        markdown: md,
        folders,
        table,
        figures: drawn.len(),
        figures_dir: dir,
    })
}

/// The figure of `b`.
fn figure(b: &Board) -> anyhow::Result<kvplan_plots::Rendered> {
    let points: Vec<Point> = b
        .points
        .iter()
        .map(|p| Point {
            method: p.method.clone(),
            label: p.label.clone(),
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
