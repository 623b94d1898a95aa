//! A repository file as committed (`git show HEAD:<path>`), for the tests that check committed
//! results (`plans/`): the README's main job (`kvplan profile`) rewrites those files in the
//! checkout, and the tests must pass after it as before it. Outside a git checkout (a source
//! archive), or for a file git does not track, the file as it is on disk.

use std::io;
use std::path::Path;
use std::process::Command;

/// The bytes of `rel` (a `/`-separated path inside the repository at `root`) at `HEAD`, else on
/// disk.
pub fn read(root: &Path, rel: &str) -> io::Result<Vec<u8>> {
    let shown = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["show", &format!("HEAD:{rel}")])
        .output();
    match shown {
        Ok(out) if out.status.success() => Ok(out.stdout),
        _ => std::fs::read(root.join(rel)),
    }
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(root: &Path, rel: &str) -> io::Result<String> {
    String::from_utf8(read(root, rel)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{rel}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_outside_any_checkout_is_read_from_disk() {
        let dir = std::env::temp_dir().join(format!("kvplan-committed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        std::fs::write(dir.join("x.txt"), "on disk").ok();
        assert_eq!(
            read_to_string(&dir, "x.txt").ok().as_deref(),
            Some("on disk")
        );
        assert!(read(&dir, "missing.txt").is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_tracked_file_changed_on_disk_reads_as_committed() {
        let dir = std::env::temp_dir().join(format!("kvplan-committed-git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("plans")).ok();
        std::fs::write(dir.join("plans/p.json"), "committed").ok();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(&dir)
                .args([
                    "-c",
                    "user.name=t",
                    "-c",
                    "user.email=t@t",
                    "-c",
                    "commit.gpgsign=false",
                ])
                .args(args)
                .output()
                .map(|o| o.status.success());
            assert!(matches!(ok, Ok(true)), "git {args:?} failed: {ok:?}");
        };
        git(&["init", "-q"]);
        git(&["add", "plans/p.json"]);
        git(&["commit", "-q", "-m", "c"]);
        std::fs::write(dir.join("plans/p.json"), "rewritten by the main job").ok();
        std::fs::write(dir.join("plans/new.json"), "untracked").ok();
        assert_eq!(
            read_to_string(&dir, "plans/p.json").ok().as_deref(),
            Some("committed")
        );
        assert_eq!(
            read_to_string(&dir, "plans/new.json").ok().as_deref(),
            Some("untracked")
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
