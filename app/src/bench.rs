//! The benchmark: prefill and decode speed and peak memory of the real model, as typed rows.
//!
//! Prefill runs each requested length with logits for the last position only, as generation
//! does; decode runs `decode_tokens` greedy steps after a `decode_context` prefill. Each phase is
//! repeated `repeats` times and the best time is kept (the machine is noisy). Peak memory is the
//! process's peak resident set during the phase (Linux `VmHWM`, reset through
//! `/proc/self/clear_refs` before each phase).
//!
//! With `methods`, decode under KV methods as well: one observed prefill of `decode_context`
//! tokens (what every listed press asks to observe), then each method compresses a copy of that
//! cache (its plan at the request's target, else the plan's own) and decodes the same
//! `decode_tokens` steps, against FullKV's speed in the same run. A method that runs its own
//! forward pass (PoD) prefills on its own. Under `all` a method the model or plan cannot run
//! (PoD on Gemma 3) is a skipped row with the reason; a method named explicitly is an error.
//!
//! Every row is handed to the caller as it is measured ([`Row`]) and all of them come back in a
//! [`BenchReport`], whose [`BenchReport::to_json`] is the `--json` file.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use kvplan_planner::{MethodName, Plan, Target};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::model::{Logits, Model, WeightStorage};
use kvplan_runtime::observe::Observer;
use kvplan_runtime::press::from_plan::PressRequest;
use kvplan_runtime::press::options::PressOptions;
use kvplan_runtime::press::registry::build_press_with;
use kvplan_runtime::press::{shared_observe, Press, Session};
use serde_json::{json, Value};

use crate::methods::methods_or_all;
use crate::model::{open_model, plan_for_methods, ModelSource};

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchRequest {
    /// Prompt lengths to prefill.
    pub prefill: Vec<usize>,
    /// Context before the decode measurement.
    pub decode_context: usize,
    /// Decode steps measured.
    pub decode_tokens: usize,
    /// Repeats of each phase (best time kept).
    pub repeats: usize,
    /// KV methods to decode under as well (`all`: every method of the registry).
    pub methods: Option<Vec<String>>,
    /// The plan file the methods' budgets come from; `None`: the model's plan.
    pub plan: Option<PathBuf>,
    /// Re-target of the plan; `None`: its own target.
    pub target: Option<Target>,
    /// The press switches beyond the plan.
    pub press: PressOptions,
    /// The model.
    pub model: ModelSource,
}

/// The model and machine measured.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The model's name.
    pub model: String,
    /// The backend's name.
    pub backend: &'static str,
    /// How the weights are stored (`Debug` of the runtime's storage).
    pub weights: String,
    /// Bytes of the weights.
    pub weight_bytes: usize,
    /// Threads available.
    pub threads: usize,
    /// The CPU prefill kernels (`kvplan_runtime::model::quant::kernels_in_use`).
    pub kernels: String,
}

/// A prefill measurement.
#[derive(Debug, Clone)]
pub struct PrefillRow {
    /// Prompt tokens.
    pub tokens: usize,
    /// Best seconds.
    pub seconds: f64,
    /// Peak resident set, MiB (Linux only).
    pub peak_rss_mib: Option<f64>,
}

/// The FullKV decode measurement.
#[derive(Debug, Clone)]
pub struct DecodeRow {
    /// Tokens prefilled before decoding.
    pub context: usize,
    /// Decode steps.
    pub tokens: usize,
    /// Best seconds of the steps.
    pub seconds: f64,
    /// Bytes of the KV cache at the end.
    pub kv_bytes: usize,
    /// Peak resident set, MiB (Linux only).
    pub peak_rss_mib: Option<f64>,
}

/// The shared, observed prefill before the methods' decodes.
#[derive(Debug, Clone)]
pub struct SharedPrefill {
    /// Tokens prefilled.
    pub tokens: usize,
    /// Seconds.
    pub seconds: f64,
    /// The methods' re-target; `None`: the plan's.
    pub target: Option<Target>,
}

/// One method's decode.
#[derive(Debug, Clone)]
pub enum MethodRow {
    /// Not run (under `all`): the model or plan cannot run it.
    Skipped {
        /// The method.
        method: String,
        /// The shared prefill's tokens.
        context: usize,
        /// Why.
        reason: String,
    },
    /// Run.
    Ran(MethodRun),
}

/// A method's decode measurement.
#[derive(Debug, Clone)]
pub struct MethodRun {
    /// The method.
    pub method: String,
    /// The shared prefill's tokens.
    pub context: usize,
    /// Decode steps.
    pub tokens: usize,
    /// Seconds of the steps.
    pub seconds: f64,
    /// Bytes the press's cache holds after compressing.
    pub kv_bytes: u64,
    /// Those bytes over FullKV's.
    pub kv_fraction: f64,
    /// Seconds of the press (adopting the shared cache, or its own prefill).
    pub press_seconds: f64,
    /// Decode speed over the model's FullKV decode speed in the same run.
    pub vs_full: f64,
}

/// A row as it is measured.
#[derive(Debug, Clone, Copy)]
pub enum Row<'a> {
    /// The model is loaded.
    Machine(&'a Machine),
    /// One prefill length measured.
    Prefill(&'a PrefillRow),
    /// FullKV decode measured.
    Decode(&'a DecodeRow),
    /// The methods' shared prefill done.
    SharedPrefill(&'a SharedPrefill),
    /// One method measured or skipped.
    Method(&'a MethodRow),
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// The model and machine.
    pub machine: Machine,
    /// Prefill rows, in the order asked.
    pub prefill: Vec<PrefillRow>,
    /// FullKV decode.
    pub decode: DecodeRow,
    /// Method rows (none without methods).
    pub methods: Vec<MethodRow>,
}

/// Tokens per second of `tokens` in `seconds`.
pub fn tokens_per_s(tokens: usize, seconds: f64) -> f64 {
    tokens as f64 / seconds
}

impl BenchReport {
    /// The `--json` file's body: the machine and one object per row.
    pub fn to_json(&self) -> Value {
        let m = &self.machine;
        let mut results: Vec<Value> = self.prefill.iter().map(prefill_json).collect();
        results.push(decode_json(&self.decode));
        results.extend(self.methods.iter().map(method_json));
        json!({"model": m.model, "backend": m.backend, "weights": m.weights,
            "weight_bytes": m.weight_bytes, "kernels": m.kernels, "threads": m.threads,
            "results": results})
    }
}

fn prefill_json(r: &PrefillRow) -> Value {
    json!({"phase": "prefill", "tokens": r.tokens, "seconds": r.seconds,
        "tokens_per_s": tokens_per_s(r.tokens, r.seconds), "peak_rss_mib": r.peak_rss_mib})
}

fn decode_json(d: &DecodeRow) -> Value {
    json!({"phase": "decode", "context": d.context, "tokens": d.tokens, "seconds": d.seconds,
        "tokens_per_s": tokens_per_s(d.tokens, d.seconds), "kv_bytes": d.kv_bytes,
        "peak_rss_mib": d.peak_rss_mib})
}

fn method_json(r: &MethodRow) -> Value {
    match r {
        MethodRow::Skipped {
            method,
            context,
            reason,
        } => json!({"phase": "decode-method", "method": method, "context": context,
            "skipped": reason}),
        MethodRow::Ran(r) => json!({"phase": "decode-method", "method": r.method,
            "context": r.context, "tokens": r.tokens, "seconds": r.seconds,
            "tokens_per_s": tokens_per_s(r.tokens, r.seconds), "kv_bytes": r.kv_bytes,
            "kv_fraction": r.kv_fraction, "press_seconds": r.press_seconds}),
    }
}

fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Measures what `req` asks, handing every row to `on_row` as it is measured.
pub fn bench(req: &BenchRequest, on_row: &mut dyn FnMut(Row)) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(req.repeats > 0, "--repeats must be at least 1");
    let methods = match &req.methods {
        Some(m) if m.iter().any(|n| n == "all") => Some(methods_or_all(None)?),
        Some(m) => Some(methods_or_all(Some(m))?),
        None => None,
    };
    let path = req.model.resolve()?;
    let (tok, model) = open_model(&path)?;
    let machine = machine_of(&model);
    on_row(Row::Machine(&machine));
    // Warm-up: one short forward so first-call costs do not land in the first measurement.
    let warm = tok.filler_ids(16)?;
    model.forward(&warm, &mut model.new_cache(), None, Logits::Last)?;
    let mut prefill = Vec::new();
    for &n in &req.prefill {
        prefill.push(prefill_phase(&model, &tok.filler_ids(n)?, req.repeats)?);
        on_row(Row::Prefill(&prefill[prefill.len() - 1]));
    }
    let ids = tok.filler_ids(req.decode_context + req.decode_tokens)?;
    let decode = decode_phase(req, &model, &ids)?;
    on_row(Row::Decode(&decode));
    let mut rows = Vec::new();
    if let Some(methods) = &methods {
        let plan = plan_for_methods(methods, req.plan.as_deref(), &path, &model)?;
        let full_tps = tokens_per_s(decode.tokens, decode.seconds);
        let phase = MethodsPhase {
            req,
            model: &model,
            ids: &ids,
            full_tps,
        };
        rows = phase.run(methods, plan.as_ref(), on_row)?;
    }
    Ok(BenchReport {
        machine,
        prefill,
        decode,
        methods: rows,
    })
}

fn machine_of(model: &Model<Selected>) -> Machine {
    Machine {
        model: model.config.name.clone(),
        backend: backend::name(),
        weights: format!("{:?}", WeightStorage::default_for::<Selected>()),
        weight_bytes: model.transformer.weight_bytes(),
        threads: backend::threads(),
        kernels: kvplan_runtime::model::quant::kernels_in_use(),
    }
}

/// The best of `repeats` prefills of `ids`.
fn prefill_phase(
    model: &Model<Selected>,
    ids: &[u32],
    repeats: usize,
) -> anyhow::Result<PrefillRow> {
    reset_peak();
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let mut cache = model.new_cache();
        let t = Instant::now();
        let logits = model.forward(ids, &mut cache, None, Logits::Last)?;
        let _ = logits.into_data();
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(PrefillRow {
        tokens: ids.len(),
        seconds: best,
        peak_rss_mib: peak_rss_mib(),
    })
}

/// The best of `repeats` FullKV decodes of the tail of `ids` after its first `decode_context`.
fn decode_phase(
    req: &BenchRequest,
    model: &Model<Selected>,
    ids: &[u32],
) -> anyhow::Result<DecodeRow> {
    let context = model.config.context_len;
    anyhow::ensure!(
        ids.len() <= context,
        "--decode-context {} + --decode-tokens {} = {} tokens pass the model's context of {context}",
        req.decode_context,
        req.decode_tokens,
        ids.len()
    );
    reset_peak();
    let mut best = f64::INFINITY;
    let mut kv_bytes = 0;
    for _ in 0..req.repeats {
        let mut cache = model.new_cache();
        model.forward(&ids[..req.decode_context], &mut cache, None, Logits::Last)?;
        let t = Instant::now();
        for &id in &ids[req.decode_context..] {
            let _ = model
                .forward(&[id], &mut cache, None, Logits::Last)?
                .into_data();
        }
        best = best.min(t.elapsed().as_secs_f64());
        kv_bytes = cache.bytes();
    }
    Ok(DecodeRow {
        context: req.decode_context,
        tokens: req.decode_tokens,
        seconds: best,
        kv_bytes,
        peak_rss_mib: peak_rss_mib(),
    })
}

/// Decode under each method after one shared prefill of the first `decode_context` of `ids`
/// (module header), once each (a press's state moves with its cache), against `full_tps`, the
/// model's own FullKV decode measured just before.
struct MethodsPhase<'a> {
    req: &'a BenchRequest,
    model: &'a Model<Selected>,
    ids: &'a [u32],
    full_tps: f64,
}

/// A press to measure, by method name.
type Named = (String, Box<dyn Press<Selected>>);

impl MethodsPhase<'_> {
    fn run(
        &self,
        methods: &[MethodName],
        plan: Option<&Plan>,
        on_row: &mut dyn FnMut(Row),
    ) -> anyhow::Result<Vec<MethodRow>> {
        let (mut presses, mut rows) = self.presses(methods, plan, on_row)?;
        let n = self.req.decode_context;
        let sharing = presses.iter().filter(|(_, p)| p.adopts_shared_prefill());
        let config = shared_observe(sharing.map(|(_, p)| p.as_ref()), None);
        let mut obs = Observer::new(config, self.model.config.geometry.layers);
        let mut cache = self.model.new_cache();
        let started = Instant::now();
        let prefix = &self.ids[..n];
        self.model
            .forward(prefix, &mut cache, Some(&mut obs), Logits::Last)?;
        let shared = SharedPrefill {
            tokens: n,
            seconds: started.elapsed().as_secs_f64(),
            target: self.req.target,
        };
        on_row(Row::SharedPrefill(&shared));
        for (name, press) in &mut presses {
            let mut session = Session::new(self.model, press.as_mut());
            let t = Instant::now();
            if session.press.adopts_shared_prefill() {
                session.adopt(cache.clone(), n, Some(&obs))?;
            } else {
                let _ = session.prefill(prefix)?.into_data();
            }
            let press_seconds = t.elapsed().as_secs_f64();
            let row = MethodRow::Ran(self.decode(name, &mut session, press_seconds)?);
            on_row(Row::Method(&row));
            rows.push(row);
        }
        Ok(rows)
    }

    /// The presses of `methods`; under `all`, the skipped ones as rows.
    fn presses(
        &self,
        methods: &[MethodName],
        plan: Option<&Plan>,
        on_row: &mut dyn FnMut(Row),
    ) -> anyhow::Result<(Vec<Named>, Vec<MethodRow>)> {
        let n = self.req.decode_context;
        let request = PressRequest {
            plan,
            context_len: n,
            target: self.req.target,
            options: self.req.press,
        };
        // `all` skips (and reports) a method this model or plan cannot run (PoD on Gemma 3, a
        // method without a plan section); one named explicitly is an error.
        let every = self.req.methods.iter().flatten().any(|n| n == "all");
        let (mut presses, mut rows) = (Vec::new(), Vec::new());
        for &name in methods {
            match build_press_with::<Selected>(name, &request, &self.model.config) {
                Ok(spec) => presses.push((name.to_string(), spec.press)),
                Err(e) if every => {
                    let row = MethodRow::Skipped {
                        method: name.to_string(),
                        context: n,
                        reason: e.to_string(),
                    };
                    on_row(Row::Method(&row));
                    rows.push(row);
                }
                Err(e) => return Err(e).with_context(|| format!("--methods {name}")),
            }
        }
        Ok((presses, rows))
    }

    /// The decode steps of one method's session.
    fn decode(
        &self,
        name: &str,
        session: &mut Session<'_, Selected>,
        press_seconds: f64,
    ) -> anyhow::Result<MethodRun> {
        let memory = session.memory();
        // Once: a press's state (H2O's scores, TOVA's, TreeKV's tree) moves with its cache.
        let t = Instant::now();
        for &id in &self.ids[self.req.decode_context..] {
            let _ = session.step(id)?.into_data();
        }
        let seconds = t.elapsed().as_secs_f64();
        let tokens = self.req.decode_tokens;
        Ok(MethodRun {
            method: name.to_string(),
            context: self.req.decode_context,
            tokens,
            seconds,
            kv_bytes: memory.held_bytes,
            kv_fraction: memory.ratio(),
            press_seconds,
            vs_full: tokens_per_s(tokens, seconds) / self.full_tps,
        })
    }
}

const MIB: f64 = (1 << 20) as f64;

/// The output line of a row, as `kvplan bench` prints it.
impl std::fmt::Display for Row<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = match self {
            Row::Machine(m) => format!(
                "model: {} | backend: {} | weights: {}, {:.0} MiB | threads: {} | kernels: {}",
                m.model,
                m.backend,
                m.weights,
                m.weight_bytes as f64 / MIB,
                m.threads,
                m.kernels
            ),
            Row::Prefill(r) => format!(
                "prefill {:>5} tokens: {:>7.3} s  {:>8.1} tokens/s  peak RSS {:.0} MiB",
                r.tokens,
                r.seconds,
                tokens_per_s(r.tokens, r.seconds),
                r.peak_rss_mib.unwrap_or(f64::NAN)
            ),
            Row::Decode(d) => format!(
                "decode  {} tokens at {} context: {:>7.3} s  {:>8.2} tokens/s  KV {:.1} MiB  peak RSS {:.0} MiB",
                d.tokens,
                d.context,
                d.seconds,
                tokens_per_s(d.tokens, d.seconds),
                d.kv_bytes as f64 / MIB,
                d.peak_rss_mib.unwrap_or(f64::NAN)
            ),
            Row::SharedPrefill(p) => format!(
                "methods: shared prefill of {} tokens (observed) {:.1} s; budgets: {}",
                p.tokens,
                p.seconds,
                match p.target {
                    Some(Target::Tokens(b)) => format!("{b} entries per head"),
                    Some(Target::Ratio(r)) => format!("ratio {r}"),
                    None => "the plan's target".into(),
                }
            ),
            Row::Method(MethodRow::Skipped { method, reason, .. }) => {
                format!("{method:>16}: skipped: {reason}")
            }
            Row::Method(MethodRow::Ran(r)) => format!(
                "{:>16}: KV {:>7.1} MiB ({:.3} of FullKV)  press {:>6.2} s  decode {:>7.2} tokens/s  {:.2}x the model's FullKV decode",
                r.method,
                r.kv_bytes as f64 / MIB,
                r.kv_fraction,
                r.press_seconds,
                tokens_per_s(r.tokens, r.seconds),
                r.vs_full,
            ),
        };
        f.write_str(&line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> BenchReport {
        BenchReport {
            machine: Machine {
                model: "m".into(),
                backend: "flex",
                weights: "Dense".into(),
                weight_bytes: 10,
                threads: 2,
                kernels: "f32".into(),
            },
            prefill: vec![PrefillRow {
                tokens: 512,
                seconds: 2.0,
                peak_rss_mib: None,
            }],
            decode: DecodeRow {
                context: 2048,
                tokens: 32,
                seconds: 4.0,
                kv_bytes: 100,
                peak_rss_mib: Some(1.5),
            },
            methods: vec![MethodRow::Skipped {
                method: "pod".into(),
                context: 2048,
                reason: "no".into(),
            }],
        }
    }

    #[test]
    fn the_json_has_one_row_per_phase_with_speeds_worked_out() {
        let j = report().to_json();
        let rows = j["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["tokens_per_s"], json!(256.0));
        assert_eq!(rows[1]["tokens_per_s"], json!(8.0));
        assert_eq!(rows[1]["phase"], json!("decode"));
        assert_eq!(rows[2]["skipped"], json!("no"));
        assert_eq!(j["weight_bytes"], json!(10));
    }
}
