//! The export targets: one file per format behind one small trait ([`ExportTarget`]), and one
//! table (`target_table!` below) that lists them. A target says its name, the files it writes
//! and what reads them, what its engine honours for each architecture (its entries of the
//! capability table, [`super::capability`], with the sources they were read from), which
//! method's budgets it carries, and writes a plan's budgets (or scores) at one context length
//! into those files.
//!
//! The table generates [`Format`] (the names `kvplan export --to` takes, in help order) and the
//! dispatch from a format to its target; `kvplan export --help` ([`help`]), the manifest and
//! `--to all` read it. Adding a format is one file here and one line in the table.

mod duo;
mod headkv;
pub mod help;
mod kvpress;
mod llamacpp;
mod lukv;
mod trtllm;
mod vllm;
mod windows;

pub use help::help_lines;
pub use windows::{bytes_note, prefill_note, reduce, summarise};

use super::capability::{Arch, Capability, Engine, Refusal};
use super::classes::LayerBudgets;
use super::manifest::{ExportFile, ReductionSummary};
use super::request::ScoreSet;
use crate::{Error, Method, Plan, Result, Target};
use serde::Serialize;

/// One export format (module header).
pub trait ExportTarget: Sync {
    /// The format's name: `--to`, `kvplan-export.json`'s `format`, the folder of `--to all`.
    fn name(&self) -> &'static str;
    /// The files it writes (`<m>`: one per serving length).
    fn files(&self) -> &'static [&'static str];
    /// What the files hold, for `kvplan export --help`.
    fn holds(&self) -> &'static str;
    /// What reads the files, and how (`kvplan-export.json`'s `read_by`).
    fn reader(&self) -> &'static str;
    /// What the target's engine honours for `arch` — its entry of the capability table — or
    /// why it refuses the architecture.
    fn capability(&self, arch: Arch) -> std::result::Result<Capability, Refusal>;
    /// Which method's budgets the files carry.
    fn budgets_of(&self) -> BudgetsOf {
        BudgetsOf::Method
    }
    /// The files of `cx` under the capability `cap`.
    fn write(&self, cx: &Context<'_>, cap: &Capability) -> Result<Written>;
}

/// Which method's budgets (or scores) an export carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetsOf {
    /// The requested method, or [`super::request::default_method`]: any method that keeps
    /// fewer entries per head than the context.
    Method,
    /// The score set's method (`headkv-r` or `headkv`, [`ScoreSet`]): the files carry its
    /// scores.
    ScoreSet,
}

/// Declares the target table: one line per format, `Variant => module::Target;`, in the order
/// `kvplan export --help` lists them. Generates [`Format`], `Format::ALL` and the dispatch
/// [`Format::target`]; everything else about a format is its target's.
macro_rules! target_table {
    ($($(#[$doc:meta])* $variant:ident => $target:path;)+) => {
        /// An export format: one line of the target table (module header).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Format {
            $($(#[$doc])* $variant,)+
        }

        impl Format {
            /// Every format, in table order.
            pub const ALL: [Format; [$(stringify!($variant)),+].len()] =
                [$(Format::$variant),+];

            /// The format's target.
            pub fn target(self) -> &'static dyn ExportTarget {
                match self {
                    $(Format::$variant => &$target,)+
                }
            }
        }
    };
}

target_table! {
    /// vLLM's per-layer windows in the HF config (`layer_types`, `sliding_window`).
    Vllm => vllm::Vllm;
    /// TensorRT-LLM's `KvCacheConfig.max_attention_window`.
    Trtllm => trtllm::Trtllm;
    /// llama.cpp's `--override-kv <arch>.attention.sliding_window`.
    Llamacpp => llamacpp::LlamaCpp;
    /// kvpress `PerLayerCompressionPress` ratios.
    Kvpress => kvpress::Kvpress;
    /// kvpress `LUKVPress` budget curves.
    Lukv => lukv::Lukv;
    /// DuoAttention's pattern folder.
    Duo => duo::Duo;
    /// HeadKV's scores and `head_capacity`.
    Headkv => headkv::HeadKv;
}

impl Format {
    /// The format's name on the command line and in `kvplan-export.json`.
    pub fn name(self) -> &'static str {
        self.target().name()
    }

    /// What reads the format's files.
    pub fn reader(self) -> &'static str {
        self.target().reader()
    }

    /// Whether the format's content depends on a method's budgets (`duo` and `headkv` use the
    /// score set's method).
    pub fn uses_budgets(self) -> bool {
        self.target().budgets_of() == BudgetsOf::Method
    }
}

impl std::str::FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                Error::invalid("--to", format!("one of {}", names.join(", ")), s)
            })
    }
}

/// The capability table's entry for `engine` and `arch`, read from the target that writes for
/// the engine ([`super::capability::capability`]).
pub(crate) fn engine_capability(
    engine: Engine,
    arch: Arch,
) -> std::result::Result<Capability, Refusal> {
    match engine {
        Engine::Vllm => vllm::Vllm.capability(arch),
        Engine::Trtllm => trtllm::Trtllm.capability(arch),
        Engine::TrtllmEngine => trtllm::engine_capability(arch),
        Engine::LlamaCpp => llamacpp::LlamaCpp.capability(arch),
        Engine::Kvpress => kvpress::Kvpress.capability(arch),
        Engine::DuoAttention => duo::Duo.capability(arch),
        Engine::HeadKv => headkv::HeadKv.capability(arch),
    }
}

/// What a target is given: the plan, the method whose budgets travel, the length and target.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    pub plan: &'a Plan,
    pub arch: Arch,
    pub method: Method,
    pub n: usize,
    pub target: Target,
    pub scores: ScoreSet,
    /// Tokens per cache block; `None`: the engine's default.
    pub block_size: Option<usize>,
}

impl Context<'_> {
    /// The method's layer budgets at this length and target.
    pub fn layer_budgets(&self) -> Result<LayerBudgets> {
        LayerBudgets::of(self.plan, self.method, self.n, self.target)
    }
}

/// What a target wrote: its files, the notes for `kvplan-export.json`, and the layer-class
/// reduction when it writes windows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written {
    pub files: Vec<ExportFile>,
    pub notes: Vec<String>,
    pub reduction: Option<ReductionSummary>,
    pub scores: Option<&'static str>,
}

/// The layout of every JSON file kvplan writes ([`kvplan_common::fs::pretty_json`]).
pub fn json(value: &impl Serialize) -> Result<Vec<u8>> {
    kvplan_common::fs::pretty_json(value)
        .map(String::into_bytes)
        .map_err(|e| Error::Parse {
            what: "export",
            path: String::from("."),
            message: e.to_string(),
        })
}

/// An export file called `name`.
pub fn file(name: &str, bytes: Vec<u8>) -> ExportFile {
    ExportFile {
        name: name.to_string(),
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().ok(), Some(f));
        }
        let mut names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Format::ALL.len());
        let e = "vllm2".parse::<Format>().unwrap_err().to_string();
        assert!(e.contains("one of vllm, trtllm, llamacpp"), "{e}");
    }

    #[test]
    fn every_entry_is_the_targets_own() {
        // A target's entries name the engine it writes for and the architecture asked.
        for f in Format::ALL {
            for arch in Arch::ALL {
                let (engine, a) = match f.target().capability(arch) {
                    Ok(c) => (c.engine, c.arch),
                    Err(r) => (r.engine, r.arch),
                };
                assert_eq!(a, arch, "{}", f.name());
                assert_eq!(
                    engine_capability(engine, arch),
                    f.target().capability(arch),
                    "{}",
                    f.name()
                );
            }
        }
    }
}
