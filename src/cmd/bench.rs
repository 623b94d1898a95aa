//! `kvplan bench`: prefill and decode speed and peak memory of the real model.
//!
//! Prefill runs `--prefill` lengths (default 512 and 2048 tokens) with logits for the last
//! position only, as generation does; decode runs `--decode-tokens` greedy steps after a
//! `--decode-context` prefill. Each phase is repeated `--repeats` times and the best time is
//! reported (the machine is noisy). Peak memory is the process's peak resident set during the
//! phase (Linux `VmHWM`, reset through `/proc/self/clear_refs` before each phase).
//!
//! `--methods` adds decode under KV methods: one observed prefill of `--decode-context` tokens
//! (what every listed press asks to observe), then each method compresses a copy of that cache
//! (its plan at `--budget`/`--ratio`, else the plan's own target) and decodes the same
//! `--decode-tokens` steps; reported with the KV it holds and its speed against FullKV's in the
//! same run. A method that runs its own forward pass (PoD) prefills on its own. Under
//! `--methods all` a method the model or plan cannot run (PoD on Gemma 3) is reported as skipped,
//! with the reason, in the output and the JSON rows; a method named explicitly is an error.

use std::time::Instant;

use anyhow::Context;
use kvplan_planner::{Plan, Target};
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::observe::Observer;
use kvplan_runtime::press::registry::{build_press_with, PressRequest};
use kvplan_runtime::press::{shared_observe, Session};
use kvplan_runtime::tokenizer::Tokenizer;

use super::model_args::{self, ModelArgs, PressArgs};

/// A paragraph of ordinary English, repeated to the lengths measured.
const TEXT: &str = "The river runs past the old mill, where the miller's children once counted \
the boats going down to the sea. In the spring the water rises and covers the lower field; in \
the autumn it falls again, leaving mud, reeds and the smell of rain. Nobody remembers who built \
the bridge, but everyone agrees that it was built to last. ";

/// Arguments of `kvplan bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Prompt lengths to prefill.
    #[arg(long, value_delimiter = ',', default_value = "512,2048")]
    pub prefill: Vec<usize>,
    /// Context before the decode measurement.
    #[arg(long, default_value_t = 2048)]
    pub decode_context: usize,
    /// Decode steps measured.
    #[arg(long, default_value_t = 32)]
    pub decode_tokens: usize,
    /// Repeats of each phase (best time reported).
    #[arg(long, default_value_t = 2)]
    pub repeats: usize,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
    /// Decode under these KV methods as well (comma-separated, e.g. `full,snapkv,streaming`;
    /// `all`: every method of the registry), after one shared prefill of --decode-context tokens.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub methods: Option<Vec<String>>,
    /// Plan the methods' budgets come from [default: plans/<slug>.plan.json].
    #[arg(long, value_name = "FILE")]
    pub plan: Option<std::path::PathBuf>,
    /// Re-target the plan: entries per (layer, KV head).
    #[arg(long, value_name = "N", conflicts_with = "ratio")]
    pub budget: Option<usize>,
    /// Re-target the plan: share of the prompt kept per head, 0 < R <= 1.
    #[arg(long, value_name = "R")]
    pub ratio: Option<f64>,
    #[command(flatten)]
    pub press: PressArgs,
    #[command(flatten)]
    pub model: ModelArgs,
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

fn ids_of_length(tok: &Tokenizer, n: usize) -> anyhow::Result<Vec<u32>> {
    let unit = tok.encode(TEXT)?;
    Ok(unit.iter().copied().cycle().take(n).collect())
}

/// Runs `kvplan bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.repeats > 0, "--repeats must be at least 1");
    let methods = match &args.methods {
        Some(m) if m.iter().any(|n| n == "all") => Some(super::methods_or_all(None)?),
        Some(m) => Some(super::methods_or_all(Some(m))?),
        None => None,
    };
    let path = args.model.resolve()?;
    let gguf = GgufFile::open(&path).with_context(|| format!("reading {}", path.display()))?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let device = backend::device();
    let model = Model::<Selected>::from_gguf(&gguf, &device)?;
    drop(gguf);
    println!(
        "model: {} | backend: {} | weights: {:?}, {:.0} MiB | threads: {}",
        model.config.name,
        backend::name(),
        kvplan_runtime::model::WeightStorage::default_for::<Selected>(),
        model.transformer.weight_bytes() as f64 / (1 << 20) as f64,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    let mut results = Vec::new();
    // Warm-up: one short forward so first-call costs do not land in the first measurement.
    model.forward(
        &ids_of_length(&tok, 16)?,
        &mut model.new_cache(),
        None,
        Logits::Last,
    )?;
    for &n in &args.prefill {
        let ids = ids_of_length(&tok, n)?;
        reset_peak();
        let mut best = f64::INFINITY;
        for _ in 0..args.repeats {
            let mut cache = model.new_cache();
            let t = Instant::now();
            let logits = model.forward(&ids, &mut cache, None, Logits::Last)?;
            let _ = logits.into_data();
            best = best.min(t.elapsed().as_secs_f64());
        }
        let peak = peak_rss_mib();
        println!(
            "prefill {n:>5} tokens: {best:>7.3} s  {:>8.1} tokens/s  peak RSS {:.0} MiB",
            n as f64 / best,
            peak.unwrap_or(f64::NAN)
        );
        results.push(serde_json::json!({"phase": "prefill", "tokens": n, "seconds": best, "tokens_per_s": n as f64 / best, "peak_rss_mib": peak}));
    }
    let ids = ids_of_length(&tok, args.decode_context + args.decode_tokens)?;
    let context = model.config.context_len;
    anyhow::ensure!(
        ids.len() <= context,
        "--decode-context {} + --decode-tokens {} = {} tokens pass the model's context of {context}",
        args.decode_context,
        args.decode_tokens,
        ids.len()
    );
    reset_peak();
    let mut best = f64::INFINITY;
    let mut kv_bytes = 0;
    for _ in 0..args.repeats {
        let mut cache = model.new_cache();
        model.forward(&ids[..args.decode_context], &mut cache, None, Logits::Last)?;
        let t = Instant::now();
        for &id in &ids[args.decode_context..] {
            let _ = model
                .forward(&[id], &mut cache, None, Logits::Last)?
                .into_data();
        }
        best = best.min(t.elapsed().as_secs_f64());
        kv_bytes = cache.bytes();
    }
    let peak = peak_rss_mib();
    let tps = args.decode_tokens as f64 / best;
    println!("decode  {} tokens at {} context: {best:>7.3} s  {tps:>8.2} tokens/s  KV {:.1} MiB  peak RSS {:.0} MiB",
        args.decode_tokens, args.decode_context, kv_bytes as f64 / (1 << 20) as f64, peak.unwrap_or(f64::NAN));
    results.push(serde_json::json!({"phase": "decode", "context": args.decode_context, "tokens": args.decode_tokens, "seconds": best, "tokens_per_s": tps, "kv_bytes": kv_bytes, "peak_rss_mib": peak}));
    if let Some(methods) = &methods {
        let plan = model_args::plan_for_methods(methods, args.plan.as_deref(), &path, &model)?;
        results.extend(methods_phase(
            &args,
            methods,
            plan.as_ref(),
            &model,
            &ids,
            tps,
        )?);
    }
    if let Some(out) = args.json {
        let body = serde_json::to_string_pretty(
            &serde_json::json!({"model": model.config.name, "backend": backend::name(),
                "weights": format!("{:?}", kvplan_runtime::model::WeightStorage::default_for::<Selected>()),
                "weight_bytes": model.transformer.weight_bytes(), "results": results}),
        )?;
        kvplan_common::fs::write_atomic(&out, body.as_bytes())
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

/// Decode under each method after one shared prefill of the first `--decode-context` of `ids`
/// (module header), once each (a press's state moves with its cache), against `full_tps`, the
/// model's own FullKV decode measured just before; one JSON row per method.
fn methods_phase(
    args: &BenchArgs,
    methods: &[String],
    plan: Option<&Plan>,
    model: &Model<Selected>,
    ids: &[u32],
    full_tps: f64,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let n = args.decode_context;
    let target = model_args::retarget(args.budget, args.ratio);
    let request = PressRequest {
        plan,
        context_len: n,
        target,
        options: args.press.options(),
    };
    // `--methods all` skips (and reports) a method this model or plan cannot run (PoD on
    // Gemma 3, a method without a plan section); one named explicitly is an error.
    let every = args.methods.iter().flatten().any(|n| n == "all");
    let mut presses = Vec::new();
    let mut rows = Vec::new();
    for name in methods {
        match build_press_with::<Selected>(name, &request, &model.config) {
            Ok(spec) => presses.push((name.as_str(), spec.press)),
            Err(e) if every => {
                println!("{name:>16}: skipped: {e}");
                rows.push(serde_json::json!({"phase": "decode-method", "method": name,
                    "context": n, "skipped": e.to_string()}));
            }
            Err(e) => return Err(e).with_context(|| format!("--methods {name}")),
        }
    }
    let sharing = presses.iter().filter(|(_, p)| p.adopts_shared_prefill());
    let config = shared_observe(sharing.map(|(_, p)| p.as_ref()), None);
    let mut obs = Observer::new(config, model.config.geometry.layers);
    let mut cache = model.new_cache();
    let started = Instant::now();
    model.forward(&ids[..n], &mut cache, Some(&mut obs), Logits::Last)?;
    println!(
        "methods: shared prefill of {n} tokens (observed) {:.1} s; budgets: {}",
        started.elapsed().as_secs_f64(),
        match target {
            Some(Target::Tokens(b)) => format!("{b} entries per head"),
            Some(Target::Ratio(r)) => format!("ratio {r}"),
            None => "the plan's target".into(),
        }
    );
    for (name, press) in &mut presses {
        let mut session = Session::new(model, press.as_mut());
        let t = Instant::now();
        if session.press.adopts_shared_prefill() {
            session.adopt(cache.clone(), n, Some(&obs))?;
        } else {
            let _ = session.prefill(&ids[..n])?.into_data();
        }
        let press_s = t.elapsed().as_secs_f64();
        let memory = session.memory();
        // Once: a press's state (H2O's scores, TOVA's, TreeKV's tree) moves with its cache.
        let t = Instant::now();
        for &id in &ids[n..] {
            let _ = session.step(id)?.into_data();
        }
        let secs = t.elapsed().as_secs_f64();
        let tps = args.decode_tokens as f64 / secs;
        println!(
            "{name:>16}: KV {:>7.1} MiB ({:.3} of FullKV)  press {press_s:>6.2} s  decode {tps:>7.2} tokens/s  {:.2}x the model's FullKV decode",
            memory.held_bytes as f64 / (1 << 20) as f64,
            memory.ratio(),
            tps / full_tps,
        );
        rows.push(serde_json::json!({"phase": "decode-method", "method": name, "context": n,
            "tokens": args.decode_tokens, "seconds": secs, "tokens_per_s": tps,
            "kv_bytes": memory.held_bytes, "kv_fraction": memory.ratio(), "press_seconds": press_s}));
    }
    Ok(rows)
}
