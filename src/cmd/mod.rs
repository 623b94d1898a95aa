//! One file per subcommand.

pub mod bench;
pub mod data;
pub mod eval;
pub mod eval_agree;
pub mod eval_leaderboard;
pub mod eval_merge;
pub mod eval_niah;
pub mod eval_paired;
pub mod eval_ppl;
pub mod eval_ruler;
pub mod eval_shared;
pub mod eval_table;
pub mod eval_without;
pub mod export;
pub mod fetch;
pub mod generate;
pub mod inspect;
pub mod migrate;
pub mod model_args;
pub mod models;
pub mod plan;
pub mod plot;
pub mod profile;
pub mod tokenize;
pub mod train_pod;

pub use kvplan_app::methods::parse_list;

/// Writes `text` to stdout; a closed pipe (`kvplan inspect | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
