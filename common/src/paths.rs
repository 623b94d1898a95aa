//! Where fetched models and data live: a cache per user, shared by every checkout, every command
//! and the tests, so a fresh clone does not download them again.
//!
//! Order of precedence: an explicit folder (`--models-dir`, `--data-dir`), then the environment
//! (`KVPLAN_MODELS`, `KVPLAN_DATA`), then `$XDG_CACHE_HOME/kvplan/{models,data}`, then
//! `$HOME/.cache/kvplan/{models,data}` (the XDG base directory default). Without any of these
//! (no `HOME`), `.kvplan-cache/` under the working directory. A user's own profiles and plans go
//! beside them, in `<cache root>/plans` (`KVPLAN_PLANS` overrides it), when `kvplan profile` runs
//! outside a folder holding `plans/`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable overriding the models folder.
pub const MODELS_ENV: &str = "KVPLAN_MODELS";
/// Environment variable overriding the data folder.
pub const DATA_ENV: &str = "KVPLAN_DATA";
/// Environment variable overriding the per-user plans folder.
pub const PLANS_ENV: &str = "KVPLAN_PLANS";

/// kvplan's cache root from the given environment values (testable without touching the
/// process environment): `$XDG_CACHE_HOME/kvplan`, else `$HOME/.cache/kvplan`.
pub fn cache_root_from(xdg_cache_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    // The XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored.
    let xdg = xdg_cache_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match (xdg, home.filter(|h| !h.is_empty())) {
        (Some(x), _) => x.join("kvplan"),
        (None, Some(h)) => PathBuf::from(h).join(".cache").join("kvplan"),
        (None, None) => PathBuf::from(".kvplan-cache"),
    }
}

/// kvplan's per-user cache root.
pub fn cache_root() -> PathBuf {
    cache_root_from(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"))
}

fn resolve(explicit: Option<&Path>, env: &str, sub: &str) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os(env)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| cache_root().join(sub))
}

/// The models folder: `explicit`, else `$KVPLAN_MODELS`, else `<cache root>/models`.
pub fn models_dir(explicit: Option<&Path>) -> PathBuf {
    resolve(explicit, MODELS_ENV, "models")
}

/// The data folder: `explicit`, else `$KVPLAN_DATA`, else `<cache root>/data`.
pub fn data_dir(explicit: Option<&Path>) -> PathBuf {
    resolve(explicit, DATA_ENV, "data")
}

/// The per-user plans folder (a user's own profiles and plans): `explicit`, else
/// `$KVPLAN_PLANS`, else `<cache root>/plans`.
pub fn plans_dir(explicit: Option<&Path>) -> PathBuf {
    resolve(explicit, PLANS_ENV, "plans")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_wins_over_home_and_relative_xdg_is_ignored() {
        let root = cache_root_from(Some("/x/cache".into()), Some("/home/u".into()));
        assert_eq!(root, PathBuf::from("/x/cache/kvplan"));
        let root = cache_root_from(Some("rel/cache".into()), Some("/home/u".into()));
        assert_eq!(root, PathBuf::from("/home/u/.cache/kvplan"));
        let root = cache_root_from(None, Some("/home/u".into()));
        assert_eq!(root, PathBuf::from("/home/u/.cache/kvplan"));
        assert_eq!(cache_root_from(None, None), PathBuf::from(".kvplan-cache"));
    }

    #[test]
    fn explicit_folder_wins() {
        let p = Path::new("/tmp/m");
        assert_eq!(models_dir(Some(p)), p);
        assert_eq!(data_dir(Some(p)), p);
        assert_eq!(plans_dir(Some(p)), p);
    }
}
