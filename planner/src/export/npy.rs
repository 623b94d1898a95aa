//! NumPy's `.npy` format, version 1.0, for one little-endian float32 array in C order — what
//! `np.load(..., allow_pickle=False)` reads (LU-KV's budget curves). Written by hand: the format
//! is a 10-byte preamble and a Python-literal header (NEP 1, "A simple file format for NumPy
//! arrays"), and the crates that write it (`ndarray-npy`, `npyz`) would bring an array library
//! for one function.
//!
//! Layout: `\x93NUMPY`, major 1, minor 0, the header length as u16 little-endian, then the
//! header `{'descr': '<f4', 'fortran_order': False, 'shape': (a, b, c), }`, padded with spaces
//! and ended by `\n` so the data starts at a multiple of 64 bytes, then the values.

use crate::{Error, Result};

const MAGIC: &[u8] = b"\x93NUMPY";

/// The `.npy` bytes of a float32 array of `shape` holding `values` in C order.
pub fn write_f32(shape: &[usize], values: &[f32]) -> Result<Vec<u8>> {
    let count: usize = shape.iter().product();
    if count != values.len() {
        return Err(Error::invalid(
            "npy",
            format!("{count} values for shape {shape:?}"),
            values.len(),
        ));
    }
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let tuple = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {tuple}, }}");
    // Preamble (magic 6 + version 2 + length 2) + header + '\n' to a multiple of 64.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let len = u16::try_from(header.len())
        .map_err(|_| Error::invalid("npy", "a header under 65 536 bytes", header.len()))?;
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + 4 * values.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_data_as_numpy_writes_them() {
        // What NumPy 2.4's np.save writes for np.array([[1.0, -2.5, 0.5]], dtype='<f4'):
        // a 118-byte header (10 + 118 = 128), then the 3 × 4 data bytes, 140 bytes in all.
        let bytes = write_f32(&[1, 3], &[1.0, -2.5, 0.5]).unwrap();
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + hlen]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }"));
        assert!(header.ends_with(" \n"));
        assert_eq!((hlen, bytes.len()), (118, 140));
        let data = &bytes[10 + hlen..];
        assert_eq!(data, [1.0f32, -2.5, 0.5].map(f32::to_le_bytes).concat());
        // A one-dimensional shape is a one-element tuple.
        let one = write_f32(&[2], &[0.0, 1.0]).unwrap();
        assert!(std::str::from_utf8(&one[10..70])
            .unwrap()
            .contains("'shape': (2,), "));
        assert!(write_f32(&[2, 2], &[0.0; 3]).is_err());
    }
}
