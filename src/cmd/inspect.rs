//! `kvplan inspect`: print a GGUF file's metadata and tensor table.

use anyhow::Context;
use kvplan_runtime::gguf::GgufFile;

use super::model_args::ModelArgs;

/// Arguments of `kvplan inspect`.
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Runs `kvplan inspect`; a malformed file is an error naming the problem.
pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let path = args.model.source().resolve()?;
    let gguf = GgufFile::open(&path).with_context(|| format!("inspecting {}", path.display()))?;
    let mut out = String::new();
    out += &format!("file: {}\n", path.display());
    out += &format!(
        "GGUF version {}, {} metadata entries, {} tensors\n\nmetadata:\n",
        gguf.version,
        gguf.metadata.len(),
        gguf.tensors.len()
    );
    for (key, value) in &gguf.metadata {
        out += &format!("  {key} = {}\n", value.summary());
    }
    out += &format!("\ntensors:\n  {:<32} {:<6} shape\n", "name", "type");
    for t in &gguf.tensors {
        out += &format!(
            "  {:<32} {:<6} {:?}\n",
            t.name,
            format!("{:?}", t.ggml_type),
            t.shape()
        );
    }
    super::write_stdout(&out)
}
