//! The archive reader of `kvplan fetch` (`kvplan_common::archive`): the input as a wheel (zip)
//! whose member is streamed into a file while hashed, as a wheel extracted under a prefix, and
//! as a .tar.gz sdist extracted under a prefix. Nothing may land outside the output folder.
#![no_main]

use std::path::{Path, PathBuf};

use kvplan_common::archive::{append_member, extract_tar_gz, extract_zip};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest, Sha256};

/// A scratch folder per fuzzing process, emptied for each input.
fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("kvplan-fuzz-archive-{}", std::process::id()))
}

/// Every file below `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let root = scratch();
    let _ = std::fs::remove_dir_all(&root);
    let out_dir = root.join("out");
    if std::fs::create_dir_all(&out_dir).is_err() {
        return;
    }
    let archive = root.join("input.whl");
    if std::fs::write(&archive, data).is_err() {
        return;
    }
    let sink_path = root.join("member.bin");
    let mut sink = Vec::new();
    let mut hasher = Sha256::new();
    if let Ok(n) = append_member(
        &archive,
        "pkg/data/part01.bin",
        &mut sink,
        &sink_path,
        &mut hasher,
    ) {
        assert_eq!(n as usize, sink.len());
        let mut check = Sha256::new();
        check.update(&sink);
        assert_eq!(check.finalize(), hasher.finalize());
    }
    let _ = extract_zip(&archive, "pkg/texts/", &out_dir);
    let _ = extract_tar_gz(&archive, "pkg-1.0/texts/", &out_dir);
    let mut written = Vec::new();
    files(&root, &mut written);
    for p in written {
        assert!(
            p == archive || p.starts_with(&out_dir),
            "{} written outside the output folder",
            p.display()
        );
    }
});
