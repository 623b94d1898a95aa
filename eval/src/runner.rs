//! Runs the model under the runtime's presses (feature `model`): the per-prompt machinery of the
//! prompt tasks (NIAH, RULER); the per-token stream of perplexity is its task's
//! (`crate::tasks::ppl`), over the presses this module builds.
//!
//! Per prompt every pending (method, budget) cell is scored on it ([`Evaluator::score_cells`]).
//! Every press that keeps the model's own forward pass (all but `pod`) compresses after the full
//! prefill in this runtime, so they share **one** prefill: the prompt runs once with an observer
//! recording the union of what the presses ask, and each press adopts a copy of the cache
//! ([`Session::adopt`]) — the same cache and observations it would compute alone. `pod` changes
//! attention from the first token, so it runs its own prefill. Decoding is greedy, at most a
//! given number of tokens ([`crate::tasks::niah::ANSWER_TOKENS`] for NIAH), and batched: up to
//! [`DECODE_BATCH`] cells of a prompt take each decode step together ([`Session::step_many`]),
//! which reads every weight once for all of them instead of once per cell, and gives each cell
//! the logits it gets alone, bit for bit (PoD, SpindleKV and the engines' layer classes run their
//! own forward and step alone); a cell's `seconds` count its even share of each step it took.
//!
//! The window placement and mode ([`crate::prompt`]) are the task's [`Setup`], in [`Scoring`]:
//! `question-end` records the observed rows ending at the question's last token in that same
//! prefill; `question-agnostic` prefills and compresses the context only, then every press runs
//! the question through the model, appended uncompressed ([`Session::extend`]), before decoding;
//! its KV fraction is measured after that, against FullKV of the whole prompt.
//!
//! **Bytes held.** Each record carries the share of FullKV's bytes held right after the prompt
//! (`kv_fraction`) and, over the whole generation — after the prompt and after every decode
//! step, each share against FullKV's bytes at that point — its peak (`kv_peak`) and mean
//! (`kv_mean`): a method that appends decoded tokens holds more at the end than after the
//! prompt, one held at its budget less; tables compare methods at their peak.
//!
//! Presses are built with the run's [`PressOptions`] (GQA aggregation, SpindleKV's GQA handling
//! and denominator, positions); a SpindleKV cell runs at the budget whose measured bytes match
//! SnapKV's at the row's budget unless `--spindle-bytes budget` ([`crate::equal_bytes`]); trained
//! PoD weights run only at the proximal window they were trained with ([`PodTrained`]). A cell
//! asked for a compression ratio of the context runs at the budget whose effective ratio,
//! measured on copies of the shared prefill, lands on the target ([`crate::ratio`]); its
//! effective ratio is measured once the compressed part is compressed, before any question is
//! appended.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

use burn::tensor::backend::Backend;
use kvplan_planner::{Method, MethodName, Plan, Target};
use kvplan_runtime::generate::{argmax, last_row};
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::observe::Observer;
use kvplan_runtime::press::from_plan::PressRequest;
use kvplan_runtime::press::options::PressOptions;
use kvplan_runtime::press::registry::build_press_with;
use kvplan_runtime::press::{shared_observe, Press, Session};
use kvplan_runtime::tokenizer::Tokenizer;

use crate::equal_bytes::{retarget_known, Retarget, SpindleBytes};
use crate::prompt::{Asked, Mode, PromptIds, Setup, Window};
use crate::ratio::{effective, start_budget, target_bytes, RatioCell};
use crate::records::Record;
use crate::task::{Cell, Sink, Skipped, Unit};
use crate::{Error, Result};

/// One cell's run, before scoring.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Method (registry name).
    pub method: String,
    /// `--budget` target.
    pub budget: Option<usize>,
    /// The new text, stop token removed.
    pub response: String,
    /// KV bytes held after the prompt over FullKV's.
    pub kv_fraction: f64,
    /// The share's peak and mean over the generation (module header).
    pub held: Held,
    /// Seconds of this cell (a shared prefill not counted; a re-targeting search counted; each
    /// decode step it took with other cells, its even share of that step).
    pub seconds: f64,
    /// The re-targeted budget and bytes of a SpindleKV cell at equal bytes.
    pub retarget: Option<Retarget>,
    /// A ratio cell's target, effective ratio and budget found.
    pub ratio: Option<RatioCell>,
}

impl Outcome {
    /// The record of this outcome on the prompt `asked` describes, scored `score`, for model
    /// `model`.
    pub fn record(self, asked: &Asked, model: &str, score: f64) -> Record {
        Record {
            task: asked.task.clone(),
            model: model.to_string(),
            context_len: asked.context_len,
            depth: asked.depth,
            example: asked.example,
            method: self.method,
            budget: self.budget,
            needle: asked.needle.clone(),
            expected: asked.expected.clone(),
            response: self.response,
            score,
            kv_fraction: self.kv_fraction,
            kv_peak: Some(self.held.peak),
            kv_mean: Some(self.held.mean),
            cluster: asked.cluster.clone(),
            seconds: self.seconds,
            retarget: self.retarget,
            ratio: self.ratio,
            question: asked.question.as_ref().map(|q| q.0.clone()),
            answer_prefix: asked.question.as_ref().map(|q| q.1.clone()),
        }
    }
}

/// The share of FullKV's bytes held over a generation: its peak and its mean over the
/// measurements (after the prompt, after every decode step).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    /// The largest share.
    pub peak: f64,
    /// The mean share.
    pub mean: f64,
}

impl Held {
    /// Peak and mean of `shares` (each kept in (0, 1] as the records want it); `None` without.
    pub fn of(shares: &[f64]) -> Option<Self> {
        if shares.is_empty() {
            return None;
        }
        let clamp = |x: f64| x.clamp(f64::MIN_POSITIVE, 1.0);
        let peak = shares.iter().copied().fold(f64::MIN, f64::max);
        let mean = shares.iter().sum::<f64>() / shares.len() as f64;
        Some(Self {
            peak: clamp(peak),
            mean: clamp(mean),
        })
    }
}

/// How the responses to one prompt are decoded, scored and recorded.
pub struct Scoring<'a> {
    /// What the records say about the prompt.
    pub asked: &'a Asked,
    /// Tokens decoded at most.
    pub answer_tokens: usize,
    /// The task's metric of a response, in [0, 1].
    pub metric: &'a dyn Fn(&str) -> f64,
    /// Window placement and mode.
    pub setup: Setup,
}

/// What `setup` prefills and compresses, where its observation rows end, and what is appended
/// uncompressed after it: the prompt (its rows ending at the question's end for
/// `question-end`), or the context then the question (`question-agnostic`).
fn prefilled(setup: Setup, p: &PromptIds) -> (&[u32], Option<usize>, &[u32]) {
    match (setup.mode, setup.window) {
        (Mode::QuestionAgnostic, _) => (&p.context_ids, None, &p.question_ids),
        (Mode::QuestionAware, Window::QuestionEnd) => (&p.ids, Some(p.window_end), &[]),
        (Mode::QuestionAware, Window::PromptEnd) => (&p.ids, None, &[]),
    }
}

/// A cell and its press, ready to run.
struct ReadyPress<B: Backend> {
    cell: CellSpec,
    press: Box<dyn Press<B>>,
}

/// A press re-targeted to equal bytes and what the search found.
struct Retargeted<B: Backend> {
    press: Box<dyn Press<B>>,
    retarget: Retarget,
}

/// A ratio cell's press at the budget its search found.
struct Ratioed<B: Backend> {
    press: Box<dyn Press<B>>,
    found: Found,
}

/// What a ratio cell's budget search found: the budget, and how many budgets it measured.
#[derive(Debug, Clone, Copy)]
struct Found {
    budget: usize,
    probes: usize,
}

/// What a cell's search found before it runs ([`Evaluator::search`]).
struct Searched {
    /// A ratio cell's budget (its start when nothing was searched).
    found: Option<Found>,
    /// A cell re-targeted to SnapKV's bytes.
    retarget: Option<Retarget>,
}

/// The shared prefill.
struct Prefill<B: Backend> {
    /// The cache after the prompt.
    cache: kvplan_runtime::cache::KvCache<B>,
    /// What was observed.
    observed: Observer,
    /// The last position's logits.
    logits: Vec<f32>,
}

/// The model, its tokenizer and the plan budgets come from.
pub struct Evaluator<'a, B: Backend> {
    /// The model.
    pub model: &'a Model<B>,
    /// Its tokenizer.
    pub tok: &'a Tokenizer,
    /// The plan (needed by every method but `full`).
    pub plan: Option<&'a Plan>,
    /// Model name recorded in each record.
    pub model_name: String,
    /// Press switches beyond the plan.
    pub options: PressOptions,
    /// How SpindleKV cells choose their budget.
    pub spindle_bytes: SpindleBytes,
    /// How HeadKV and HeadKV-R cells choose their budget.
    pub per_head_bytes: SpindleBytes,
    /// The proximal window PoD weights (`--weights`) were trained with, when given.
    pub pod_trained: Option<PodTrained>,
}

/// How `method`'s cells choose their budget: SpindleKV's by `spindle`, HeadKV's and
/// HeadKV-R's by `per_head`, every other method's at the row's budget.
fn bytes_mode(method: MethodName, spindle: SpindleBytes, per_head: SpindleBytes) -> SpindleBytes {
    match method {
        MethodName::Method(Method::Spindle) => spindle,
        MethodName::Method(Method::HeadKv | Method::HeadKvR) => per_head,
        _ => SpindleBytes::Budget,
    }
}

/// The budgets of `units`' PoD cells at which `plan` gives PoD another proximal window than
/// `trained` (PoD's `n_r` is `budget − n_s`), in first-seen order.
pub fn untrained_pod_budgets(
    plan: Option<&Plan>,
    trained: PodTrained,
    units: &[Unit],
) -> Vec<usize> {
    let Some(plan) = plan else {
        return Vec::new();
    };
    let mut wrong: Vec<usize> = Vec::new();
    for c in units.iter().flat_map(|u| &u.cells) {
        let (Some(b), true) = (c.budget, c.method == MethodName::Method(Method::Pod)) else {
            continue;
        };
        let budgets = plan.budgets(Method::Pod, b.max(1), Target::Tokens(b));
        let fits = budgets.is_ok_and(|x| (x.sinks, x.recent) == (trained.sinks, trained.recent));
        if !fits && !wrong.contains(&b) {
            wrong.push(b);
        }
    }
    wrong
}

/// The proximal window of trained PoD weights (`kvplan train-pod`'s `n_s`, `n_r`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodTrained {
    /// `n_s`: initial tokens.
    pub sinks: usize,
    /// `n_r`: recent tokens.
    pub recent: usize,
}

impl<'a, B: Backend> Evaluator<'a, B> {
    /// An evaluator of `model`.
    pub fn new(model: &'a Model<B>, tok: &'a Tokenizer, plan: Option<&'a Plan>) -> Self {
        Self {
            model,
            tok,
            plan,
            model_name: model.config.name.clone(),
            options: PressOptions::default(),
            spindle_bytes: SpindleBytes::default(),
            per_head_bytes: SpindleBytes::Budget,
            pod_trained: None,
        }
    }

    /// The settings the run's press options make, for every records file: the GQA
    /// aggregation, SpindleKV's GQA handling, denominator and bytes, the position policy when
    /// set, and the trained PoD window when weights are given.
    pub fn settings(&self) -> Vec<(String, String)> {
        let o = &self.options;
        let mut s = vec![
            ("gqa".to_string(), o.gqa.name().to_string()),
            ("spindle_gqa".into(), o.spindle_gqa.name().into()),
            (
                "spindle_denominator".into(),
                o.spindle_denominator.name().into(),
            ),
            ("spindle_bytes".into(), self.spindle_bytes.name().into()),
        ];
        if let Some(p) = o.positions {
            s.push(("positions".into(), p.name().into()));
        }
        // Recorded only when set, so runs made before it existed still resume.
        if self.per_head_bytes == SpindleBytes::Equal {
            s.push(("per_head_bytes".into(), self.per_head_bytes.name().into()));
        }
        if let Some(t) = self.pod_trained {
            s.push(("pod_trained_sinks".into(), t.sinks.to_string()));
            s.push(("pod_trained_recent".into(), t.recent.to_string()));
        }
        s
    }

    /// Refuses the run when trained PoD weights would run at another proximal window than
    /// they were trained with ([`untrained_pod_budgets`]).
    pub fn check_pod_cells(&self, units: &[Unit]) -> Result<()> {
        let Some(t) = self.pod_trained else {
            return Ok(());
        };
        let wrong = untrained_pod_budgets(self.plan, t, units);
        if wrong.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = wrong.iter().map(usize::to_string).collect();
        Err(Error::Request(format!(
            "--weights were trained for PoD with n_s = {}, n_r = {} (n_r = budget − n_s): PoD \
             runs at --budgets {} only, not {}; drop those budgets, or train one set per budget \
             (`kvplan train-pod --recent`)",
            t.sinks,
            t.recent,
            t.sinks + t.recent,
            list.join(",")
        )))
    }

    /// What a press at `budget` is asked for on a prompt of `n` tokens.
    fn request(&self, n: usize, budget: Option<usize>) -> PressRequest<'a> {
        PressRequest {
            plan: self.plan,
            context_len: n,
            target: budget.map(Target::Tokens),
            options: self.options,
        }
    }

    /// The press of `method` at `budget` for a prompt of `n` tokens.
    pub(crate) fn press(
        &self,
        method: MethodName,
        n: usize,
        budget: Option<usize>,
    ) -> Result<Box<dyn Press<B>>> {
        let request = self.request(n, budget);
        Ok(build_press_with::<B>(method, &request, &self.model.config)?.press)
    }

    /// The smallest budget in `1..=hi` at which the plan builds `method`'s press for `n` tokens
    /// (SpindleKV: above its window and β), found by building presses only (budgets that build
    /// are taken to come after those that do not); `hi` when none below it builds.
    fn smallest_budget(&self, method: MethodName, n: usize, hi: usize) -> usize {
        let (mut lo, mut hi) = (1, hi.max(1));
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.press(method, n, Some(mid)) {
                Ok(_) => hi = mid,
                Err(_) => lo = mid + 1,
            }
        }
        lo
    }

    /// The press of a ratio cell before its search: at [`start_budget`], or at the smallest
    /// budget the plan accepts when that is larger; the budget it was built at.
    fn ratio_press(
        &self,
        method: MethodName,
        n: usize,
        target: f64,
    ) -> Result<(Box<dyn Press<B>>, usize)> {
        let start = start_budget(target, n);
        match self.press(method, n, Some(start)) {
            Ok(p) => Ok((p, start)),
            Err(_) => {
                let lo = self.smallest_budget(method, n, n);
                Ok((self.press(method, n, Some(lo))?, lo))
            }
        }
    }

    /// Scores `pending` cells on `prompt`: each cell whose press the plan can build at the
    /// length of what it compresses (the prompt, or the context in question-agnostic mode) runs
    /// (one shared prefill, module header), greedy-decodes and is scored and recorded into `sink`
    /// as `scoring` says. Cells whose press cannot be built (the plan has no
    /// budgets for them at this length, …) go to `sink` as skipped, with the reason.
    pub fn score_cells(
        &self,
        prompt: &PromptIds,
        pending: &[Cell],
        scoring: Scoring<'_>,
        sink: &mut Sink<'_, Record>,
    ) -> Result<()> {
        let mut ready = Vec::new();
        let setup = scoring.setup;
        let compressed = prefilled(setup, prompt).0.len();
        for c in pending {
            let built = match c.ratio {
                Some(target) => self
                    .ratio_press(c.method, compressed, target)
                    .map(|(p, budget)| (p, Some(RatioStart { target, budget }))),
                None => self
                    .press(c.method, compressed, c.budget)
                    .map(|p| (p, None)),
            };
            match built {
                Ok((press, ratio)) => ready.push(ReadyPress {
                    cell: CellSpec {
                        method: c.method,
                        budget: c.budget,
                        ratio,
                    },
                    press,
                }),
                Err(e) => sink.skip(Skipped {
                    method: c.method.to_string(),
                    budget: c.budget,
                    ratio: c.ratio,
                    reason: e.to_string(),
                }),
            }
        }
        if ready.is_empty() {
            return Ok(());
        }
        let model = &self.model_name;
        let run = (prompt, setup, scoring.answer_tokens);
        self.score_prompt(run, ready, &mut |o| match o {
            Ok(o) => {
                let score = (scoring.metric)(&o.response);
                sink.record(o.record(scoring.asked, model, score))
            }
            Err(skipped) => {
                sink.skip(skipped);
                Ok(())
            }
        })
    }

    /// Runs the prompt `ids` under every ready press and greedy-decodes at most `answer_tokens`
    /// tokens for each, handing each outcome (or the cell skipped, when its re-targeting
    /// failed) to `on_cell`, in the cells' order. Every press that keeps the model's forward
    /// pass adopts a copy of one shared prefill (module header). Cells are started one by one
    /// and decoded [`DECODE_BATCH`] at a time ([`Session::step_many`]: one step of every cell
    /// reads each weight once, and gives each cell the numbers it gets alone).
    fn score_prompt(
        &self,
        (prompt, setup, answer_tokens): (&PromptIds, Setup, usize),
        presses: Vec<ReadyPress<B>>,
        on_cell: &mut dyn FnMut(std::result::Result<Outcome, Skipped>) -> Result<()>,
    ) -> Result<()> {
        let (ids, rows_end, question) = prefilled(setup, prompt);
        let (cells, mut presses): (Vec<_>, Vec<_>) =
            presses.into_iter().map(|r| (r.cell, r.press)).unzip();
        // A press that keeps the model's forward pass adopts a copy of the shared prefill (its
        // capability: PoD changes attention from the first token and runs its own).
        let shared: Vec<bool> = presses.iter().map(|p| p.adopts_shared_prefill()).collect();
        let prefill = self.shared_prefill(ids, rows_end, &presses, &shared)?;
        let run = Started {
            ids,
            rows_end,
            question,
            prefill: prefill.as_ref(),
            held: RefCell::default(),
            found: RefCell::default(),
        };
        let mut pending = cells.iter().zip(presses.iter_mut()).zip(&shared);
        let together = decode_batch();
        // Ratio cells' outcomes by (method, budget found), for their twins.
        let mut finished: HashMap<(String, usize), Outcome> = HashMap::new();
        loop {
            let mut batch = Vec::new();
            let mut running = 0;
            for ((cell, press), &share) in pending.by_ref() {
                let started = self.start_cell(&run, cell, press, share)?;
                running += usize::from(matches!(started, Start::Run(_)));
                batch.push(started);
                if running == together {
                    break;
                }
            }
            if batch.is_empty() {
                return Ok(());
            }
            let mut cells: Vec<&mut Running<'_, B>> = batch
                .iter_mut()
                .filter_map(|c| match c {
                    Start::Run(r) => Some(r),
                    _ => None,
                })
                .collect();
            self.decode_together(&mut cells, answer_tokens)?;
            // A twin comes after the cell it copies, so that cell's outcome is in `finished`.
            for cell in batch {
                on_cell(match cell {
                    Start::Run(c) => {
                        let o = c.outcome(self.tok)?;
                        if let Some(r) = &o.ratio {
                            finished.insert((o.method.clone(), r.budget), o.clone());
                        }
                        Ok(o)
                    }
                    Start::Twin(t) => Ok(t.outcome(&finished)?),
                    Start::Skipped(skipped) => Err(skipped),
                })?;
            }
        }
    }

    /// One cell up to its first decoded token: its budget searched ([`Self::search`]), then its
    /// session opened ([`Self::open`]). [`Start::Skipped`] when its search failed,
    /// [`Start::Twin`] when a ratio cell lands on the budget an earlier ratio cell of its method
    /// found on this prompt.
    fn start_cell<'s>(
        &self,
        run: &Started<'_, B>,
        cell: &CellSpec,
        press: &'s mut Box<dyn Press<B>>,
        share: bool,
    ) -> Result<Start<'s, B>>
    where
        'a: 's,
    {
        let started = Instant::now();
        let searched = match self.search(run, cell, press, share) {
            Ok(searched) => searched,
            Err(reason) => {
                return Ok(Start::Skipped(Skipped {
                    method: cell.method.to_string(),
                    budget: cell.budget,
                    ratio: cell.ratio.map(|r| r.target),
                    reason,
                }))
            }
        };
        if let (Some(r), Some(found)) = (cell.ratio, searched.found) {
            let key = (cell.method.to_string(), found.budget);
            if run.found.borrow().contains(&key) {
                return Ok(Start::Twin(Twin {
                    key,
                    target: r.target,
                    probes: found.probes,
                    seconds: started.elapsed().as_secs_f64(),
                }));
            }
            run.found.borrow_mut().insert(key);
        }
        let mut running = self.open(run, cell, press, share, searched)?;
        running.seconds = started.elapsed().as_secs_f64();
        Ok(Start::Run(running))
    }

    /// A cell's budget search where it has one on the shared prefill (a ratio cell; a cell at
    /// SnapKV's bytes, [`Self::equal_bytes`]): `press` replaced by the press at the budget found.
    /// `Err`: why the search failed.
    fn search(
        &self,
        run: &Started<'_, B>,
        cell: &CellSpec,
        press: &mut Box<dyn Press<B>>,
        share: bool,
    ) -> std::result::Result<Searched, String> {
        let n = run.ids.len();
        let mut searched = Searched {
            found: cell.ratio.map(|r| Found {
                budget: r.budget,
                probes: 0,
            }),
            retarget: None,
        };
        let Some(prefill) = run.prefill.filter(|_| share) else {
            return Ok(searched);
        };
        match (cell.budget, cell.ratio) {
            (_, Some(r)) => {
                let new = self
                    .at_ratio(run, cell.method, n, r.target, prefill)
                    .map_err(|e| format!("searching the budget of ratio {}: {e}", r.target))?;
                (*press, searched.found) = (new.press, Some(new.found));
            }
            (Some(b), None) => {
                let new = self
                    .equal_bytes(run, cell.method, n, b, prefill)
                    .map_err(|e| format!("re-targeting to SnapKV's bytes: {e}"))?;
                if let Some(new) = new {
                    (*press, searched.retarget) = (new.press, Some(new.retarget));
                }
            }
            (None, None) => {}
        }
        Ok(searched)
    }

    /// A cell's session at its first decoded token: the shared prefill adopted (or its own
    /// run), its effective ratio measured on what it compressed, the question appended in
    /// question-agnostic mode. Its `seconds` are the caller's to set.
    fn open<'s>(
        &self,
        run: &Started<'_, B>,
        cell: &CellSpec,
        press: &'s mut Box<dyn Press<B>>,
        share: bool,
        searched: Searched,
    ) -> Result<Running<'s, B>>
    where
        'a: 's,
    {
        let n = run.ids.len();
        let mut session = Session::new(self.model, press.as_mut());
        session.rows_end = run.rows_end;
        let mut first = match (run.prefill, share) {
            (Some(p), true) => {
                session.adopt(p.cache.clone(), n, Some(&p.observed))?;
                p.logits.clone()
            }
            _ => last_row(session.prefill(run.ids)?),
        };
        let compressed = session.memory();
        let ratio = cell.ratio.zip(searched.found).map(|(r, found)| RatioCell {
            target: r.target,
            effective: effective(compressed.held_bytes, compressed.full_bytes),
            budget: found.budget,
            probes: found.probes,
        });
        if !run.question.is_empty() {
            first = last_row(session.extend(run.question)?);
        }
        let kv_fraction = session.memory().ratio();
        Ok(Running {
            method: cell.method,
            budget: cell.budget,
            retarget: searched.retarget,
            ratio,
            session,
            next: argmax(&first),
            new: Vec::new(),
            done: false,
            shares: vec![kv_fraction],
            seconds: 0.0,
        })
    }

    /// Greedy decoding of `cells` together, at most `max` tokens each (the stop id not kept):
    /// each round, every cell not done takes its token and, unless that ends it, all of them
    /// step at once ([`Session::step_many`]); the share of FullKV's bytes each holds after
    /// every step is pushed onto its `shares`, and the round's seconds are split evenly over the
    /// cells it stepped.
    fn decode_together(&self, cells: &mut [&mut Running<'_, B>], max: usize) -> Result<()> {
        loop {
            let mut stepping: Vec<&mut Running<'_, B>> = Vec::new();
            for c in cells.iter_mut().filter(|c| !c.done) {
                if self.tok.stop_ids.contains(&c.next) {
                    c.done = true;
                    continue;
                }
                c.new.push(c.next);
                if c.new.len() >= max {
                    c.done = true;
                    continue;
                }
                stepping.push(&mut **c);
            }
            if stepping.is_empty() {
                return Ok(());
            }
            let started = Instant::now();
            let ids: Vec<u32> = stepping.iter().map(|c| c.next).collect();
            let mut sessions: Vec<&mut Session<'_, B>> =
                stepping.iter_mut().map(|c| &mut c.session).collect();
            let logits = Session::step_many(&mut sessions, &ids)?;
            let share = started.elapsed().as_secs_f64() / stepping.len() as f64;
            for (c, l) in stepping.iter_mut().zip(logits) {
                c.next = argmax(&l);
                c.shares.push(c.session.memory().ratio());
                c.seconds += share;
            }
        }
    }

    /// Bytes `method`'s press at `budget` holds once applied to a copy of the shared prefill of
    /// `n` tokens, measured once per prompt (`run.held`).
    fn held_at(
        &self,
        run: &Started<'_, B>,
        prefill: &Prefill<B>,
        (method, n, budget): (MethodName, usize, usize),
    ) -> Result<u64> {
        let key = (method.to_string(), budget);
        if let Some(&held) = run.held.borrow().get(&key) {
            return Ok(held);
        }
        let mut press = self.press(method, n, Some(budget))?;
        let mut session = Session::new(self.model, press.as_mut());
        session.adopt(prefill.cache.clone(), n, Some(&prefill.observed))?;
        let held = session.memory().held_bytes;
        run.held.borrow_mut().insert(key, held);
        Ok(held)
    }

    /// A SpindleKV cell at equal bytes (`spindle_bytes` is `equal`), or a HeadKV / HeadKV-R
    /// cell (`per_head_bytes` is `equal`): its press at the budget whose bytes match SnapKV's at
    /// `budget` on this prompt, and what the search found; `None` for every other cell.
    fn equal_bytes(
        &self,
        run: &Started<'_, B>,
        method: MethodName,
        n: usize,
        budget: usize,
        prefill: &Prefill<B>,
    ) -> Result<Option<Retargeted<B>>> {
        if bytes_mode(method, self.spindle_bytes, self.per_head_bytes) != SpindleBytes::Equal {
            return Ok(None);
        }
        let target = self.held_at(run, prefill, (Method::SnapKv.into(), n, budget))?;
        // Budgets are measured from the smallest the plan accepts up to `n`.
        let lo = self.smallest_budget(method, n, budget);
        let known = run.known(method);
        let found = retarget_known(&known, budget, lo..=n.max(budget), target, |b| {
            self.held_at(run, prefill, (method, n, b))
        })?;
        Ok(Some(Retargeted {
            press: self.press(method, n, Some(found.budget))?,
            retarget: found,
        }))
    }

    /// A ratio cell's press at the budget whose held bytes are the most not above `1 − target`
    /// of FullKV's for the `n` compressed tokens, measured on copies of the shared prefill
    /// (searched from [`start_budget`] by [`retarget`]), and (budget, probes).
    fn at_ratio(
        &self,
        run: &Started<'_, B>,
        method: MethodName,
        n: usize,
        target: f64,
        prefill: &Prefill<B>,
    ) -> Result<Ratioed<B>> {
        let g = &self.model.config.geometry;
        let full =
            kvplan_planner::budgets::full_kv_bytes(g, n, kvplan_runtime::cache::BYTES_PER_ELEMENT);
        let goal = target_bytes(target, full);
        let lo = self.smallest_budget(method, n, n);
        let start = start_budget(target, n).clamp(lo, n.max(lo));
        let known = run.known(method);
        let found = retarget_known(&known, start, lo..=n.max(lo), goal, |b| {
            self.held_at(run, prefill, (method, n, b))
        })?;
        Ok(Ratioed {
            press: self.press(method, n, Some(found.budget))?,
            found: Found {
                budget: found.budget,
                probes: found.probes,
            },
        })
    }

    /// One prefill of `ids` observing the union of what the `shared` presses ask, the rows
    /// ending at `rows_end`; `None` when no press shares it.
    fn shared_prefill(
        &self,
        ids: &[u32],
        rows_end: Option<usize>,
        presses: &[Box<dyn Press<B>>],
        shared: &[bool],
    ) -> Result<Option<Prefill<B>>> {
        if !shared.iter().any(|&s| s) {
            return Ok(None);
        }
        let sharing = presses.iter().zip(shared).filter(|(_, s)| **s);
        let config = shared_observe(sharing.map(|(p, _)| p.as_ref()), rows_end);
        let mut obs = Observer::new(config, self.model.config.geometry.layers);
        let mut cache = self.model.new_cache();
        let logits = self
            .model
            .forward(ids, &mut cache, Some(&mut obs), Logits::Last)?;
        Ok(Some(Prefill {
            cache,
            observed: obs,
            logits: last_row(logits),
        }))
    }
}

/// Cells decoded together ([`Session::step_many`]): at most the rows one fused product takes,
/// so each cell's numbers are those it gets alone.
pub const DECODE_BATCH: usize = kvplan_runtime::model::quant::FUSED_MAX_ROWS;

/// Cells decoded together: [`DECODE_BATCH`], or fewer where `KVPLAN_DECODE_BATCH` says (1: each
/// cell alone, for side-by-side timings; the records are the same either way).
fn decode_batch() -> usize {
    std::env::var("KVPLAN_DECODE_BATCH")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(DECODE_BATCH, |n| n.clamp(1, DECODE_BATCH))
}

/// A ready cell.
struct CellSpec {
    /// Method, parsed.
    method: MethodName,
    /// `--budget` target.
    budget: Option<usize>,
    /// A ratio cell's target, and the budget its press was built at (where its search starts).
    ratio: Option<RatioStart>,
}

/// A ratio cell before its search.
#[derive(Debug, Clone, Copy)]
struct RatioStart {
    target: f64,
    budget: usize,
}

/// What every cell of one prompt starts from.
struct Started<'r, B: Backend> {
    /// The tokens prefilled (the context alone in question-agnostic mode).
    ids: &'r [u32],
    /// Where the observation rows end.
    rows_end: Option<usize>,
    /// The question appended after compression (question-agnostic), else empty.
    question: &'r [u32],
    /// The shared prefill, when any press shares it.
    prefill: Option<&'r Prefill<B>>,
    /// Bytes measured on copies of the shared prefill, by (method, budget): a budget the
    /// searches of several cells probe (a method's three ratios, SpindleKV's SnapKV target) is
    /// measured once per prompt, and a search starts from the bracket its method's earlier
    /// measurements give ([`retarget_known`]).
    held: RefCell<HashMap<(String, usize), u64>>,
    /// The (method, budget) every ratio cell started so far on this prompt found: a later ratio
    /// cell landing on one of them is its twin ([`Twin`]).
    found: RefCell<HashSet<(String, usize)>>,
}

impl<B: Backend> Started<'_, B> {
    /// The (budget, bytes) measured so far on this prompt for `method`.
    fn known(&self, method: MethodName) -> Vec<(usize, u64)> {
        let method = method.to_string();
        self.held
            .borrow()
            .iter()
            .filter(|((m, _), _)| *m == method)
            .map(|((_, b), &h)| (*b, h))
            .collect()
    }
}

/// A cell being decoded.
struct Running<'s, B: Backend> {
    method: MethodName,
    budget: Option<usize>,
    retarget: Option<Retarget>,
    ratio: Option<RatioCell>,
    session: Session<'s, B>,
    /// The token to take next.
    next: u32,
    /// Tokens taken.
    new: Vec<u32>,
    done: bool,
    /// The share of FullKV's bytes held after the prompt (and the question), then after every
    /// step.
    shares: Vec<f64>,
    /// Its own seconds and its share of the batched steps'.
    seconds: f64,
}

/// How a cell starts ([`Evaluator::start_cell`]).
enum Start<'s, B: Backend> {
    /// Decoded with the others of its batch.
    Run(Running<'s, B>),
    /// A ratio cell that found the budget an earlier ratio cell found.
    Twin(Twin),
    /// Its search failed.
    Skipped(Skipped),
}

/// A ratio cell whose search found the budget an earlier ratio cell of the same method found on
/// the same prompt (a method whose least compression is above both targets, as SpindleKV's
/// codebooks at 4K): the same press on the same cache, so the same generation bit for bit,
/// copied from that cell's outcome instead of decoded again. It keeps its own target, probes and
/// seconds (its search only).
struct Twin {
    /// (method, budget found).
    key: (String, usize),
    target: f64,
    probes: usize,
    seconds: f64,
}

impl Twin {
    /// The outcome of the cell it copies, with its own target, probes and seconds.
    fn outcome(self, finished: &HashMap<(String, usize), Outcome>) -> Result<Outcome> {
        let mut o = finished.get(&self.key).cloned().ok_or_else(|| {
            Error::Request(format!(
                "internal: no outcome of {} at budget {} for its twin",
                self.key.0, self.key.1
            ))
        })?;
        if let Some(r) = o.ratio.as_mut() {
            r.target = self.target;
            r.probes = self.probes;
        }
        o.seconds = self.seconds;
        Ok(o)
    }
}

impl<B: Backend> Running<'_, B> {
    /// The outcome, its tokens decoded to text.
    fn outcome(self, tok: &Tokenizer) -> Result<Outcome> {
        let response = tok.decode(&self.new)?;
        let kv_fraction = self.shares[0].clamp(f64::MIN_POSITIVE, 1.0);
        let held = Held::of(&self.shares).unwrap_or(Held {
            peak: kv_fraction,
            mean: kv_fraction,
        });
        Ok(Outcome {
            method: self.method.to_string(),
            budget: self.budget,
            response,
            kv_fraction,
            held,
            seconds: self.seconds,
            retarget: self.retarget,
            ratio: self.ratio,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::CellKey;

    #[test]
    fn which_cells_are_re_targeted_to_snapkv_bytes() {
        use SpindleBytes::{Budget, Equal};
        let mode = |name: &str, spindle, per_head| {
            bytes_mode(name.parse().expect(name), spindle, per_head)
        };
        assert_eq!(mode("spindle", Equal, Budget), Equal);
        assert_eq!(mode("spindle", Budget, Equal), Budget);
        assert_eq!(mode("headkv", Equal, Budget), Budget);
        assert_eq!(mode("headkv", Budget, Equal), Equal);
        assert_eq!(mode("headkv-r", Budget, Equal), Equal);
        // Controls and every other method run at the row's budget.
        assert_eq!(mode("headkv@perm1", Equal, Equal), Budget);
        assert_eq!(mode("snapkv", Equal, Equal), Budget);
    }

    #[test]
    fn held_bytes_are_the_peak_and_mean_of_the_shares() {
        // SnapKV at 128 of a 1024-token prompt appending 2 decoded tokens: 128/1024, 129/1025,
        // 130/1026 → peak 0.126706, mean 0.125853.
        let shares = [128.0 / 1024.0, 129.0 / 1025.0, 130.0 / 1026.0];
        let h = Held::of(&shares).expect("shares");
        assert!((h.peak - 130.0 / 1026.0).abs() < 1e-12, "{h:?}");
        assert!((h.mean - 0.125_853).abs() < 1e-6, "{h:?}");
        // A cache held at its budget: the peak is after the prompt.
        let held = Held::of(&[0.25, 0.2, 0.1]).expect("shares");
        assert_eq!(held.peak, 0.25);
        assert_eq!(Held::of(&[]), None);
    }

    #[test]
    fn trained_pod_weights_fit_only_the_budget_of_their_window() {
        // The committed SmolLM2 plan: PoD's n_s = 16, so budget b gives n_r = b − 16; weights
        // trained with (16, 112) fit budget 128 only.
        // As committed: `kvplan profile` may have rewritten the file in the checkout.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let text = kvplan_common::committed::read_to_string(
            &root,
            "plans/smollm2-135m-instruct.plan.json",
        )
        .expect("committed plan");
        let plan = Plan::from_json(&text).expect("committed plan");
        let variants: Vec<(MethodName, Option<usize>)> = [64, 128, 512]
            .iter()
            .flat_map(|&b| {
                [
                    (Method::Pod.into(), Some(b)),
                    (Method::SnapKv.into(), Some(b)),
                ]
            })
            .chain([(MethodName::FULL, None)])
            .collect();
        let key = |m: &str, b: Option<usize>| CellKey::new("niah", 1024, 0.5, 0, m, b);
        let units = vec![Unit::new("u".into(), &variants, key)];
        // (the window PoD was trained with, the budgets it did not train for)
        for (recent, untrained) in [(112, [64, 512]), (48, [128, 512])] {
            let trained = PodTrained { sinks: 16, recent };
            assert_eq!(
                untrained_pod_budgets(Some(&plan), trained, &units),
                untrained
            );
            assert!(untrained_pod_budgets(None, trained, &units).is_empty());
        }
    }
}
