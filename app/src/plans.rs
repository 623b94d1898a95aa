//! Where a model's plan comes from, so that an installed `kvplan` run anywhere has one.
//!
//! A model's plan is named by its slug (the catalog name, `smollm2-135m-instruct`) and looked up
//! in this order, the first that exists winning:
//!
//! 1. `--plan FILE`, when given (a missing file is an error: nothing else is tried);
//! 2. `plans/<slug>.plan.json` under the working directory (a kvplan checkout, or a project
//!    that keeps its plans beside it);
//! 3. `<slug>.plan.json` in the per-user plans folder (`$KVPLAN_PLANS`, else
//!    `~/.cache/kvplan/plans`, beside the model cache), where `kvplan profile` writes when the
//!    working directory has no `plans/` folder;
//! 4. the plan shipped inside the binary: the committed plan of each catalog model, byte for
//!    byte (so its SHA-256, which evaluation records carry, is the committed file's).

use std::path::{Path, PathBuf};

use anyhow::Context;
use kvplan_common::fetch::sha256_file;
use kvplan_common::paths;
use kvplan_planner::{ModelIdentity, Plan};
use sha2::{Digest, Sha256};

/// The committed plans, shipped in the binary: (slug, JSON text).
pub const SHIPPED: &[(&str, &str)] = &[
    (
        "smollm2-135m-instruct",
        include_str!("../../plans/smollm2-135m-instruct.plan.json"),
    ),
    (
        "qwen2.5-coder-0.5b-instruct",
        include_str!("../../plans/qwen2.5-coder-0.5b-instruct.plan.json"),
    ),
    (
        "qwen2.5-coder-1.5b-instruct",
        include_str!("../../plans/qwen2.5-coder-1.5b-instruct.plan.json"),
    ),
    (
        "gemma-3-270m",
        include_str!("../../plans/gemma-3-270m.plan.json"),
    ),
];

/// Where a plan was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--plan FILE`.
    Given(PathBuf),
    /// `plans/<slug>.plan.json` under the working directory.
    WorkingDir(PathBuf),
    /// The per-user plans folder.
    User(PathBuf),
    /// Shipped in the binary (the committed plan of a catalog model).
    Shipped(&'static str),
}

impl Source {
    /// How the source is named in messages and listings.
    pub fn describe(&self) -> String {
        match self {
            Source::Given(p) => p.display().to_string(),
            Source::WorkingDir(p) => format!("{} (working directory)", p.display()),
            Source::User(p) => format!("{} (per-user plans folder)", p.display()),
            Source::Shipped(slug) => format!("{slug} (shipped with kvplan)"),
        }
    }
}

/// The folders a plan is looked up in: the working directory's `plans/` and the per-user
/// folder (explicit so that tests need not change the process's directory or environment).
#[derive(Debug, Clone)]
pub struct Places {
    /// `plans/` under the working directory.
    pub working: PathBuf,
    /// The per-user plans folder.
    pub user: PathBuf,
}

impl Places {
    /// The places of this process: `./plans` and [`paths::plans_dir`].
    pub fn here() -> Self {
        Places {
            working: PathBuf::from("plans"),
            user: paths::plans_dir(None),
        }
    }

    /// The candidates for `slug`, in the order they are tried (`--plan` aside).
    fn candidates(&self, slug: &str) -> [Source; 3] {
        let file = format!("{slug}.plan.json");
        [
            Source::WorkingDir(self.working.join(&file)),
            Source::User(self.user.join(&file)),
            Source::Shipped(shipped(slug).map(|(s, _)| s).unwrap_or("")),
        ]
    }

    /// The plan for `slug`: `explicit` when given, else the first candidate that exists.
    pub fn find(&self, explicit: Option<&Path>, slug: &str) -> Option<Source> {
        if let Some(p) = explicit {
            return Some(Source::Given(p.to_path_buf()));
        }
        self.candidates(slug).into_iter().find(exists)
    }

    /// Every plan for `slug` that exists, the one [`Places::find`] picks first.
    pub fn all(&self, slug: &str) -> Vec<Source> {
        self.candidates(slug).into_iter().filter(exists).collect()
    }

    /// Where `kvplan profile` writes a model's profile by default: `plans/` under the working
    /// directory when that folder exists, else the per-user folder.
    pub fn profile_out(&self, slug: &str) -> PathBuf {
        let dir = if self.working.is_dir() {
            &self.working
        } else {
            &self.user
        };
        dir.join(format!("{slug}.profile.json"))
    }

    /// The error for a model without a plan anywhere, naming where it looked and how to make
    /// one (`name`: how the model is called in the message; `model`: how to name it to `kvplan
    /// profile --model`; `give`: how the command takes a plan file instead).
    pub fn missing(&self, slug: &str, name: &str, model: &str, give: &str) -> anyhow::Error {
        let file = format!("{slug}.plan.json");
        anyhow::anyhow!(
            "no plan for {name}: looked for {} and {}, and kvplan ships none for it; make it with \
             `kvplan profile --model {model}` (it writes {}), or give {give}",
            self.working.join(&file).display(),
            self.user.join(&file).display(),
            self.profile_out(slug).with_file_name(&file).display(),
        )
    }
}

fn exists(s: &Source) -> bool {
    match s {
        Source::Given(p) | Source::WorkingDir(p) | Source::User(p) => p.is_file(),
        Source::Shipped(slug) => !slug.is_empty(),
    }
}

/// The shipped plan of `slug`, if any.
pub fn shipped(slug: &str) -> Option<(&'static str, &'static str)> {
    SHIPPED.iter().copied().find(|(s, _)| *s == slug)
}

/// The plan of the catalog model `slug` for a command that needs no model file (`kvplan
/// export`): the first of `./plans`, the per-user folder and the shipped plans ([`Places::find`]),
/// not checked against a GGUF; with where it was found.
pub fn of_slug(places: &Places, slug: &str) -> anyhow::Result<(Plan, Source)> {
    let source = places
        .find(None, slug)
        .ok_or_else(|| places.missing(slug, slug, slug, "the plan file as the first argument"))?;
    let (plan, _) = read(&source, None)?;
    Ok((plan, source))
}

/// The plan whose bytes hash to `sha256` (what evaluation records carry), with where it was
/// found: the first of `./plans/*.plan.json`, the per-user folder's `*.plan.json` and the shipped
/// plans that does; `None` when none does. A file that cannot be read is passed over (it cannot
/// be the one the records name).
pub fn with_sha256(places: &Places, sha256: &str) -> anyhow::Result<Option<(Plan, Source)>> {
    let files = |dir: &Path| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.to_string_lossy().ends_with(".plan.json"))
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    };
    let mut sources: Vec<Source> = files(&places.working)
        .into_iter()
        .map(Source::WorkingDir)
        .collect();
    sources.extend(files(&places.user).into_iter().map(Source::User));
    sources.extend(SHIPPED.iter().map(|(slug, _)| Source::Shipped(slug)));
    for source in sources {
        let have = match &source {
            Source::Given(p) | Source::WorkingDir(p) | Source::User(p) => match sha256_file(p) {
                Ok(h) => h,
                Err(_) => continue,
            },
            Source::Shipped(slug) => {
                let text = shipped(slug).map_or("", |(_, t)| t);
                hex_sha256(text.as_bytes())
            }
        };
        if have == sha256 {
            let (plan, _) = read(&source, None)?;
            return Ok(Some((plan, source)));
        }
    }
    Ok(None)
}

/// The SHA-256 of `bytes` in lowercase hex, as [`sha256_file`] writes it.
fn hex_sha256(bytes: &[u8]) -> String {
    kvplan_common::fetch::hex(&Sha256::digest(bytes))
}

/// Reads the plan at `source` for the model `identity`, checked against it, with the SHA-256 of
/// its bytes.
pub fn load(source: &Source, identity: &ModelIdentity) -> anyhow::Result<(Plan, String)> {
    read(source, Some(identity))
}

/// The plan at `source` (checked against `identity` when given) and the SHA-256 of its bytes.
fn read(source: &Source, identity: Option<&ModelIdentity>) -> anyhow::Result<(Plan, String)> {
    let from = || format!("cannot use plan {}", source.describe());
    match source {
        Source::Given(p) | Source::WorkingDir(p) | Source::User(p) => {
            if !p.is_file() {
                anyhow::bail!("no plan file at {}", p.display());
            }
            let plan = Plan::load(p, identity).with_context(from)?;
            Ok((plan, sha256_file(p)?))
        }
        Source::Shipped(slug) => {
            let (_, text) = shipped(slug).with_context(from)?;
            let plan = Plan::from_json(text).with_context(from)?;
            if let Some(identity) = identity {
                plan.check_model(identity).with_context(from)?;
            }
            Ok((plan, hex_sha256(text.as_bytes())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_slug_finds_the_shipped_plan_and_names_where_it_looked() {
        let dir = std::env::temp_dir().join(format!("kvplan-of-slug-{}", std::process::id()));
        let places = Places {
            working: dir.join("plans"),
            user: dir.join("user"),
        };
        let (plan, source) = of_slug(&places, "gemma-3-270m").unwrap();
        assert_eq!(source, Source::Shipped("gemma-3-270m"));
        assert_eq!(plan.model.architecture, "gemma3");
        let e = of_slug(&places, "no-such-model").unwrap_err().to_string();
        assert!(
            e.contains("no plan for no-such-model") && e.contains("user/no-such-model.plan.json"),
            "{e}"
        );
    }

    #[test]
    fn a_plan_is_found_by_the_hash_records_carry_in_every_place() {
        let dir = scratch("by-hash");
        let places = Places {
            working: dir.join("plans"),
            user: dir.join("user"),
        };
        // Shipped: the committed file's bytes, so its hash is `sha256sum plans/<slug>.plan.json`.
        let shipped_sha = sha256_file(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../plans/gemma-3-270m.plan.json"
        )))
        .unwrap_or_default();
        let found = with_sha256(&places, &shipped_sha).ok().flatten();
        assert_eq!(found.map(|(_, s)| s), Some(Source::Shipped("gemma-3-270m")));
        // A per-user file wins over the shipped plan it equals; one changed byte is another plan.
        std::fs::create_dir_all(&places.user).ok();
        let text = shipped("gemma-3-270m").map_or("", |(_, t)| t);
        let user = places.user.join("mine.plan.json");
        std::fs::write(&user, text).ok();
        let found = with_sha256(&places, &shipped_sha).ok().flatten();
        assert_eq!(found.map(|(_, s)| s), Some(Source::User(user.clone())));
        std::fs::write(&user, format!("{text} ")).ok();
        let edited = sha256_file(&user).unwrap_or_default();
        let found = with_sha256(&places, &edited).ok().flatten();
        assert_eq!(found.map(|(_, s)| s), Some(Source::User(user)));
        assert!(with_sha256(&places, "0".repeat(64).as_str())
            .ok()
            .flatten()
            .is_none());
        std::fs::remove_dir_all(&dir).ok();
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kvplan-plans-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(&d).ok();
        d
    }

    fn places(root: &Path) -> Places {
        Places {
            working: root.join("cwd/plans"),
            user: root.join("user"),
        }
    }

    #[test]
    fn shipped_plans_are_the_committed_files_byte_for_byte() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plans");
        let mut committed: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter_map(|n| n.strip_suffix(".plan.json").map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        committed.sort();
        let mut shipped: Vec<String> = SHIPPED.iter().map(|(s, _)| s.to_string()).collect();
        shipped.sort();
        assert_eq!(shipped, committed, "every committed plan is shipped");
        for (slug, text) in SHIPPED {
            let path = dir.join(format!("{slug}.plan.json"));
            let sha = sha256_file(&path).unwrap_or_default();
            assert_eq!(hex_sha256(text.as_bytes()), sha, "{slug}");
            assert!(Plan::from_json(text).is_ok(), "{slug}");
        }
    }

    #[test]
    fn given_then_working_directory_then_user_then_shipped() {
        let root = scratch("order");
        let p = places(&root);
        let slug = "smollm2-135m-instruct";
        assert_eq!(p.find(None, slug), Some(Source::Shipped(slug)));
        assert_eq!(p.find(None, "my-model"), None);
        std::fs::create_dir_all(&p.user).ok();
        std::fs::write(p.user.join(format!("{slug}.plan.json")), "{}").ok();
        let user = Source::User(p.user.join(format!("{slug}.plan.json")));
        assert_eq!(p.find(None, slug), Some(user.clone()));
        std::fs::create_dir_all(&p.working).ok();
        std::fs::write(p.working.join(format!("{slug}.plan.json")), "{}").ok();
        let cwd = Source::WorkingDir(p.working.join(format!("{slug}.plan.json")));
        assert_eq!(p.find(None, slug), Some(cwd.clone()));
        assert_eq!(p.all(slug), vec![cwd, user, Source::Shipped(slug)]);
        let given = Path::new("/nowhere/x.json");
        assert_eq!(
            p.find(Some(given), slug),
            Some(Source::Given(given.to_path_buf()))
        );
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn profile_goes_to_plans_under_the_working_directory_only_when_it_exists() {
        let root = scratch("out");
        let p = places(&root);
        assert_eq!(p.profile_out("m"), p.user.join("m.profile.json"));
        std::fs::create_dir_all(&p.working).ok();
        assert_eq!(p.profile_out("m"), p.working.join("m.profile.json"));
        std::fs::remove_dir_all(&root).ok();
    }

    #[test]
    fn a_missing_given_file_is_an_error_naming_it() {
        let id = ModelIdentity {
            name: String::from("m"),
            ..serde_json::from_str(SHIPPED[0].1)
                .map(|p: Plan| p.model)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let err = load(&Source::Given(PathBuf::from("/nowhere/p.json")), &id)
            .err()
            .map(|e| format!("{e:#}"));
        assert_eq!(err.as_deref(), Some("no plan file at /nowhere/p.json"));
    }
}
