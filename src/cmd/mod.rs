//! One file per subcommand.

pub mod bench;
pub mod data;
pub mod eval;
pub mod eval_leaderboard;
pub mod eval_merge;
pub mod eval_ppl;
pub mod eval_ruler;
pub mod eval_table;
pub mod export;
pub mod fetch;
pub mod generate;
pub mod inspect;
pub mod keep;
pub mod migrate;
pub mod model_args;
pub mod models;
pub mod plan;
pub mod plot;
pub mod profile;
pub mod tokenize;
pub mod train_pod;

/// The `--methods` asked for, or every method of the press registry; an unknown name is one
/// error listing the registry.
pub fn methods_or_all(asked: Option<&[String]>) -> anyhow::Result<Vec<String>> {
    use kvplan_runtime::press::{is_press_name, PRESS_NAMES};
    let methods: Vec<String> = match asked {
        Some(m) => m.to_vec(),
        None => PRESS_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    if let Some(m) = methods.iter().find(|m| !is_press_name(m)) {
        if let Some(Err(e)) = kvplan_planner::controls::parse(m) {
            anyhow::bail!("{e}");
        }
        anyhow::bail!(
            "unknown method `{m}`; the registry has: {}, vllm:, trtllm: or trtllm-engine:<method> \
             for an engine's layer classes (kvplan export), and the controls headkv@perm<seed>, \
             headkv@beta<β> (also on headkv-r)",
            PRESS_NAMES.join(", ")
        );
    }
    Ok(methods)
}

/// `names` (comma-separated on the command line) parsed, duplicates dropped in order, or `all`
/// when one of them is `all`.
pub fn parse_list<T>(names: &[String], all: &[T]) -> anyhow::Result<Vec<T>>
where
    T: std::str::FromStr + PartialEq + Clone,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    if names.iter().any(|n| n == "all") {
        return Ok(all.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let x: T = n.trim().parse()?;
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(out)
}

/// Writes `text` to stdout; a closed pipe (`kvplan inspect | head`) is not an error.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
