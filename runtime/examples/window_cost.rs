//! What a sliding-window layer costs against a global one in a long prefill (issue 28's Gemma 3
//! target): the same model run three ways — as it is (Gemma 3 270M: 15 layers windowed at 512,
//! 3 global), with every layer global, and with every layer windowed — so that a windowed layer's
//! cost over a global one's is `t(all windowed) / t(all global)`, every layer having the same
//! shapes. The model's own run checks the pair: it should take `3·t(global)/18 + 15·t(windowed)/18`.
//! A fourth run with every layer at window 1 prices what a layer pays whatever its window (its
//! projections, norms and feed-forward), so the attention's own share is seen apart.
//!
//! `cargo run --release -p kvplan-runtime --example window_cost -- [MODEL.gguf] [TOKENS] [ROUNDS]`
//! (default: Gemma 3 270M in the per-user models folder, 8192 tokens, 2 rounds; best of rounds).
//! Only timing changes between the three: the windows change what is computed, so outputs differ.
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::tokenizer::Tokenizer;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = match args.next() {
        Some(p) => std::path::PathBuf::from(p),
        None => kvplan_common::catalog::find("gemma-3-270m")
            .ok_or("no gemma-3-270m in the catalog")?
            .path(&kvplan_common::paths::models_dir(None)),
    };
    let n: usize = args.next().map_or(Ok(8192), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let gguf = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let mut model = Model::<Selected>::from_gguf(&gguf, &backend::device())?;
    let own: Vec<Option<usize>> = model
        .transformer
        .blocks
        .iter()
        .map(|b| b.attention.window)
        .collect();
    let w = own
        .iter()
        .flatten()
        .copied()
        .next()
        .ok_or("the model has no windowed layer")?;
    let globals = own.iter().filter(|x| x.is_none()).count();
    println!(
        "{}: {} layers, {} global, {} windowed at {w}; prefill {n} tokens, best of {rounds}",
        path.display(),
        own.len(),
        globals,
        own.len() - globals
    );
    let ids = tok.filler_ids(n)?;
    model.forward(&ids[..16], &mut model.new_cache(), None, Logits::Last)?;
    let layouts: [(&str, Vec<Option<usize>>); 4] = [
        ("as the model is", own.clone()),
        ("every layer global", vec![None; own.len()]),
        ("every layer windowed", vec![Some(w); own.len()]),
        ("every layer at window 1", vec![Some(1); own.len()]),
    ];
    let mut best = [f64::INFINITY; 4];
    for _ in 0..rounds {
        for (i, (_, layout)) in layouts.iter().enumerate() {
            for (b, &win) in model.transformer.blocks.iter_mut().zip(layout) {
                b.attention.window = win;
            }
            let t = Instant::now();
            let _ = model
                .forward(&ids, &mut model.new_cache(), None, Logits::Last)?
                .into_data();
            best[i] = best[i].min(t.elapsed().as_secs_f64());
        }
    }
    for ((name, _), t) in layouts.iter().zip(best) {
        println!("{name:>22}: {t:.2} s");
    }
    let per_layer = |t: f64| t / own.len() as f64;
    let (g, l, floor) = (per_layer(best[1]), per_layer(best[2]), per_layer(best[3]));
    let local = (own.len() - globals) as f64;
    println!(
        "a windowed layer costs {:.3} of a global one; predicted for the model's own layout {:.2} s (measured {:.2} s)",
        l / g,
        globals as f64 * g + local * l,
        best[0]
    );
    println!(
        "a layer at window 1 (its projections, norms and feed-forward: the floor any window pays) \
         costs {:.3} of a global one; attention alone, windowed over global: {:.3}",
        floor / g,
        (l - floor) / (g - floor)
    );
    Ok(())
}
