//! The export targets: one file per format behind one small trait ([`ExportTarget`],
//! [`super::target`]), and one
//! table (`target_table!` below) that lists them. A target says its name, the files it writes
//! and what reads them, what its engine honours for each architecture (its entries of the
//! capability table, [`super::capability`], with the sources they were read from), which
//! method's budgets it carries, and writes a plan's budgets (or scores) at one context length
//! into those files.
//!
//! The table generates [`Format`] (the names `kvplan export --to` takes, in help order) and the
//! dispatch from a format to its target; `kvplan export --help` ([`super::help`]), the manifest and
//! `--to all` read it. Adding a format is one file here and one line in the table.

mod duo;
mod headkv;
mod kvpress;
mod llamacpp;
mod lukv;
mod sglang;
mod trtllm;
mod vllm;
mod windows;

pub use windows::{bytes_note, prefill_note, reduce, summarise};

use super::capability::{Arch, Capability, Engine, Refusal};
use super::target::{BudgetsOf, ExportTarget};
use crate::{Error, Result};

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
    /// SGLang: refused with what it honours (nothing a plan can change yet).
    Sglang => sglang::Sglang;
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

/// What `engine` honours for `arch`, or why it is refused: the capability table's entry
/// ([`super::capability`]), read from the target file that writes for the engine.
pub fn capability(engine: Engine, arch: Arch) -> std::result::Result<Capability, Refusal> {
    match engine {
        Engine::Vllm => vllm::Vllm.capability(arch),
        Engine::Trtllm => trtllm::Trtllm.capability(arch),
        Engine::TrtllmEngine => trtllm::engine_capability(arch),
        Engine::LlamaCpp => llamacpp::LlamaCpp.capability(arch),
        Engine::Kvpress => kvpress::Kvpress.capability(arch),
        Engine::DuoAttention => duo::Duo.capability(arch),
        Engine::HeadKv => headkv::HeadKv.capability(arch),
        Engine::Sglang => sglang::Sglang.capability(arch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::capability::{Layers, Prefill};

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
                    capability(engine, arch),
                    f.target().capability(arch),
                    "{}",
                    f.name()
                );
            }
        }
    }

    #[test]
    fn the_three_reviewed_cases() {
        // Qwen2 on vLLM: one window for every layer (the mixed-layer assert), windowed prefill.
        let c = capability(Engine::Vllm, Arch::Qwen2).unwrap();
        assert_eq!(
            (c.layers, c.prefill),
            (Some(Layers::OneWindow), Prefill::Windowed)
        );
        // Gemma 3 on vLLM: only the local layers' window (a global layer marked sliding would
        // take the local RoPE base), read from gemma3.py at the pinned commit.
        let g = capability(Engine::Vllm, Arch::Gemma3).unwrap();
        assert_eq!(g.layers, Some(Layers::NativeWindowOnly));
        let cited = g
            .sources
            .iter()
            .map(ToString::to_string)
            .collect::<String>();
        assert!(
            cited.contains("gemma3.py") && cited.contains("4ba787ec9"),
            "{cited}"
        );
        // TensorRT-LLM's PyTorch backend: no window in the kernel; the legacy engine: windowed.
        let t = capability(Engine::Trtllm, Arch::Llama).unwrap();
        let l = capability(Engine::TrtllmEngine, Arch::Llama).unwrap();
        assert_eq!(
            (t.prefill, l.prefill),
            (Prefill::Unwindowed, Prefill::Windowed)
        );
        assert_eq!((t.block_size, c.block_size), (32, 16));
    }

    #[test]
    fn every_pair_has_an_answer_with_a_source() {
        for e in Engine::ALL {
            for a in Arch::ALL {
                let sources = match capability(e, a) {
                    Ok(c) => c.sources,
                    // An engine whose source nobody read for this architecture refuses it
                    // without a source, saying so; no other refusal or entry may lack one.
                    Err(r) if r.sources.is_empty() => {
                        assert!(!a.engines_read(), "{e:?} {a:?}: a refusal without source");
                        assert!(r.to_string().contains("no entry read"), "{r}");
                        continue;
                    }
                    Err(r) => r.sources,
                };
                assert!(!sources.is_empty(), "{e:?} {a:?}");
                assert!(sources
                    .iter()
                    .all(|s| !s.commit.is_empty() && !s.file.is_empty()));
            }
        }
        assert!(capability(Engine::LlamaCpp, Arch::Qwen2).is_err());
        assert!(capability(Engine::HeadKv, Arch::Gemma3).is_err());
        assert!(Arch::of("mistral").is_err());
    }
}
