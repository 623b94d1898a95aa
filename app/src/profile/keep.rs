//! What `kvplan profile` does with a profile and plan already in place (often committed ones).
//!
//! A new profile that differs from the one on disk only by its date and float noise, or also
//! by what a newer kvplan records besides ([`kvplan_planner::compare`]'s additions), leaves that
//! file untouched, and the plan is built from the profile kept, so it too comes out byte for byte
//! as committed. A profile that differs beyond
//! noise replaces the old one, and the run says what changed (the first JSON path and both
//! values). `--replace` writes the new files whatever they differ by.

use std::path::Path;

use anyhow::Context;
use kvplan_planner::compare::{compare, Change};
use kvplan_planner::{Plan, Profile};
use serde_json::Value;

/// The profile to plan from: `new`, written to `path`, or the profile already at `path` when
/// `new` differs from it only by its date and float noise (and `replace` is off).
pub fn settle_profile(
    new: Profile,
    path: &Path,
    replace: bool,
    log: &mut dyn FnMut(&str),
) -> anyhow::Result<Profile> {
    let write = |p: &Profile| {
        p.save(path)
            .with_context(|| format!("writing {}", path.display()))
    };
    let Ok(old_text) = std::fs::read_to_string(path) else {
        write(&new)?;
        return Ok(new);
    };
    let old = match Profile::from_json(&old_text) {
        Ok(old) => old,
        Err(e) => {
            write(&new)?;
            log(&format!(
                "replaced {}, which did not load ({e})",
                path.display()
            ));
            return Ok(new);
        }
    };
    let change = difference(&old_text, &new.to_json()?);
    let date = old.settings.date.clone();
    match change {
        Change::NoiseOnly { .. } | Change::Additions { .. } if !replace => {
            log(&format!(
                "kept {} (dated {date}): {}; `--replace` writes the new one",
                path.display(),
                change.describe()
            ));
            Ok(old)
        }
        _ => {
            write(&new)?;
            log(&format!(
                "replaced {} (dated {date}): {}",
                path.display(),
                change.describe()
            ));
            Ok(new)
        }
    }
}

/// Writes `plan` to `path` unless the file already holds exactly its bytes; a replaced file is
/// named with its first difference.
pub fn settle_plan(plan: &Plan, path: &Path, log: &mut dyn FnMut(&str)) -> anyhow::Result<()> {
    let text = plan.to_json()?;
    let old = std::fs::read_to_string(path).ok();
    if old.as_deref() == Some(text.as_str()) {
        log(&format!("kept {}: unchanged", path.display()));
        return Ok(());
    }
    plan.save(path)
        .with_context(|| format!("writing {}", path.display()))?;
    if let Some(old) = old {
        log(&format!(
            "replaced {}: {}",
            path.display(),
            difference(&old, &text).describe()
        ));
    }
    Ok(())
}

/// [`compare`] of two JSON texts; an old text that does not parse is a change at the root.
fn difference(old: &str, new: &str) -> Change {
    match (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) {
        (Ok(a), Ok(b)) => compare(&a, &b),
        (Err(e), _) | (_, Err(e)) => Change::Changed {
            at: ".".into(),
            old: format!("unreadable JSON ({e})"),
            new: "the new file".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The hand-made SmolLM2 profile of the planner's tests, dated 2026-11-22.
    fn handmade() -> Profile {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../planner/tests/fixtures/smollm2-handmade.profile.json");
        Profile::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kvplan-keep-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir.join("m.profile.json")
    }

    /// `settle_profile` of `new` over the hand-made profile in place: (file bytes before, after,
    /// the date of the profile returned, the lines logged).
    fn settle(tag: &str, new: Profile, replace: bool) -> (String, String, String, Vec<String>) {
        let path = scratch(tag);
        handmade().save(&path).unwrap_or_else(|e| panic!("{e}"));
        let before = std::fs::read_to_string(&path).unwrap_or_default();
        let mut lines = Vec::new();
        let used = settle_profile(new, &path, replace, &mut |l| lines.push(l.to_string()))
            .unwrap_or_else(|e| panic!("{e}"));
        let after = std::fs::read_to_string(&path).unwrap_or_default();
        (before, after, used.settings.date, lines)
    }

    fn noisy() -> Profile {
        let mut p = handmade();
        p.settings.date = "2026-11-26".into();
        p.funnel[0].entropy += 3e-7;
        p
    }

    #[test]
    fn a_new_date_and_noise_keep_the_file_and_plan_from_it() {
        let (before, after, date, lines) = settle("noise", noisy(), false);
        assert_eq!(before, after);
        assert_eq!(date, "2026-11-22");
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("kept "), "{lines:?}");
        assert!(lines[0].contains("(dated 2026-11-22): only the date and float noise"));
    }

    #[test]
    fn what_a_newer_kvplan_records_besides_keeps_the_file_and_is_named() {
        // The hand-made profile predates the chance test: a rerun that records it adds a field.
        let mut p = noisy();
        let test = kvplan_planner::ChanceTest::new(50, 2, 19.0, 1.0, Vec::new());
        p.settings.retrieval_reasoning_chance = Some(test);
        let (before, after, date, lines) = settle("added", p, false);
        assert_eq!(before, after);
        assert_eq!(date, "2026-11-22");
        assert!(
            lines[0].ends_with(
                "the new one also records `settings.retrieval_reasoning_chance`; `--replace` \
                 writes the new one"
            ),
            "{lines:?}"
        );
    }

    #[test]
    fn replace_writes_even_a_noise_only_profile() {
        let (before, after, date, lines) = settle("replace", noisy(), true);
        assert_ne!(before, after);
        assert_eq!(date, "2026-11-26");
        assert!(lines[0].starts_with("replaced "), "{lines:?}");
    }

    #[test]
    fn a_real_change_replaces_the_file_and_says_where() {
        let mut p = noisy();
        p.retrieval.trials_kept = 41;
        let (before, after, date, lines) = settle("change", p, false);
        assert_ne!(before, after);
        assert_eq!(date, "2026-11-26");
        assert!(
            lines[0].ends_with("(dated 2026-11-22): `retrieval.trials_kept` was 40, is now 41"),
            "{lines:?}"
        );
    }

    #[test]
    fn an_unreadable_file_is_replaced_and_named() {
        let path = scratch("unreadable");
        std::fs::write(&path, "{ not json").unwrap_or_else(|e| panic!("{e}"));
        let mut lines = Vec::new();
        settle_profile(handmade(), &path, false, &mut |l| lines.push(l.to_string()))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(Profile::load(&path).is_ok());
        assert!(lines[0].contains("which did not load"), "{lines:?}");
    }

    #[test]
    fn a_plan_is_written_only_when_its_bytes_change() {
        let path = scratch("plan").with_file_name("m.plan.json");
        let opts = kvplan_planner::PlanOptions::default();
        let target = kvplan_planner::Target::Tokens(128);
        let methods = [kvplan_planner::Method::Pyramid];
        let plan = kvplan_planner::build_plan(&handmade(), &methods, target, &opts)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut lines = Vec::new();
        let mut log = |l: &str| lines.push(l.to_string());
        settle_plan(&plan, &path, &mut log).unwrap_or_else(|e| panic!("{e}"));
        settle_plan(&plan, &path, &mut log).unwrap_or_else(|e| panic!("{e}"));
        let mut other = plan.clone();
        other.provenance.date = "2030-01-01".into();
        settle_plan(&other, &path, &mut log).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].ends_with("m.plan.json: unchanged"), "{lines:?}");
        assert!(lines[1].contains("replaced "), "{lines:?}");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(text.contains("2030-01-01"));
    }
}
