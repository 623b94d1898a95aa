//! GGUF metadata values.

use std::io::Read;

use super::reader::{ByteReader, LIMITS};
use crate::error::Result;

/// A metadata value, as typed in the file.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<MetaValue>),
}

impl MetaValue {
    /// The value as a non-negative integer, if it is one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) => u64::try_from(v).ok(),
            MetaValue::I16(v) => u64::try_from(v).ok(),
            MetaValue::I32(v) => u64::try_from(v).ok(),
            MetaValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, if it is numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            MetaValue::I8(v) => Some(v as f64),
            MetaValue::I16(v) => Some(v as f64),
            MetaValue::I32(v) => Some(v as f64),
            MetaValue::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array, if it is one.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(v) => Some(v),
            _ => None,
        }
    }

    /// A short rendering for `kvplan inspect`: arrays are summarised, long strings cut.
    pub fn summary(&self) -> String {
        match self {
            MetaValue::String(s) if s.chars().count() > 80 => {
                format!(
                    "{:?}… ({} bytes)",
                    s.chars().take(77).collect::<String>(),
                    s.len()
                )
            }
            MetaValue::String(s) => format!("{s:?}"),
            MetaValue::Array(v) if v.len() > 6 => {
                let head: Vec<String> = v.iter().take(4).map(MetaValue::summary).collect();
                format!("[{}, …] ({} items)", head.join(", "), v.len())
            }
            MetaValue::Array(v) => {
                let all: Vec<String> = v.iter().map(MetaValue::summary).collect();
                format!("[{}]", all.join(", "))
            }
            MetaValue::Bool(b) => b.to_string(),
            MetaValue::F32(f) => f.to_string(),
            MetaValue::F64(f) => f.to_string(),
            other => other.as_f64().map(|f| f.to_string()).unwrap_or_default(),
        }
    }
}

/// Smallest encoded size of a value of type `ty`, used to bound array counts.
fn min_size(ty: u32) -> u64 {
    match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,  // u64 length, possibly empty
        9 => 12, // u32 type + u64 count
        _ => 8,
    }
}

/// Reads one value: `u32` type tag, then the payload.
pub(super) fn read_value<R: Read>(
    r: &mut ByteReader<R>,
    key: &str,
    depth: usize,
) -> Result<MetaValue> {
    let ty = r.u32(&format!("type of {key:?}"))?;
    read_typed(r, key, ty, depth)
}

fn read_typed<R: Read>(
    r: &mut ByteReader<R>,
    key: &str,
    ty: u32,
    depth: usize,
) -> Result<MetaValue> {
    Ok(match ty {
        0 => MetaValue::U8(r.u8(key)?),
        1 => MetaValue::I8(r.u8(key)? as i8),
        2 => MetaValue::U16(r.u16(key)?),
        3 => MetaValue::I16(r.u16(key)? as i16),
        4 => MetaValue::U32(r.u32(key)?),
        5 => MetaValue::I32(r.u32(key)? as i32),
        6 => MetaValue::F32(r.f32(key)?),
        7 => match r.u8(key)? {
            0 => MetaValue::Bool(false),
            1 => MetaValue::Bool(true),
            b => return Err(r.error(format!("{key:?}: bool must be 0 or 1, found {b}"))),
        },
        8 => MetaValue::String(r.string(key)?),
        9 => {
            if depth >= LIMITS.max_array_depth {
                return Err(r.error(format!(
                    "{key:?}: arrays nested deeper than {}",
                    LIMITS.max_array_depth
                )));
            }
            let elem_ty = r.u32(&format!("element type of {key:?}"))?;
            if elem_ty > 12 {
                return Err(r.error(format!("{key:?}: unknown array element type {elem_ty}")));
            }
            let n = r.count(&format!("length of array {key:?}"), LIMITS.max_array)?;
            r.check_fits(&format!("array {key:?}"), n as u64, min_size(elem_ty))?;
            let mut items = Vec::with_capacity(n);
            for _ in 0..n {
                items.push(read_typed(r, key, elem_ty, depth + 1)?);
            }
            MetaValue::Array(items)
        }
        10 => MetaValue::U64(r.u64(key)?),
        11 => MetaValue::I64(r.u64(key)? as i64),
        12 => MetaValue::F64(r.f64(key)?),
        other => return Err(r.error(format!("{key:?}: unknown value type {other}"))),
    })
}
