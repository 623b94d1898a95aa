//! Lazy GGUF reader (format versions 2 and 3).
//!
//! Opening a file reads the header, the metadata and the tensor table only; tensor data is read
//! on demand by [`GgufFile::tensor_f32`]. Every length read from the file is checked against a
//! named limit *and* against the bytes that remain before anything is allocated, so a corrupt or
//! hostile file gives an [`Error::Gguf`] naming the problem, never a panic or a huge allocation.
//!
//! Layout (little endian): magic `GGUF`, `u32` version, `u64` tensor count, `u64` metadata count,
//! metadata key/value pairs, tensor infos (name, `u32` n_dims, `u64` dims innermost first, `u32`
//! type, `u64` offset relative to the data section), padding to `general.alignment` (default 32),
//! then the data section.

mod dequant;
mod reader;
mod value;
mod writer;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use dequant::GgmlType;
pub(crate) use dequant::{f16_table, q5_quants};
use reader::{ByteReader, LIMITS};
pub use value::MetaValue;
pub use writer::GgufWriter;

use crate::error::{Error, Result};

/// The magic number at the start of every GGUF file (`GGUF` read as a little-endian `u32`).
const GGUF_MAGIC: u32 = 0x4655_4747;
/// Default alignment of the data section when `general.alignment` is absent.
const DEFAULT_ALIGNMENT: u64 = 32;

/// One entry of the tensor table.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions as GGUF stores them: innermost (contiguous) first.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ggml_type: GgmlType,
    /// Offset of the first byte, relative to the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Shape in row-major order (outermost first), as burn and PyTorch write it.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Size of the tensor's data in bytes.
    pub fn n_bytes(&self) -> u64 {
        self.ggml_type.row_bytes(self.n_elements())
    }
}

/// Where the file's bytes live.
#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Memory(Arc<[u8]>),
}

/// A parsed GGUF file: metadata and tensor table in memory, tensor data read on demand.
#[derive(Debug, Clone)]
pub struct GgufFile {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata, sorted by key.
    pub metadata: BTreeMap<String, MetaValue>,
    /// Tensor table in file order.
    pub tensors: Vec<TensorInfo>,
    data_offset: u64,
    source: Source,
    /// The whole file mapped, made on the first [`GgufFile::tensor_data`] of a file.
    mapped: OnceLock<Arc<memmap2::Mmap>>,
}

/// The bytes of one tensor where they lie: in the mapped file, in a file held in memory, or in
/// a buffer of their own; shared by clones and by [`TensorData::slice`]s without a copy.
#[derive(Clone)]
pub struct TensorData {
    backing: Backing,
    start: usize,
    len: usize,
}

#[derive(Clone)]
enum Backing {
    Mapped(Arc<memmap2::Mmap>),
    Shared(Arc<[u8]>),
    Owned(Arc<Vec<u8>>),
}

impl Backing {
    /// Every byte held.
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(m) => m,
            Backing::Shared(b) => b,
            Backing::Owned(v) => v,
        }
    }
}

impl TensorData {
    /// Bytes of their own.
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Self {
            backing: Backing::Owned(Arc::new(bytes)),
            start: 0,
            len,
        }
    }

    /// Bytes `from..from + len` of these, sharing them.
    ///
    /// # Panics
    /// When the range is not inside (a caller's bug: callers slice whole rows they counted).
    pub fn slice(&self, from: usize, len: usize) -> Self {
        assert!(
            from + len <= self.len,
            "slice {from}+{len} of {} bytes",
            self.len
        );
        Self {
            backing: self.backing.clone(),
            start: self.start + from,
            len,
        }
    }

    /// Whether the bytes are read from the mapped file in place.
    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped(_))
    }
}

impl From<Vec<u8>> for TensorData {
    fn from(bytes: Vec<u8>) -> Self {
        Self::owned(bytes)
    }
}

impl std::ops::Deref for TensorData {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.backing.bytes()[self.start..self.start + self.len]
    }
}

impl std::fmt::Debug for TensorData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TensorData({} bytes, mapped {})",
            self.len,
            self.is_mapped()
        )
    }
}

impl GgufFile {
    /// Opens `path` and reads its header, metadata and tensor table.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let io_err = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io_err)?;
        let len = file.metadata().map_err(io_err)?.len();
        let context = path.display().to_string();
        let mut reader = ByteReader::new(BufReader::new(file), len, context);
        Self::parse(&mut reader, Source::File(path))
    }

    /// Parses a GGUF file held in memory (used by tests and tools).
    pub fn from_bytes(bytes: impl Into<Arc<[u8]>>) -> Result<Self> {
        let bytes: Arc<[u8]> = bytes.into();
        let mut reader = ByteReader::new(
            std::io::Cursor::new(bytes.clone()),
            bytes.len() as u64,
            "<memory>".to_string(),
        );
        Self::parse(&mut reader, Source::Memory(bytes))
    }

    fn parse<R: Read>(reader: &mut ByteReader<R>, source: Source) -> Result<Self> {
        let magic = reader.u32("magic")?;
        if magic != GGUF_MAGIC {
            return Err(reader.error(format!(
                "bad magic: expected \"GGUF\" (0x{GGUF_MAGIC:08x}), found 0x{magic:08x}"
            )));
        }
        let version = reader.u32("version")?;
        if !(2..=3).contains(&version) {
            return Err(reader.error(format!(
                "unsupported version {version}: kvplan reads GGUF v2 and v3"
            )));
        }
        let n_tensors = reader.count("tensor count", LIMITS.max_tensors)?;
        let n_kv = reader.count("metadata count", LIMITS.max_metadata)?;
        // A key/value pair takes at least 13 bytes (key length, type, one byte of value), a
        // tensor info 32 (name length, n_dims, one dim, type, offset).
        reader.check_fits("metadata", n_kv as u64, 13)?;
        let mut metadata = BTreeMap::new();
        for i in 0..n_kv {
            let key = reader.string(&format!("metadata key #{i}"))?;
            let value = value::read_value(reader, &key, 0)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(reader.error(format!("duplicate metadata key {key:?}")));
            }
        }
        reader.check_fits("tensor table", n_tensors as u64, 32)?;
        let mut tensors = Vec::with_capacity(n_tensors);
        for i in 0..n_tensors {
            tensors.push(read_tensor_info(reader, i)?);
        }
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= 1 << 16 => a,
                _ => {
                    return Err(reader.error(format!(
                        "general.alignment must be a power of two up to 65536, found {v:?}"
                    )))
                }
            },
        };
        let data_offset = reader.position().div_ceil(alignment) * alignment;
        let file = Self {
            version,
            metadata,
            tensors,
            data_offset,
            source,
            mapped: OnceLock::new(),
        };
        file.check_tensor_ranges(reader.len(), alignment, reader)?;
        Ok(file)
    }

    fn check_tensor_ranges<R: Read>(
        &self,
        file_len: u64,
        alignment: u64,
        reader: &ByteReader<R>,
    ) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for t in &self.tensors {
            if !seen.insert(t.name.as_str()) {
                return Err(reader.error(format!("duplicate tensor name {:?}", t.name)));
            }
            if t.offset % alignment != 0 {
                return Err(reader.error(format!(
                    "tensor {:?}: data offset {} is not a multiple of the alignment {alignment}",
                    t.name, t.offset
                )));
            }
            let end = self
                .data_offset
                .checked_add(t.offset)
                .and_then(|s| s.checked_add(t.n_bytes()));
            match end {
                Some(end) if end <= file_len => {}
                _ => {
                    return Err(reader.error(format!(
                        "tensor {:?}: data [{} + {}, {} bytes) runs past the end of the file ({file_len} bytes)",
                        t.name,
                        self.data_offset,
                        t.offset,
                        t.n_bytes()
                    )))
                }
            }
        }
        Ok(())
    }

    /// Looks up a tensor's info by name.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Reads the raw bytes of tensor `name` into a buffer of their own (through
    /// [`Self::tensor_data`]: one lookup and one way in to the file).
    pub fn tensor_bytes(&self, name: &str) -> Result<Vec<u8>> {
        Ok(self.tensor_data(name)?.to_vec())
    }

    /// The stored bytes of tensor `name` without a copy: a file's are memory-mapped (the whole
    /// file once, on the first call; pages are read as the weights are first used and stay
    /// shared with the page cache), a file held in memory's are shared.
    ///
    /// The mapping assumes the file is not changed while the model is loaded (as llama.cpp's
    /// `llama_mmap` does); a file replaced by a rename keeps the old bytes mapped.
    pub fn tensor_data(&self, name: &str) -> Result<TensorData> {
        let info = self.tensor_info(name).ok_or_else(|| Error::Gguf {
            context: self.context(),
            message: format!("no tensor named {name:?}"),
        })?;
        let start = (self.data_offset + info.offset) as usize;
        let len = info.n_bytes() as usize;
        let backing = match &self.source {
            Source::Memory(bytes) => Backing::Shared(bytes.clone()),
            Source::File(path) => {
                let map = match self.mapped.get() {
                    Some(m) => m.clone(),
                    None => {
                        let io_err = |source| Error::Io {
                            path: path.clone(),
                            source,
                        };
                        let file = File::open(path).map_err(io_err)?;
                        // SAFETY: the map is read-only; kvplan never writes the file, and a
                        // concurrent writer is outside what the loader supports (see above).
                        let m = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
                        self.mapped.get_or_init(|| Arc::new(m)).clone()
                    }
                };
                Backing::Mapped(map)
            }
        };
        let have = backing.bytes().len();
        if start + len > have {
            return Err(Error::Gguf {
                context: self.context(),
                message: format!(
                    "tensor {name:?}: bytes {start}..{} lie past the file's end ({have} bytes)",
                    start + len
                ),
            });
        }
        Ok(TensorData {
            backing,
            start,
            len,
        })
    }

    /// Reads tensor `name` and dequantises it to `f32`, in GGUF order (innermost dimension
    /// contiguous), i.e. row-major for [`TensorInfo::shape`].
    pub fn tensor_f32(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let bytes = self.tensor_bytes(name)?;
        // tensor_bytes succeeded, so the info exists.
        let info = self.tensor_info(name).ok_or_else(|| Error::Gguf {
            context: self.context(),
            message: format!("no tensor named {name:?}"),
        })?;
        let data = info
            .ggml_type
            .dequantize(&bytes, info.n_elements() as usize)
            .map_err(|message| Error::Gguf {
                context: self.context(),
                message: format!("tensor {name:?}: {message}"),
            })?;
        Ok((data, info.shape()))
    }

    /// Metadata value of `key`, or an error naming the key.
    pub fn meta(&self, key: &str) -> Result<&MetaValue> {
        self.metadata
            .get(key)
            .ok_or_else(|| Error::Metadata(format!("cannot find {key} in metadata")))
    }

    /// Metadata value of `key` as an unsigned integer.
    pub fn meta_u64(&self, key: &str) -> Result<u64> {
        let v = self.meta(key)?;
        v.as_u64()
            .ok_or_else(|| Error::Metadata(format!("{key}: expected an integer, found {v:?}")))
    }

    /// Metadata value of `key` as a float.
    pub fn meta_f64(&self, key: &str) -> Result<f64> {
        let v = self.meta(key)?;
        v.as_f64()
            .ok_or_else(|| Error::Metadata(format!("{key}: expected a number, found {v:?}")))
    }

    /// Metadata value of `key` as a string.
    pub fn meta_str(&self, key: &str) -> Result<&str> {
        let v = self.meta(key)?;
        v.as_str()
            .ok_or_else(|| Error::Metadata(format!("{key}: expected a string, found {v:?}")))
    }

    fn context(&self) -> String {
        match &self.source {
            Source::File(p) => p.display().to_string(),
            Source::Memory(_) => "<memory>".to_string(),
        }
    }
}

fn read_tensor_info<R: Read>(reader: &mut ByteReader<R>, index: usize) -> Result<TensorInfo> {
    let name = reader.string(&format!("tensor #{index} name"))?;
    let n_dims = reader.u32(&format!("tensor {name:?} n_dims"))?;
    if n_dims == 0 || n_dims as usize > LIMITS.max_dims {
        return Err(reader.error(format!(
            "tensor {name:?}: {n_dims} dimensions, expected 1 to {}",
            LIMITS.max_dims
        )));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut n_elements: u64 = 1;
    for d in 0..n_dims {
        let dim = reader.u64(&format!("tensor {name:?} dim {d}"))?;
        // A zero dimension holds nothing, and would let the other dimensions be anything: their
        // product in another order (a reader's row count, a shape's product) could overflow
        // though the count read here is 0. With every dimension ≥ 1 the running product only
        // grows, so every order stays within the limit checked below. (Found by fuzzing.)
        if dim == 0 {
            return Err(reader.error(format!(
                "tensor {name:?}: dimension {d} is 0, expected at least 1"
            )));
        }
        n_elements = n_elements
            .checked_mul(dim)
            .filter(|&n| n <= LIMITS.max_tensor_elements)
            .ok_or_else(|| {
                reader.error(format!(
                    "tensor {name:?}: element count exceeds the limit of {}",
                    LIMITS.max_tensor_elements
                ))
            })?;
        dims.push(dim);
    }
    let raw_type = reader.u32(&format!("tensor {name:?} type"))?;
    let ggml_type = GgmlType::from_u32(raw_type)
        .ok_or_else(|| reader.error(format!("tensor {name:?}: unknown tensor type {raw_type}")))?;
    let block = ggml_type.block_size() as u64;
    if dims[0] % block != 0 {
        return Err(reader.error(format!(
            "tensor {name:?}: innermost dimension {} is not a multiple of the {ggml_type:?} block size {block}",
            dims[0]
        )));
    }
    let offset = reader.u64(&format!("tensor {name:?} offset"))?;
    Ok(TensorInfo {
        name,
        dims,
        ggml_type,
        offset,
    })
}

#[cfg(test)]
mod tests;
