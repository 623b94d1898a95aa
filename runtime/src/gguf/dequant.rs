//! GGML tensor types and their dequantisation to `f32`.
//!
//! Block layouts follow ggml (`ggml-common.h`, `ggml-quants.c`): a block stores a scale (and for
//! `Q4_1`/`Q5_1` a minimum) as `f16`, then packed quants. `Q4_*`/`Q5_*` put element `j` of a block
//! in the low nibble of byte `j` and element `j + 16` in the high nibble; `Q5_*` keep the fifth
//! bit of element `i` in bit `i` of a little-endian `u32`. Every type is checked bit for bit
//! against gguf-py's dequantiser on real and seeded blocks (`fixtures/dequant_blocks.json`,
//! written by `tools/dequant_fixtures.py`).

use half::{bf16, f16};

/// Storage types kvplan can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4K,
    Q5K,
    Q6K,
    BF16,
}

impl GgmlType {
    /// Maps ggml's numeric type id; `None` for types kvplan does not read.
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::F32,
            1 => Self::F16,
            2 => Self::Q4_0,
            3 => Self::Q4_1,
            6 => Self::Q5_0,
            7 => Self::Q5_1,
            8 => Self::Q8_0,
            12 => Self::Q4K,
            13 => Self::Q5K,
            14 => Self::Q6K,
            30 => Self::BF16,
            _ => return None,
        })
    }

    /// ggml's numeric type id.
    pub fn id(self) -> u32 {
        match self {
            Self::F32 => 0,
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q4_1 => 3,
            Self::Q5_0 => 6,
            Self::Q5_1 => 7,
            Self::Q8_0 => 8,
            Self::Q4K => 12,
            Self::Q5K => 13,
            Self::Q6K => 14,
            Self::BF16 => 30,
        }
    }

    /// Elements per block.
    pub fn block_size(self) -> usize {
        match self {
            Self::F32 | Self::F16 | Self::BF16 => 1,
            Self::Q4_0 | Self::Q4_1 | Self::Q5_0 | Self::Q5_1 | Self::Q8_0 => 32,
            Self::Q4K | Self::Q5K | Self::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 => 18,
            Self::Q4_1 => 20,
            Self::Q5_0 => 22,
            Self::Q5_1 => 24,
            Self::Q8_0 => 34,
            Self::Q4K => 144,
            Self::Q5K => 176,
            Self::Q6K => 210,
        }
    }

    /// Bytes taken by `n` elements (`n` a multiple of the block size).
    pub fn row_bytes(self, n: u64) -> u64 {
        n / self.block_size() as u64 * self.block_bytes() as u64
    }

    /// Dequantises `n` elements from `bytes`.
    pub fn dequantize(self, bytes: &[u8], n: usize) -> Result<Vec<f32>, String> {
        let bs = self.block_size();
        if !n.is_multiple_of(bs) {
            return Err(format!(
                "{n} elements is not a multiple of the block size {bs}"
            ));
        }
        let need = n / bs * self.block_bytes();
        if bytes.len() != need {
            return Err(format!(
                "{self:?} data of {n} elements needs {need} bytes, found {}",
                bytes.len()
            ));
        }
        let mut out = vec![0f32; n];
        for (b, y) in bytes
            .chunks_exact(self.block_bytes())
            .zip(out.chunks_exact_mut(bs))
        {
            self.dequantize_block(b, y);
        }
        Ok(out)
    }

    /// Dequantises one block (`block_bytes()` bytes) into `y` (`block_size()` values). The
    /// caller checks both lengths; every value is the same as [`GgmlType::dequantize`]'s.
    #[inline(always)]
    pub fn dequantize_block(self, b: &[u8], y: &mut [f32]) {
        match self {
            Self::F32 => y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            Self::F16 => y[0] = f16::from_le_bytes([b[0], b[1]]).to_f32(),
            Self::BF16 => y[0] = bf16::from_le_bytes([b[0], b[1]]).to_f32(),
            Self::Q4_0 => q4_0(b, y),
            Self::Q4_1 => q4_1(b, y),
            Self::Q5_0 => q5_0(b, y),
            Self::Q5_1 => q5_1(b, y),
            Self::Q8_0 => q8_0(b, y),
            Self::Q4K => q4_k(b, y),
            Self::Q5K => q5_k(b, y),
            Self::Q6K => q6_k(b, y),
        }
    }
}

/// Every f16 as f32 (256 KiB, built once): a block's scales are read by table, as ggml does,
/// instead of a conversion call per block. The values are `half`'s conversions.
pub(crate) fn f16_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Vec<f32>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect())
}

#[inline(always)]
fn half_at(b: &[u8], i: usize) -> f32 {
    f16_table()[u16::from_le_bytes([b[i], b[i + 1]]) as usize]
}

/// `Q4_0`: `d: f16`, 16 bytes of nibbles; `x = (q − 8)·d`.
#[inline(always)]
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let (lo, hi) = y[..32].split_at_mut(16);
    for ((&q, l), h) in b[2..18].iter().zip(lo).zip(hi) {
        *l = ((q & 0x0F) as f32 - 8.0) * d;
        *h = ((q >> 4) as f32 - 8.0) * d;
    }
}

/// `Q4_1`: `d: f16`, `m: f16`, 16 bytes of nibbles; `x = q·d + m`.
#[inline(always)]
fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    let (lo, hi) = y[..32].split_at_mut(16);
    for ((&q, l), h) in b[4..20].iter().zip(lo).zip(hi) {
        *l = (q & 0x0F) as f32 * d + m;
        *h = (q >> 4) as f32 * d + m;
    }
}

/// The 5-bit quants of a `Q5_0`/`Q5_1` block: `qh` (`u32`, bit `i` = fifth bit of element `i`),
/// then 16 bytes of nibbles (element `j` low, `j + 16` high). Values `0..=31`.
#[inline(always)]
pub(crate) fn q5_quants(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let high = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = [0u8; 32];
    for (j, &byte) in qs.iter().enumerate() {
        let bit = |i: usize| (((high >> i) & 1) as u8) << 4;
        q[j] = (byte & 0x0F) | bit(j);
        q[j + 16] = (byte >> 4) | bit(j + 16);
    }
    q
}

/// `Q5_0`: `d: f16`, `qh: u32`, 16 bytes of nibbles; `x = (q − 16)·d`.
#[inline(always)]
fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    let q = q5_quants(&b[2..6], &b[6..22]);
    for (y, &q) in y[..32].iter_mut().zip(&q) {
        *y = (q as i32 - 16) as f32 * d;
    }
}

/// `Q5_1`: `d: f16`, `m: f16`, `qh: u32`, 16 bytes of nibbles; `x = q·d + m`.
#[inline(always)]
fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (half_at(b, 0), half_at(b, 2));
    let q = q5_quants(&b[4..8], &b[8..24]);
    for (y, &q) in y[..32].iter_mut().zip(&q) {
        *y = q as f32 * d + m;
    }
}

/// `Q8_0`: `d: f16`, 32 signed bytes; `x = q·d`.
#[inline(always)]
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 0);
    for (y, &q) in y[..32].iter_mut().zip(&b[2..34]) {
        *y = q as i8 as f32 * d;
    }
}

/// 6-bit scale and minimum `j` of a `Q4_K` super-block (ggml's `get_scale_min_k4`).
#[inline(always)]
fn scale_min_k4(j: usize, q: &[u8]) -> (f32, f32) {
    if j < 4 {
        ((q[j] & 63) as f32, (q[j + 4] & 63) as f32)
    } else {
        let d = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        let m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        (d as f32, m as f32)
    }
}

/// `Q4_K`: `d`, `dmin: f16`, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles.
#[inline(always)]
fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let scales = &b[4..16];
    for ((chunk, qs), y) in b[16..144]
        .chunks_exact(32)
        .enumerate()
        .zip(y[..256].chunks_exact_mut(64))
    {
        let (s1, m1) = scale_min_k4(2 * chunk, scales);
        let (s2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (a1, a2, b1, b2) = (d * s1, dmin * m1, d * s2, dmin * m2);
        let (lo, hi) = y.split_at_mut(32);
        for ((&q, l), h) in qs.iter().zip(lo).zip(hi) {
            *l = a1 * (q & 0x0F) as f32 - a2;
            *h = b1 * (q >> 4) as f32 - b2;
        }
    }
}

/// `Q5_K`: `d`, `dmin: f16`, 12 bytes of packed 6-bit scales/mins (as `Q4_K`), 32 bytes of high
/// bits, 128 bytes of nibbles. Sub-block `2c` takes the low nibbles of chunk `c` and high-bit plane
/// `2c` (bit `2c` of `qh[l]`), sub-block `2c + 1` the high nibbles and plane `2c + 1`.
#[inline(always)]
fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (half_at(b, 0), half_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    let mut subs = y[..256].chunks_exact_mut(32);
    for (chunk, qs) in b[48..176].chunks_exact(32).enumerate() {
        for (sub, shift) in [(2 * chunk, 0), (2 * chunk + 1, 4)] {
            let (sc, m) = scale_min_k4(sub, scales);
            let (scale, min) = (d * sc, dmin * m);
            let Some(y) = subs.next() else { return };
            for ((y, &q), &h) in y.iter_mut().zip(qs).zip(qh) {
                let q = ((q >> shift) & 0x0F) | (((h >> sub) & 1) << 4);
                *y = scale * q as f32 - min;
            }
        }
    }
}

/// `Q6_K`: 128 bytes low nibbles, 64 bytes high bits, 16 signed scales, `d: f16`.
#[inline(always)]
fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = half_at(b, 208);
    for half in 0..2 {
        let ql = &b[half * 64..half * 64 + 64];
        let qh = &b[128 + half * 32..128 + half * 32 + 32];
        let sc = &b[192 + half * 8..192 + half * 8 + 8];
        let y = &mut y[half * 128..half * 128 + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            let s = |k: usize| sc[is + k] as i8 as f32;
            y[l] = d * s(0) * q1 as f32;
            y[l + 32] = d * s(2) * q2 as f32;
            y[l + 64] = d * s(4) * q3 as f32;
            y[l + 96] = d * s(6) * q4 as f32;
        }
    }
}
