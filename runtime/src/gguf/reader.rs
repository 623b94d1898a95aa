//! Bounds-checked little-endian reads for the GGUF parser.
//!
//! Every count and length is checked against a named limit and against the bytes that remain in
//! the file before anything is allocated.

use std::io::Read;

use crate::error::{Error, Result};

/// Sanity limits on counts read from a GGUF header.
pub(crate) struct Limits {
    /// Most tensors a file may declare.
    pub max_tensors: u64,
    /// Most metadata entries a file may declare.
    pub max_metadata: u64,
    /// Longest string (key or value), in bytes.
    pub max_string: u64,
    /// Most elements of one metadata array.
    pub max_array: u64,
    /// Deepest nesting of arrays inside arrays.
    pub max_array_depth: usize,
    /// Most dimensions of one tensor.
    pub max_dims: usize,
    /// Most elements of one tensor.
    pub max_tensor_elements: u64,
}

pub(crate) const LIMITS: Limits = Limits {
    max_tensors: 1 << 16,
    max_metadata: 1 << 16,
    max_string: 1 << 20,
    max_array: 1 << 24,
    max_array_depth: 4,
    max_dims: 4,
    max_tensor_elements: 1 << 36,
};

/// A reader that knows its position and the total length of the source.
pub(crate) struct ByteReader<R> {
    inner: R,
    pos: u64,
    len: u64,
    context: String,
}

impl<R: Read> ByteReader<R> {
    pub fn new(inner: R, len: u64, context: String) -> Self {
        Self {
            inner,
            pos: 0,
            len,
            context,
        }
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    /// An error located at the current offset.
    pub fn error(&self, message: String) -> Error {
        Error::Gguf {
            context: format!("{} (offset {})", self.context, self.pos),
            message,
        }
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut buf = [0u8; N];
        if self.remaining() < N as u64 {
            return Err(self.error(format!(
                "truncated: {what} needs {N} bytes, {} left",
                self.remaining()
            )));
        }
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| self.error(format!("truncated while reading {what}: {e}")))?;
        self.pos += N as u64;
        Ok(buf)
    }

    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.bytes::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.bytes(what)?))
    }
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }
    pub fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_le_bytes(self.bytes(what)?))
    }
    pub fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.bytes(what)?))
    }

    /// Reads a `u64` count and checks it against `limit`.
    pub fn count(&mut self, what: &str, limit: u64) -> Result<usize> {
        let n = self.u64(what)?;
        if n > limit {
            return Err(self.error(format!("{what} {n} exceeds the limit of {limit}")));
        }
        Ok(n as usize)
    }

    /// Checks that `n` items of at least `min_size` bytes each can still follow.
    pub fn check_fits(&self, what: &str, n: u64, min_size: u64) -> Result<()> {
        match n.checked_mul(min_size) {
            Some(need) if need <= self.remaining() => Ok(()),
            _ => Err(self.error(format!(
                "truncated: {what} declares {n} items of at least {min_size} bytes, only {} bytes left",
                self.remaining()
            ))),
        }
    }

    /// Reads a GGUF string: `u64` length, then UTF-8 bytes.
    pub fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u64(what)?;
        if n > LIMITS.max_string {
            return Err(self.error(format!(
                "{what}: string length {n} exceeds the limit of {}",
                LIMITS.max_string
            )));
        }
        self.check_fits(what, n, 1)?;
        let mut buf = vec![0u8; n as usize];
        self.inner
            .read_exact(&mut buf)
            .map_err(|e| self.error(format!("truncated while reading {what}: {e}")))?;
        self.pos += n;
        String::from_utf8(buf).map_err(|_| self.error(format!("{what}: string is not UTF-8")))
    }
}
