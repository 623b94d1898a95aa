//! Same measurement as `kvplan bench`, as an example of the runtime crate (handy while the
//! binary is being rebuilt): `cargo run --release -p kvplan-runtime --example bench -- MODEL.gguf`
//! (default: the default catalog model in the per-user models folder; `kvplan fetch` puts it there).
use kvplan_runtime::backend::{self, Selected};
use kvplan_runtime::gguf::GgufFile;
use kvplan_runtime::model::{Logits, Model};
use kvplan_runtime::tokenizer::Tokenizer;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let default = kvplan_common::catalog::find(kvplan_common::catalog::DEFAULT_MODEL)
        .ok_or("no default catalog model")?
        .path(&kvplan_common::paths::models_dir(None));
    let path = std::env::args()
        .nth(1)
        .map_or(default, std::path::PathBuf::from);
    let gguf = GgufFile::open(&path)?;
    let tok = Tokenizer::from_gguf(&gguf)?;
    let model = Model::<Selected>::from_gguf(&gguf, &backend::device())?;
    let ids = |n: usize| tok.filler_ids(n);
    model.forward(&ids(16)?, &mut model.new_cache(), None, Logits::Last)?;
    for n in [512, 2048] {
        let t = Instant::now();
        let _ = model
            .forward(&ids(n)?, &mut model.new_cache(), None, Logits::Last)?
            .into_data();
        println!("prefill {n}: {:.3} s", t.elapsed().as_secs_f64());
    }
    let all = ids(2048 + 32)?;
    let mut cache = model.new_cache();
    model.forward(&all[..2048], &mut cache, None, Logits::Last)?;
    let t = Instant::now();
    for &id in &all[2048..] {
        let _ = model
            .forward(&[id], &mut cache, None, Logits::Last)?
            .into_data();
    }
    println!(
        "decode 32 at 2048: {:.2} tok/s",
        32.0 / t.elapsed().as_secs_f64()
    );
    Ok(())
}
