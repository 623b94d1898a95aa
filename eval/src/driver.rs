//! The one driver every evaluation task runs through (feature `model`): check the request, open
//! the records (resuming a run made under the same settings) and kvpress's records on the same
//! prompts when there are ([`crate::companion`]), build every prompt first so a prompt that
//! cannot be built fails before any model run, score each prompt's pending cells (saving the
//! records after every cell), then aggregate the run's records and kvpress's into the results
//! file, draw the figures, write and show the table.
//!
//! [`run_shard`] runs one shard of the prompts (`--shard i/n`, [`crate::shard`]) into files
//! named for it.
//!
//! A task ([`Task`]: NIAH, RULER, streaming perplexity under `crate::tasks`) says only
//! what is its own: its settings, its prompts and their cells, how a prompt is built and scored,
//! and how its records are summarised.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::backend::Backend;

use crate::companion::{self, Companion};
use crate::prompt::{ExportedPrompt, PromptsFile, PROMPTS_FORMAT};
use crate::records::{self, CellKey, CellRecord, RecordsFile};
use crate::runner::Evaluator;
use crate::shard::Shard;
use crate::task::{skip_lines, Cell, Identity, Progress, Reporter, Sink, Skipped, Unit};
use crate::{write_atomic, Error, Result};

/// A prompt (or text) built for scoring.
pub struct Prepared<I> {
    /// What the task scores its cells on (token ids and what it needs to score).
    pub input: I,
    /// The prompt, for progress lines (`1024 tokens, depth 0.5`).
    pub what: String,
}

/// An evaluation task run by [`run`].
pub trait Task<B: Backend> {
    /// What one cell records.
    type Record: CellRecord;
    /// A built prompt.
    type Input;

    /// The task's name: records `<model>.<name>.records.json`, table `<model>.<name>.md`.
    fn name(&self) -> &'static str;
    /// Refuses what the model or the plan cannot run, before anything is read.
    fn check(&self, ev: &Evaluator<'_, B>) -> Result<()>;
    /// Settings beside the [`Identity`]'s that a records file must match.
    fn settings(&self) -> Vec<(String, String)>;
    /// Reads what the prompts are built from (haystack, data sets); `reporter` may be told.
    fn load(&mut self, ev: &Evaluator<'_, B>, reporter: &mut dyn Reporter) -> Result<()>;
    /// The line announcing the run, if any.
    fn describe(&self, model: &str, backend: &str) -> Option<String>;
    /// Every prompt of the run with its cells, in run order.
    fn units(&self) -> Vec<Unit>;
    /// Builds prompt `unit` (an index into [`Task::units`]).
    fn prepare(&mut self, ev: &Evaluator<'_, B>, unit: usize) -> Result<Prepared<Self::Input>>;
    /// Scores the `pending` cells of a built prompt, each record or skipped cell into `sink`.
    fn score(
        &mut self,
        ev: &Evaluator<'_, B>,
        input: &Self::Input,
        pending: &[Cell],
        sink: &mut Sink<'_, Self::Record>,
    ) -> Result<()>;
    /// Puts the run's records (`records`, in file order) into the results file at `results`
    /// (model `model`) and returns the Markdown table.
    fn summarise(&self, records: &[&Self::Record], results: &Path, model: &str) -> Result<String>;
    /// What the run made, for the closing line (`12 cells`).
    fn made(&self, records: usize) -> String;
    /// A built prompt as the prompts file holds it (`None`: the task has no prompts to export).
    fn export(&self, _input: &Self::Input) -> Option<ExportedPrompt> {
        None
    }
}

/// A records file and where it is saved.
struct Records<R> {
    file: RecordsFile<R>,
    path: PathBuf,
}

/// Runs `task` with the model of `ev` into the folder `out`; `identity` names the model and what
/// the records are made under.
pub fn run<B: Backend, T: Task<B>>(
    ev: &Evaluator<'_, B>,
    identity: &Identity,
    out: &Path,
    task: &mut T,
    reporter: &mut dyn Reporter,
) -> Result<()> {
    run_shard(ev, identity, out, task, reporter, Shard::WHOLE)
}

/// [`run`] of the prompts of one `shard` of the run ([`crate::shard`]): its records, table and
/// results files carry the shard in their names; its settings are the whole run's.
pub fn run_shard<B: Backend, T: Task<B>>(
    ev: &Evaluator<'_, B>,
    identity: &Identity,
    out: &Path,
    task: &mut T,
    reporter: &mut dyn Reporter,
    shard: Shard,
) -> Result<()> {
    task.check(ev)?;
    let model = &identity.model;
    let mut settings = identity.settings();
    settings.extend(ev.settings());
    settings.extend(task.settings());
    let part = shard.suffix();
    let path = out.join(format!("{model}.{}{part}.records.json", task.name()));
    let beside = beside::<T::Record>(
        &companion::path(out, model, task.name()),
        &settings,
        reporter,
    )?;
    let _lock = records::lock(&path, &mut |l| reporter.note(l))?;
    let file = RecordsFile::<T::Record>::open(&path, settings)?;
    let mut records = Records { file, path };
    task.load(ev, reporter)?;
    if let Some(line) = task.describe(model, &identity.backend) {
        reporter.note(&line);
    }
    let started = Instant::now();
    // Prompts of other shards keep their place (a unit's index builds its prompt) but no cells.
    let mut units = task.units();
    for (i, u) in units.iter_mut().enumerate() {
        if !shard.takes(i) {
            u.cells.clear();
        }
    }
    ev.check_pod_cells(&units)?;
    let skipped = score_units(ev, task, &units, &mut records, reporter)?;
    for line in skip_lines(&skipped) {
        reporter.note(&line);
    }
    let results = out.join(format!("{model}{part}.results.json"));
    let table = out.join(format!("{model}.{}{part}.md", task.name()));
    let wanted = of_units(&records.file, &units);
    // The table: every cell recorded on the run's prompts (this run's and those of earlier runs
    // into the same file, at any budget), then kvpress's at the run's budgets.
    let mut shown = companion::on_prompts(&records.file, &units);
    if shown.len() > wanted.len() {
        reporter.note(&format!(
            "table: cells of this run's methods {}, of other methods and budgets recorded on the \
             same prompts {}",
            wanted.len(),
            shown.len() - wanted.len()
        ));
    }
    if let Some(file) = &beside {
        shown.extend(companion::of_units(file, &units));
    }
    let md = task.summarise(&shown, &results, model)?;
    let md = crate::marks::Marks::of(ev.plan, &records.file.settings).apply(&md);
    let figures = out.join("figures").join(format!("{model}{part}"));
    reporter
        .figures(&results, &figures)
        .map_err(Error::Report)?;
    write_atomic(&table, &md)?;
    reporter.table(&md).map_err(Error::Report)?;
    let line = format!(
        "{} in {:.1}s; records {}, results {}, table {}",
        task.made(wanted.len()),
        started.elapsed().as_secs_f64(),
        records.path.display(),
        results.display(),
        table.display()
    );
    reporter.note(&line);
    Ok(())
}

/// kvpress's records at `path` when they were made on the run's prompts (`settings`); a note
/// when they were not.
fn beside<R: CellRecord>(
    path: &Path,
    settings: &std::collections::BTreeMap<String, String>,
    reporter: &mut dyn Reporter,
) -> Result<Option<RecordsFile<R>>> {
    Ok(match companion::load(path, settings)? {
        Companion::Usable(file) => Some(file),
        Companion::LeftOut(why) => {
            reporter.note(&why);
            None
        }
        Companion::Absent => None,
    })
}

/// Builds every prompt of `task` (the model never runs) and writes them, with the settings a
/// records file of the same run holds, to `path` as a prompts file ([`PromptsFile`]), atomically;
/// returns how many were written.
pub fn export_prompts<B: Backend, T: Task<B>>(
    ev: &Evaluator<'_, B>,
    identity: &Identity,
    path: &Path,
    task: &mut T,
    reporter: &mut dyn Reporter,
) -> Result<usize> {
    let mut settings = identity.settings();
    settings.extend(task.settings());
    task.load(ev, reporter)?;
    let mut prompts = Vec::new();
    for unit in 0..task.units().len() {
        let prepared = task.prepare(ev, unit)?;
        prompts.extend(task.export(&prepared.input));
    }
    let count = prompts.len();
    let file = PromptsFile {
        format: PROMPTS_FORMAT.to_string(),
        model: identity.model.clone(),
        model_sha256: identity.model_sha256.clone(),
        task: task.name().to_string(),
        settings,
        prompts,
    };
    let text = serde_json::to_string_pretty(&file).map_err(|e| Error::Invalid {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    write_atomic(path, &text)?;
    Ok(count)
}

/// Scores every cell of `units` not yet in `records`; returns the cells not run, each with
/// where.
fn score_units<B: Backend, T: Task<B>>(
    ev: &Evaluator<'_, B>,
    task: &mut T,
    units: &[Unit],
    records: &mut Records<T::Record>,
    reporter: &mut dyn Reporter,
) -> Result<Vec<(String, Skipped)>> {
    let total = units.iter().map(|u| u.cells.len()).sum();
    reporter.start(task.name(), total);
    let mut progress = Progress::new(total);
    let work = prepare_all(ev, task, units, &records.file, &mut progress)?;
    if progress.done > 0 {
        reporter.progress(&progress);
    }
    let mut skipped = Vec::new();
    for (i, pending, prepared) in work {
        let mut sink = Sink::new(
            &mut records.file,
            &records.path,
            &mut progress,
            &mut *reporter,
            &prepared.what,
        );
        task.score(ev, &prepared.input, &pending, &mut sink)?;
        let (recorded, cells) = sink.finish();
        if recorded == 0 && !cells.is_empty() {
            reporter.progress(&progress);
        }
        skipped.extend(cells.into_iter().map(|c| (units[i].at.clone(), c)));
    }
    reporter.finish();
    Ok(skipped)
}

/// A unit index, its cells not yet recorded, and its built prompt.
type Work<I> = (usize, Vec<Cell>, Prepared<I>);

/// Builds every unit with pending cells, counting the others' cells as reused.
fn prepare_all<B: Backend, T: Task<B>>(
    ev: &Evaluator<'_, B>,
    task: &mut T,
    units: &[Unit],
    records: &RecordsFile<T::Record>,
    progress: &mut Progress,
) -> Result<Vec<Work<T::Input>>> {
    let mut work = Vec::new();
    for (i, u) in units.iter().enumerate() {
        let pending: Vec<Cell> = u
            .cells
            .iter()
            .filter(|c| records.get(&c.key).is_none())
            .cloned()
            .collect();
        progress.reuse(u.cells.len() - pending.len());
        if !pending.is_empty() {
            work.push((i, pending, task.prepare(ev, i)?));
        }
    }
    Ok(work)
}

/// The records of `units`' cells, in file order: records of other lengths, budgets or tasks stay
/// on file unused.
fn of_units<'r, R: CellRecord>(records: &'r RecordsFile<R>, units: &[Unit]) -> Vec<&'r R> {
    let keys: std::collections::HashSet<&CellKey> = units
        .iter()
        .flat_map(|u| u.cells.iter().map(|c| &c.key))
        .collect();
    records
        .records
        .iter()
        .filter(|r| keys.contains(&r.key()))
        .collect()
}
