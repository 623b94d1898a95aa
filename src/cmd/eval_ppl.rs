//! `kvplan eval ppl`: streaming perplexity on Gutenberg text (TreeKV §5.2, its Figure 4).
//!
//! Each text streams one token at a time under each method and budget; the methods that evict
//! while decoding (`streaming`, `h2o`, `treekv`) hold their budget throughout, `full` holds
//! everything. Texts are cut to `--length` tokens; past the model's trained context the evicting
//! methods re-assign positions within their cache (StreamingLLM §3.2; TreeKV does it after every
//! eviction, §4.1), so no position exceeds what the model was trained on, and `full` — which
//! would — is refused at such lengths. Records (every
//! token's NLL) go to `<out>/<model>.ppl.records.json` after every stream (a re-run reuses
//! them), the curves into `<out>/<model>.results.json`, the table to `<out>/<model>.ppl.md`.

use std::time::Instant;

use anyhow::{bail, Context};
use kvplan_common::data::SHAKESPEARE;
use kvplan_eval::ppl::{curves, PplRecords};
use kvplan_eval::records::{merge_perplexity, write_atomic};
use kvplan_eval::runner::{Evaluator, Progress};
use kvplan_eval::table;
use kvplan_runtime::press::capabilities;

use super::eval::{Bar, EvalSetup, PplArgs};

/// Runs `kvplan eval ppl`.
pub fn run(args: PplArgs) -> anyhow::Result<()> {
    super::methods_or_all(Some(&args.methods))?;
    let (length, every, budgets, texts) = if args.quick {
        (
            256,
            64,
            vec![64],
            args.texts[..1.min(args.texts.len())].to_vec(),
        )
    } else {
        (2048, 128, vec![64, 128, 256], args.texts.clone())
    };
    let length = args.length.unwrap_or(length);
    let every = args.every.unwrap_or(every);
    let budgets = args.budgets.clone().unwrap_or(budgets);
    let dir = args.common.ensure_data(&SHAKESPEARE)?;
    let EvalSetup {
        name,
        tok,
        model,
        plan,
        out,
        settings,
        ..
    } = args.common.setup(args.quick)?;
    let context = model.config.context_len;
    if length > context {
        let stuck: Vec<&str> = args
            .methods
            .iter()
            .map(String::as_str)
            .filter(|m| !capabilities(m).is_ok_and(|c| c.streams_past_context))
            .collect();
        if !stuck.is_empty() {
            bail!(
                "--length {length} is past the model's trained context of {context} tokens, \
                 where {} cannot re-assign positions; drop it from --methods or lower --length",
                stuck.join(", ")
            );
        }
    }
    let records_path = out.join(format!("{name}.ppl.records.json"));
    let mut records = if records_path.exists() {
        let text = std::fs::read_to_string(&records_path)?;
        let r: PplRecords = serde_json::from_str(&text)
            .with_context(|| format!("reading {}", records_path.display()))?;
        if r.settings != settings {
            bail!(
                "{}: records made under other settings; move the file away or give --out",
                records_path.display()
            );
        }
        r
    } else {
        PplRecords {
            settings,
            records: Vec::new(),
        }
    };
    let mut runs: Vec<(String, Option<usize>)> = Vec::new();
    for m in &args.methods {
        if m == "full" {
            runs.push((m.clone(), None));
        } else {
            runs.extend(budgets.iter().map(|&b| (m.clone(), Some(b))));
        }
    }
    let evaluator = Evaluator::new(&model, &tok, plan.as_ref().map(|p| &p.0));
    let total = texts.len() * runs.len();
    let mut bar = Bar::new("ppl", total as u64);
    let mut p = Progress {
        done: 0,
        reused: 0,
        total,
        last: String::new(),
    };
    let started = Instant::now();
    let mut wanted = Vec::new();
    for text in &texts {
        let file = dir.join(text);
        let body = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let mut ids = tok.encode(&body)?;
        if ids.len() < length {
            bail!(
                "{text} has {} tokens, fewer than --length {length}",
                ids.len()
            );
        }
        ids.truncate(length);
        for (m, b) in &runs {
            if records.get(text, m, *b, length).is_none() {
                if m != "full" && plan.is_none() {
                    bail!("method `{m}` needs a plan: give --plan FILE");
                }
                let r = evaluator.stream_ppl(&ids, m, *b, text)?;
                p.last = format!("{text} {m} {b:?}: {:.1}s", r.seconds);
                records.records.push(r);
                let json = serde_json::to_string(&records)?;
                write_atomic(&records_path, &json)?;
            } else {
                p.reused += 1;
            }
            p.done += 1;
            bar.update(&p);
            wanted.push((text.clone(), m.clone(), *b));
        }
    }
    bar.finish();
    let chosen: Vec<_> = wanted
        .iter()
        .filter_map(|(t, m, b)| records.get(t, m, *b, length))
        .collect();
    let curves = curves(&chosen, every);
    let results_path = out.join(format!("{name}.results.json"));
    merge_perplexity(&results_path, &name, curves.clone())?;
    args.common.figures(&results_path, &out)?;
    let at: Vec<usize> = [256, 512, 1024, 2048, 4096]
        .into_iter()
        .filter(|&x| x < length)
        .collect();
    let md = table::ppl_markdown(&curves, &at);
    write_atomic(&out.join(format!("{name}.ppl.md")), &md)?;
    super::write_stdout(&md)?;
    eprintln!(
        "kvplan: {} streams of {length} tokens in {:.1}s; records {}, results {}",
        chosen.len(),
        started.elapsed().as_secs_f64(),
        records_path.display(),
        results_path.display()
    );
    Ok(())
}
