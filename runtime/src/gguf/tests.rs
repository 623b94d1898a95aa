//! GGUF reader tests: files built in memory, every malformed case rejected with a named error.

use super::*;
use half::{bf16, f16};

fn valid() -> GgufWriter {
    GgufWriter::new()
        .meta("general.architecture", MetaValue::String("llama".into()))
        .meta("llama.block_count", MetaValue::U32(2))
        .meta(
            "tokenizer.ggml.tokens",
            MetaValue::Array(vec![
                MetaValue::String("a".into()),
                MetaValue::String("b".into()),
            ]),
        )
        .tensor_f32("w", &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .tensor_f32("v", &[4], &[-1.0, 0.5, 0.25, 8.0])
}

fn err_of(bytes: Vec<u8>) -> String {
    match GgufFile::from_bytes(bytes) {
        Ok(_) => panic!("malformed file was accepted"),
        Err(e) => e.to_string(),
    }
}

/// `bytes` with `patch` written over them from offset `at` (a field of the file overwritten).
fn patched(mut bytes: Vec<u8>, at: usize, patch: &[u8]) -> Vec<u8> {
    bytes[at..at + patch.len()].copy_from_slice(patch);
    bytes
}

#[test]
fn reads_metadata_and_tensors_back() {
    let f = GgufFile::from_bytes(valid().to_bytes()).unwrap();
    assert_eq!(f.version, 3);
    assert_eq!(f.meta_str("general.architecture").unwrap(), "llama");
    assert_eq!(f.meta_u64("llama.block_count").unwrap(), 2);
    let (w, shape) = f.tensor_f32("w").unwrap();
    assert_eq!(shape, vec![2, 3]);
    assert_eq!(w, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(f.tensor_f32("v").unwrap().0, vec![-1.0, 0.5, 0.25, 8.0]);
    assert!(f
        .meta("missing.key")
        .unwrap_err()
        .to_string()
        .contains("cannot find missing.key"));
}

#[test]
fn reads_version_2() {
    let bytes = patched(valid().to_bytes(), 4, &2u32.to_le_bytes());
    assert_eq!(GgufFile::from_bytes(bytes).unwrap().version, 2);
}

#[test]
fn rejects_wrong_magic() {
    let mut bytes = valid().to_bytes();
    bytes[0] = b'X';
    assert!(err_of(bytes).contains("bad magic"));
}

#[test]
fn rejects_unsupported_version() {
    let bytes = patched(valid().to_bytes(), 4, &1u32.to_le_bytes());
    assert!(err_of(bytes).contains("unsupported version 1"));
}

#[test]
fn rejects_truncation_at_every_length() {
    let bytes = valid().to_bytes();
    for len in 0..bytes.len() {
        let msg = err_of(bytes[..len].to_vec());
        assert!(
            msg.contains("truncated") || msg.contains("past the end"),
            "prefix of {len} bytes: {msg}"
        );
    }
}

#[test]
fn rejects_absurd_tensor_count() {
    let bytes = patched(valid().to_bytes(), 8, &u64::MAX.to_le_bytes());
    assert!(err_of(bytes).contains("tensor count"));
}

#[test]
fn rejects_absurd_metadata_count() {
    let bytes = patched(valid().to_bytes(), 16, &(1u64 << 40).to_le_bytes());
    assert!(err_of(bytes).contains("metadata count"));
}

#[test]
fn counts_under_the_limits_but_beyond_the_file_are_refused_before_allocating() {
    // 60,000 tensors and 60,000 metadata entries are within the limits (2^16) but cannot fit in
    // a file of a few hundred bytes: refused from the header alone.
    let bytes = patched(valid().to_bytes(), 8, &60_000u64.to_le_bytes());
    let err = err_of(bytes);
    assert!(err.contains("tensor table declares 60000 items"), "{err}");
    let bytes = patched(valid().to_bytes(), 16, &60_000u64.to_le_bytes());
    let err = err_of(bytes);
    assert!(err.contains("metadata declares 60000 items"), "{err}");
}

#[test]
fn a_trillion_element_array_is_refused_before_allocating() {
    let bytes = GgufWriter::new()
        .meta("a", MetaValue::Array(vec![MetaValue::U8(1)]))
        .to_bytes();
    let bytes = patched(bytes, 41, &1_000_000_000_000u64.to_le_bytes());
    let err = err_of(bytes);
    assert!(
        err.contains("length of array \"a\" 1000000000000 exceeds the limit"),
        "{err}"
    );
}

#[test]
fn rejects_absurd_string_length() {
    // First key's length is at offset 24.
    let bytes = patched(valid().to_bytes(), 24, &(1u64 << 50).to_le_bytes());
    assert!(err_of(bytes).contains("exceeds the limit"));
}

#[test]
fn rejects_string_longer_than_file() {
    let bytes = patched(valid().to_bytes(), 24, &1000u64.to_le_bytes());
    assert!(err_of(bytes).contains("truncated"));
}

#[test]
fn rejects_array_count_larger_than_remaining_bytes() {
    let bytes = GgufWriter::new()
        .meta("a", MetaValue::Array(vec![MetaValue::U32(1)]))
        .to_bytes();
    // header 24 + key (8 + 1) + type 4 + elem type 4 = 41: the count follows.
    let bad = patched(bytes.clone(), 41, &(1u64 << 20).to_le_bytes());
    assert!(err_of(bad).contains("truncated"));
    let absurd = patched(bytes, 41, &u64::MAX.to_le_bytes());
    assert!(err_of(absurd).contains("exceeds the limit"));
}

#[test]
fn rejects_unknown_value_type() {
    let bytes = GgufWriter::new().meta("k", MetaValue::U32(7)).to_bytes();
    let bytes = patched(bytes, 33, &99u32.to_le_bytes());
    assert!(err_of(bytes).contains("unknown value type 99"));
}

#[test]
fn rejects_invalid_bool() {
    let mut bytes = GgufWriter::new()
        .meta("k", MetaValue::Bool(true))
        .to_bytes();
    bytes[37] = 7;
    assert!(err_of(bytes).contains("bool must be 0 or 1"));
}

/// Where [`one_tensor`]'s type field lies (header 24, name 8 + 1, n_dims 4, dim 8); its data
/// offset follows at 49.
const TYPE_AT: usize = 45;

fn one_tensor() -> Vec<u8> {
    GgufWriter::new()
        .tensor_f32("t", &[4], &[0.0; 4])
        .to_bytes()
}

#[test]
fn rejects_unknown_tensor_type() {
    let bytes = patched(one_tensor(), TYPE_AT, &77u32.to_le_bytes());
    assert!(err_of(bytes).contains("unknown tensor type 77"));
}

#[test]
fn rejects_data_offset_out_of_range() {
    let bytes = patched(one_tensor(), TYPE_AT + 4, &(1u64 << 20).to_le_bytes());
    assert!(err_of(bytes).contains("past the end"));
    let bytes = patched(one_tensor(), TYPE_AT + 4, &(u64::MAX - 7).to_le_bytes());
    let msg = err_of(bytes);
    assert!(
        msg.contains("past the end") || msg.contains("alignment"),
        "{msg}"
    );
}

#[test]
fn rejects_misaligned_offset() {
    let bytes = patched(one_tensor(), TYPE_AT + 4, &4u64.to_le_bytes());
    assert!(err_of(bytes).contains("alignment"));
}

#[test]
fn rejects_too_many_dims_and_huge_shapes() {
    let bytes = patched(one_tensor(), 33, &9u32.to_le_bytes());
    assert!(err_of(bytes).contains("dimensions"));
    let bytes = patched(one_tensor(), 37, &u64::MAX.to_le_bytes());
    assert!(err_of(bytes).contains("element count"));
}

/// Regression (fuzz target `gguf`): a tensor of dims [0, 2⁴⁰, 2⁴⁰] has a count of 0 when
/// multiplied innermost first, but its shape's product, outermost first, overflowed. A zero
/// dimension is refused, naming the tensor and the dimension.
#[test]
fn rejects_a_zero_dimension() {
    let bytes = patched(one_tensor(), 37, &0u64.to_le_bytes());
    let err = err_of(bytes);
    assert!(
        err.contains("dimension 0 is 0, expected at least 1"),
        "{err}"
    );
}

#[test]
fn rejects_shape_not_matching_block_size() {
    let bytes = GgufWriter::new()
        .tensor_raw("q", &[1, 16], GgmlType::Q8_0, vec![0; 34])
        .to_bytes();
    assert!(err_of(bytes).contains("not a multiple of the Q8_0 block size"));
}

#[test]
fn rejects_duplicate_tensor_names() {
    let bytes = GgufWriter::new()
        .tensor_f32("t", &[1], &[0.0])
        .tensor_f32("t", &[1], &[0.0])
        .to_bytes();
    assert!(err_of(bytes).contains("duplicate tensor name"));
}

#[test]
fn unknown_tensor_name_is_an_error() {
    let f = GgufFile::from_bytes(valid().to_bytes()).unwrap();
    assert!(f
        .tensor_f32("nope")
        .unwrap_err()
        .to_string()
        .contains("no tensor named"));
}

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

#[test]
fn dequantizes_q4_0_by_hand() {
    // d = 0.5; byte j holds element j (low nibble) and element j + 16 (high nibble).
    let mut block = h(0.5).to_vec();
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let x = GgmlType::Q4_0.dequantize(&block, 32).unwrap();
    assert_eq!(x[0], (0.0 - 8.0) * 0.5);
    assert_eq!(x[15], (15.0 - 8.0) * 0.5);
    assert_eq!(x[16], (15.0 - 8.0) * 0.5);
    assert_eq!(x[31], (0.0 - 8.0) * 0.5);
}

#[test]
fn dequantizes_q4_1_by_hand() {
    // x = q·d + m with d = 0.5, m = −1.
    let mut block = h(0.5).to_vec();
    block.extend(h(-1.0));
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let x = GgmlType::Q4_1.dequantize(&block, 32).unwrap();
    assert_eq!(&x[..3], &[-1.0, -0.5, 0.0]);
    assert_eq!(x[15], 6.5);
    assert_eq!(x[16], 6.5);
    assert_eq!(x[31], -1.0);
}

#[test]
fn dequantizes_q8_0_f16_bf16_by_hand() {
    let mut block = h(2.0).to_vec();
    block.extend((0..32i8).map(|j| (j - 16) as u8));
    let x = GgmlType::Q8_0.dequantize(&block, 32).unwrap();
    assert_eq!(x[0], -32.0);
    assert_eq!(x[31], 30.0);
    let f = [h(1.5), h(-0.25)].concat();
    assert_eq!(GgmlType::F16.dequantize(&f, 2).unwrap(), vec![1.5, -0.25]);
    let b = [
        bf16::from_f32(3.0).to_le_bytes(),
        bf16::from_f32(-2.0).to_le_bytes(),
    ]
    .concat();
    assert_eq!(GgmlType::BF16.dequantize(&b, 2).unwrap(), vec![3.0, -2.0]);
}

#[test]
fn dequantizes_q4_k_by_hand() {
    // d = 1, dmin = 0.5. Sub-block 0: scale 2, min 4; sub-block 1: scale 3, min 0;
    // sub-block 4 (packed form, j ≥ 4): scale = scales[8] & 0xF = 5, min 0. Nibbles: low 1, high 2.
    let mut block = [h(1.0), h(0.5)].concat();
    let mut scales = [0u8; 12];
    scales[0] = 2;
    scales[4] = 4;
    scales[1] = 3;
    scales[8] = 5;
    block.extend(scales);
    block.extend([0x21u8; 128]);
    let x = GgmlType::Q4K.dequantize(&block, 256).unwrap();
    assert_eq!(x[0], 1.0 * 2.0 * 1.0 - 0.5 * 4.0);
    assert_eq!(x[32], 1.0 * 3.0 * 2.0);
    assert_eq!(x[128], 5.0);
    assert_eq!(x[160], 0.0);
}

#[test]
fn dequantizes_q6_k_by_hand() {
    let mut ql = [0u8; 128];
    ql[0] = 0x3F;
    let mut qh = [0u8; 64];
    qh[0] = 0xE4; // bits (from low): 00, 01, 10, 11
    let mut sc = [1u8; 16];
    sc[0] = 2;
    let block = [&ql[..], &qh[..], &sc[..], &h(0.5)[..]].concat();
    let x = GgmlType::Q6K.dequantize(&block, 256).unwrap();
    assert_eq!(x[0], 0.5 * 2.0 * (15.0 - 32.0));
    assert_eq!(x[1], 0.5 * 2.0 * -32.0);
    assert_eq!(x[16], 0.5 * -32.0);
    assert_eq!(x[32], 0.5 * (16.0 - 32.0));
    assert_eq!(x[64], 0.5 * (35.0 - 32.0));
    assert_eq!(x[96], 0.5 * (48.0 - 32.0));
}

#[test]
fn dequantize_checks_byte_count() {
    let err = GgmlType::Q4_1.dequantize(&[0u8; 19], 32).unwrap_err();
    assert!(err.contains("needs 20 bytes, found 19"));
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn type_named(name: &str) -> GgmlType {
    match name {
        "Q5_0" => GgmlType::Q5_0,
        "Q5_1" => GgmlType::Q5_1,
        "Q8_0" => GgmlType::Q8_0,
        "Q4_K" => GgmlType::Q4K,
        "Q5_K" => GgmlType::Q5K,
        "Q6_K" => GgmlType::Q6K,
        other => panic!("fixture names an unexpected type {other}"),
    }
}

#[test]
fn dequantizes_reference_blocks_bit_for_bit() {
    // Real blocks of the catalog models and seeded Q5_1/Q5_K blocks, with the f32 values gguf-py's
    // numpy dequantiser gives (tools/dequant_fixtures.py).
    let fx: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/dequant_blocks.json")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for case in fx["cases"].as_array().unwrap() {
        let ty = type_named(case["type"].as_str().unwrap());
        seen.insert(format!("{ty:?}"));
        let block = unhex(case["block_hex"].as_str().unwrap());
        let want: Vec<u32> = unhex(case["expected_f32_le_hex"].as_str().unwrap())
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(block.len(), ty.block_bytes());
        let got = ty.dequantize(&block, ty.block_size()).unwrap();
        let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want, "{}", case["source"]);
    }
    for ty in ["Q5_0", "Q5_1", "Q5K", "Q8_0", "Q4K", "Q6K"] {
        assert!(seen.contains(ty), "no fixture block of {ty}");
    }
}

#[test]
fn dequantizes_q5_0_by_hand() {
    // d = 0.5; qh bit i is the fifth bit of element i. Nibbles: element j = j, element j+16 = 15 − j.
    // qh sets bits 0 and 31 (elements 0 and 31): q0 = 0 + 16, q31 = 0 + 16; q1 = 1; q16 = 15.
    let mut block = h(0.5).to_vec();
    block.extend((1u32 | 1 << 31).to_le_bytes());
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let x = GgmlType::Q5_0.dequantize(&block, 32).unwrap();
    assert_eq!(x[0], 0.0); // (16 − 16)·0.5
    assert_eq!(x[1], (1.0 - 16.0) * 0.5);
    assert_eq!(x[15], (15.0 - 16.0) * 0.5);
    assert_eq!(x[16], (15.0 - 16.0) * 0.5);
    assert_eq!(x[31], (16.0 - 16.0) * 0.5);
    assert_eq!(x[30], (1.0 - 16.0) * 0.5);
}

#[test]
fn dequantizes_q5_1_and_q5_k_by_hand() {
    // Q5_1: x = q·d + m, d = 0.25, m = 1; all nibbles 0xF, all fifth bits set: q = 31.
    let block = [&h(0.25)[..], &h(1.0)[..], &[0xFF; 4][..], &[0xFF; 16][..]].concat();
    let x = GgmlType::Q5_1.dequantize(&block, 32).unwrap();
    assert!(x.iter().all(|&v| v == 31.0 * 0.25 + 1.0));
    // Q5_K: d = 1, dmin = 0.5; sub-block 0 scale 2 min 4, sub-block 1 scale 3 min 0. Nibbles low 1,
    // high 2; high-bit plane 1 set only (bit 1 of qh): sub-block 1 gets +16.
    let mut scales = [0u8; 12];
    scales[0] = 2;
    scales[4] = 4;
    scales[1] = 3;
    let block = [
        &[h(1.0), h(0.5)].concat()[..],
        &scales[..],
        &[0x02u8; 32][..],
        &[0x21u8; 128][..],
    ]
    .concat();
    let x = GgmlType::Q5K.dequantize(&block, 256).unwrap();
    assert_eq!(x[0], 2.0 * 1.0 - 0.5 * 4.0);
    assert_eq!(x[32], 3.0 * (2.0 + 16.0));
    assert_eq!(x[64], 0.0); // sub-block 2: scale 0, min 0
}

#[test]
fn malformed_q5_blocks_are_named_errors() {
    for ty in [GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q5K] {
        let (n, need) = (ty.block_size(), ty.block_bytes());
        for len in [0, need - 1, need + 1, 2 * need - 1] {
            let err = ty.dequantize(&vec![0u8; len], n).unwrap_err();
            assert!(
                err.contains(&format!("needs {need} bytes, found {len}")),
                "{ty:?}: {err}"
            );
        }
        let err = ty.dequantize(&vec![0u8; need], n - 1).unwrap_err();
        assert!(err.contains("not a multiple of the block size"), "{err}");
        // A tensor whose data stops one byte short of its last block: the file is refused.
        let bytes = GgufWriter::new()
            .tensor_raw("q", &[2, n], ty, vec![0; 2 * need - 1])
            .to_bytes();
        assert!(err_of(bytes).contains("past the end"), "{ty:?}");
    }
    let bytes = GgufWriter::new()
        .tensor_raw("k", &[1, 32], GgmlType::Q5K, vec![0; 22])
        .to_bytes();
    assert!(err_of(bytes).contains("not a multiple of the Q5K block size 256"));
}
