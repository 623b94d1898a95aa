//! SpindleKV's cosine codebook (`docs/papers/spindlekv.md` §3.4, eq. 8–14, Algorithm 1).
//!
//! Magnitudes `m = |γ|` are stored, the unit vectors grouped greedily: the adjacency
//! `G = [cos > θ]` (diagonal included) is a bitset, degrees are eq. 10's sums of `G` (Algorithm 1
//! as printed sums `S` and rebuilds them each round, O(N³)); the vertex of highest degree becomes
//! a code, it and its neighbours reference it, and their removal updates the degrees
//! incrementally. At most [`MAX_GROUP`] entries are considered at once; a later group first
//! merges into existing codes. Identical directions always share a code: their cosine is exactly
//! 1 (§3.4: "the cosine similarity of the unfolded components is clearly 1"), which rounding of
//! the dot product could otherwise keep apart at θ = 1.
//!
//! Cosines are computed in blocks, as matrix products of unit vectors (a group's entries against
//! the existing codes, and against each other), so building a codebook of N entries costs one
//! `N × codes × dim` product rather than N scans of scalar dot products. A direction that
//! repeats a code bit for bit (the GQA repeat enters every kept token once per query head) is
//! found in a hash index of the codes instead; a round's vertex of highest degree comes from a
//! heap, and degrees drop along the set bits of the adjacency. None of this changes a code or a
//! reference: a test holds `extend` to Algorithm 1 taken one entry at a time.
//!
//! The codes ([`Codebook`]) are held apart from the entries that reference them ([`Entries`]: a
//! code and a magnitude per entry), so several heads can share one codebook — SpindleKV's GQA
//! repeat variant keeps one per layer for all its query heads.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Most entries one codebook round considers at once (its bitset has `MAX_GROUP²` bits).
pub const MAX_GROUP: usize = 1024;

/// Cosine codebook: unit code vectors at threshold θ.
#[derive(Debug, Clone, PartialEq)]
pub struct Codebook {
    dim: usize,
    theta: f32,
    /// `[code][dim]` unit vectors.
    pub codes: Vec<f32>,
}

/// Entries referencing a [`Codebook`]: each entry's code (eq. 12) and magnitude (eq. 8).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Entries {
    /// Code of each entry.
    pub refs: Vec<u32>,
    /// Magnitude of each entry.
    pub mags: Vec<f32>,
}

impl Entries {
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Bytes held: a 4-byte reference and a 4-byte magnitude per entry.
    pub fn bytes(&self) -> usize {
        self.refs.len() * 4 + self.mags.len() * 4
    }

    /// Appends entries `range` of `other`.
    pub fn extend_from(&mut self, other: &Entries, range: std::ops::Range<usize>) {
        self.refs.extend_from_slice(&other.refs[range.clone()]);
        self.mags.extend_from_slice(&other.mags[range]);
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Turns `v` into its unit vector in place and returns its magnitude; a zero vector stays zero
/// with magnitude 0.
fn normalise(v: &mut [f32]) -> f32 {
    let m = dot(v, v).sqrt();
    if m > 0.0 {
        v.iter_mut().for_each(|x| *x /= m);
    }
    m
}

/// Dot products of unit vectors closer to 1 than this are checked for identical directions.
const NEAR_ONE: f32 = 0.999;

/// Entries from which one [`Codebook::extend`] call indexes the codes' bit patterns.
const INDEX_FROM: usize = 64;

/// A vector's bit pattern with −0 as +0 (`+ 0.0` turns −0 into +0), so equal keys are what `==`
/// on floats equates: the key of a direction among a group's entries and in the code index.
fn key(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| (x + 0.0).to_bits()).collect()
}

/// The indices from `from` on where `xs` exceeds `floor`, in order; blocks of 16 with none are
/// skipped in one vector comparison.
fn above(xs: &[f32], floor: f32, from: usize) -> impl Iterator<Item = usize> + '_ {
    let start = from.min(xs.len());
    xs[start..]
        .chunks(16)
        .enumerate()
        .filter(move |(_, block)| block.iter().fold(false, |any, &x| any | (x > floor)))
        .flat_map(move |(b, block)| {
            let at = start + b * 16;
            block
                .iter()
                .enumerate()
                .filter(move |&(_, &x)| x > floor)
                .map(move |(j, _)| at + j)
        })
}

/// The positions of the set bits of a bitset row, in order.
fn ones(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut bits = word;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                w * 64 + j
            })
        })
    })
}

/// Cosine of unit vectors `a` and `b` whose dot product is `dot`: identical directions rank
/// above any cosine, so they merge at every θ ≤ 1 whatever the rounding of their dot product.
fn cosine(dot: f32, a: &[f32], b: &[f32]) -> f32 {
    if dot > NEAR_ONE && a == b {
        f32::INFINITY
    } else {
        dot
    }
}

/// Dot products `[i][j]` of the rows of `a` (`[m][dim]`) with those of `b` (`[n][dim]`): the CPU
/// backend's gemm kernel when it is built, else one dot product at a time.
#[cfg(not(feature = "flex"))]
fn dots(a: &[f32], b: &[f32], dim: usize) -> Vec<f32> {
    a.chunks_exact(dim)
        .flat_map(|x| b.chunks_exact(dim).map(move |y| dot(x, y)))
        .collect()
}

/// Dot products `[i][j]` of the rows of `a` (`[m][dim]`) with those of `b` (`[n][dim]`).
#[cfg(feature = "flex")]
fn dots(a: &[f32], b: &[f32], dim: usize) -> Vec<f32> {
    use crate::model::gemm::{gemm_row_major, Gemm};
    let (m, n) = (a.len() / dim, b.len() / dim);
    let mut out = vec![0.0; m * n];
    if m * n > 0 {
        gemm_row_major(Gemm { m, n, k: dim }, &mut out, a, b, (dim as isize, 1));
    }
    out
}

impl Codebook {
    /// An empty codebook of `dim`-vectors at threshold `theta`.
    pub fn new(dim: usize, theta: f32) -> Self {
        Self {
            dim,
            theta,
            codes: Vec::new(),
        }
    }

    /// Number of codes.
    pub fn len(&self) -> usize {
        self.codes.len() / self.dim
    }

    /// True when no code exists.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    fn code(&self, c: usize) -> &[f32] {
        &self.codes[c * self.dim..(c + 1) * self.dim]
    }

    /// The existing code of highest cosine above θ with unit vector `u`, whose dot products
    /// with the codes are `dots` (ties: the first code).
    fn best(&self, u: &[f32], dots: &[f32]) -> Option<usize> {
        let mut best: Option<(usize, f32)> = None;
        // `cosine` is the dot product itself unless it exceeds `NEAR_ONE`: at or below θ it
        // cannot be chosen.
        for c in above(dots, self.theta.min(NEAR_ONE), 0) {
            let s = cosine(dots[c], self.code(c), u);
            if s > self.theta && best.is_none_or(|(_, b)| s > b) {
                best = Some((c, s));
            }
        }
        best.map(|(c, _)| c)
    }

    /// The bit patterns of the codes (`+ 0.0` as in [`Self::extend`]'s keys), to find the code
    /// a unit vector repeats exactly.
    fn index(&self) -> HashMap<Vec<u32>, u32> {
        self.codes
            .chunks_exact(self.dim)
            .enumerate()
            .map(|(c, v)| (key(v), c as u32))
            .collect()
    }

    /// Adds entries (`rows` of `dim` floats), appending their references and magnitudes to
    /// `out`: groups of at most [`MAX_GROUP`]; in each, entries close to an existing code merge
    /// into it (the code vector is unchanged), the others are grouped greedily (eq. 9–13).
    ///
    /// Entries of one direction (bit-identical unit vectors: under the GQA repeat every token a
    /// group's query heads all keep comes once per head) are handled once, weighted by their
    /// count: they always share a code (their cosine is exactly 1), and in eq. 10's degrees each
    /// still counts once per entry, so the codes and references are those of the entries taken
    /// one by one.
    ///
    /// A direction that repeats an existing code bit for bit takes that code without its dot
    /// products: its cosine with it is exactly 1, ranked above every other (codes are distinct
    /// directions, and a unit vector's dot product with itself is 1 up to rounding, above
    /// [`NEAR_ONE`]), which is what [`Self::best`] would choose. Large calls (the layer's
    /// entries after prefill, where the GQA repeat enters each kept token once per query head)
    /// look them up in an index of the codes; decode's calls of one entry per head do not.
    pub fn extend(&mut self, rows: &[f32], out: &mut Entries) {
        let d = self.dim;
        let mut index = (rows.len() / d.max(1) >= INDEX_FROM).then(|| self.index());
        for group in rows.chunks(MAX_GROUP * self.dim) {
            // The group's distinct directions in order of first appearance, their counts, and
            // the direction of each entry.
            let mut all = group.to_vec();
            for v in all.chunks_exact_mut(d) {
                out.mags.push(normalise(v));
            }
            let bits = key(&all);
            let mut units: Vec<f32> = Vec::with_capacity(group.len());
            // Each distinct direction's bit pattern, for the code index.
            let mut unit_keys: Vec<&[u32]> = Vec::new();
            let mut weights: Vec<usize> = Vec::new();
            let mut of_entry: Vec<usize> = Vec::with_capacity(group.len() / d);
            let mut seen: HashMap<&[u32], usize> = HashMap::with_capacity(group.len() / d);
            for (u, key) in all.chunks_exact(d).zip(bits.chunks_exact(d)) {
                let next = weights.len();
                let i = *seen.entry(key).or_insert(next);
                if i == next {
                    units.extend_from_slice(u);
                    unit_keys.push(key);
                    weights.push(0);
                }
                weights[i] += 1;
                of_entry.push(i);
            }
            let mut code_of: Vec<u32> = vec![u32::MAX; weights.len()];
            // The directions an existing code repeats exactly, then the others' products.
            let mut asked: Vec<usize> = Vec::with_capacity(weights.len());
            for (i, u) in units.chunks_exact(d).enumerate() {
                let known = index
                    .as_ref()
                    .filter(|_| dot(u, u) > 0.5)
                    .and_then(|index| index.get(unit_keys[i]));
                match known {
                    Some(&c) => code_of[i] = c,
                    None => asked.push(i),
                }
            }
            let asked_units: Vec<f32> = asked
                .iter()
                .flat_map(|&i| units[i * d..(i + 1) * d].iter().copied())
                .collect();
            let codes = self.len();
            let to_codes = dots(&asked_units, &self.codes, d);
            let mut fresh: Vec<usize> = Vec::new();
            for (a, &i) in asked.iter().enumerate() {
                let u = &units[i * d..(i + 1) * d];
                match self.best(u, &to_codes[a * codes..(a + 1) * codes]) {
                    Some(c) => code_of[i] = c as u32,
                    None => fresh.push(i),
                }
            }
            let fresh_units: Vec<f32> = fresh
                .iter()
                .flat_map(|&i| units[i * d..(i + 1) * d].iter().copied())
                .collect();
            let fresh_weights: Vec<usize> = fresh.iter().map(|&i| weights[i]).collect();
            let first_new = self.len();
            let assigned = self.group_greedily(&fresh_units, &fresh_weights);
            for (&i, c) in fresh.iter().zip(assigned) {
                code_of[i] = c;
            }
            if let Some(index) = index.as_mut() {
                for c in first_new..self.len() {
                    index.insert(key(self.code(c)), c as u32);
                }
            }
            out.refs.extend(of_entry.iter().map(|&i| code_of[i]));
        }
    }

    /// Eq. 9–13 over distinct unit vectors `units` (`[n][dim]`), each standing for `weights`
    /// entries, with a bitset adjacency and incrementally updated degrees (a vertex's degree:
    /// the entries adjacent to it, itself included); returns each vector's code.
    fn group_greedily(&mut self, units: &[f32], weights: &[usize]) -> Vec<u32> {
        let d = self.dim;
        let n = weights.len();
        let unit_of = |i: usize| &units[i * d..(i + 1) * d];
        let gram = dots(units, units, d);
        let words = n.div_ceil(64);
        let mut adj = vec![0u64; n * words];
        let floor = self.theta.min(NEAR_ONE);
        for i in 0..n {
            adj[i * words + i / 64] |= 1 << (i % 64);
            for j in above(&gram[i * n..(i + 1) * n], floor, i + 1) {
                if cosine(gram[i * n + j], unit_of(i), unit_of(j)) > self.theta {
                    adj[i * words + j / 64] |= 1 << (j % 64);
                    adj[j * words + i / 64] |= 1 << (i % 64);
                }
            }
        }
        let row = |i: usize| &adj[i * words..(i + 1) * words];
        let mut degree: Vec<usize> = (0..n)
            .map(|i| ones(row(i)).map(|j| weights[j]).sum())
            .collect();
        // The alive vertex of highest degree, lowest index among equals: a heap of (degree,
        // vertex) where an entry whose vertex is gone or whose degree has since dropped is
        // stale (degrees only drop; each drop pushes the new one).
        let mut heap: BinaryHeap<(usize, Reverse<usize>)> = degree
            .iter()
            .enumerate()
            .map(|(i, &g)| (g, Reverse(i)))
            .collect();
        let mut code_of = vec![u32::MAX; n];
        let mut alive = vec![true; n];
        while let Some((g, Reverse(iota))) = heap.pop() {
            if !alive[iota] || degree[iota] != g {
                continue;
            }
            let code = self.len() as u32;
            self.codes.extend_from_slice(unit_of(iota));
            let members: Vec<usize> = ones(row(iota)).filter(|&j| alive[j]).collect();
            for &j in &members {
                alive[j] = false;
                code_of[j] = code;
            }
            for &j in &members {
                for k in ones(row(j)) {
                    if alive[k] {
                        degree[k] -= weights[j];
                        heap.push((degree[k], Reverse(k)));
                    }
                }
            }
        }
        code_of
    }

    /// Eq. 14: the vectors of `entries`, `C[r]·m`, as `[entries][dim]`.
    pub fn reconstruct(&self, entries: &Entries) -> Vec<f32> {
        let mut out = Vec::with_capacity(entries.len() * self.dim);
        for (&r, &m) in entries.refs.iter().zip(&entries.mags) {
            out.extend(self.code(r as usize).iter().map(|x| x * m));
        }
        out
    }

    /// Bytes of the codes: codes × dim × 4 (the entries referencing them count apart).
    pub fn bytes(&self) -> usize {
        self.codes.len() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(deg: f32, m: f32) -> [f32; 2] {
        let r = deg.to_radians();
        [m * r.cos(), m * r.sin()]
    }

    /// Algorithm 1 taken one entry at a time, as printed (degrees recomputed every round, scalar
    /// cosines), over the same groups of [`MAX_GROUP`] entries: the reference for `extend`'s
    /// weighted directions, code index, heap and bitset.
    fn one_by_one(rows: &[f32], dim: usize, theta: f32) -> (Vec<f32>, Vec<u32>) {
        let mut codes: Vec<Vec<f32>> = Vec::new();
        let mut refs = Vec::new();
        for group in rows.chunks(MAX_GROUP * dim) {
            let units: Vec<Vec<f32>> = group
                .chunks_exact(dim)
                .map(|v| {
                    let mut u = v.to_vec();
                    normalise(&mut u);
                    u
                })
                .collect();
            let mut code_of = vec![u32::MAX; units.len()];
            let mut fresh = Vec::new();
            for (i, u) in units.iter().enumerate() {
                let best = codes
                    .iter()
                    .enumerate()
                    .map(|(c, code)| (c, cosine(dot(u, code), code, u)))
                    .filter(|&(_, s)| s > theta)
                    .fold(None, |b: Option<(usize, f32)>, (c, s)| match b {
                        Some((_, bs)) if bs >= s => b,
                        _ => Some((c, s)),
                    });
                match best {
                    Some((c, _)) => code_of[i] = c as u32,
                    None => fresh.push(i),
                }
            }
            let linked = |a: usize, b: usize| {
                a == b || cosine(dot(&units[a], &units[b]), &units[a], &units[b]) > theta
            };
            let mut alive = fresh.clone();
            while !alive.is_empty() {
                let degree = |a: usize| alive.iter().filter(|&&b| linked(a, b)).count();
                let iota = *alive
                    .iter()
                    .fold(None, |b: Option<&usize>, a| match b {
                        Some(b) if degree(*b) >= degree(*a) => Some(b),
                        _ => Some(a),
                    })
                    .expect("alive");
                let code = codes.len() as u32;
                codes.push(units[iota].clone());
                alive.retain(|&j| {
                    let member = linked(iota, j);
                    if member {
                        code_of[j] = code;
                    }
                    !member
                });
            }
            refs.extend(code_of);
        }
        (codes.concat(), refs)
    }

    #[test]
    fn large_calls_match_algorithm_one_taken_entry_by_entry() {
        // 120 directions with small integer components, none at a cosine within 1e-3 of θ of
        // another (so rounding cannot decide a link), drawn 2,600 times with magnitudes 1–4
        // (bit-identical repeats, and scaled copies whose unit vectors differ in the last bit):
        // three groups, later ones repeating the codes of earlier ones.
        let (dim, theta) = (4, 0.95);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let unit = |v: &[f32]| {
            let mut u = v.to_vec();
            normalise(&mut u);
            u
        };
        let mut dirs: Vec<Vec<f32>> = Vec::new();
        while dirs.len() < 120 {
            let v: Vec<f32> = (0..dim).map(|_| next(7) as f32 - 3.0).collect();
            let u = unit(&v);
            let clear = dirs
                .iter()
                .all(|w| (dot(&u, &unit(w)) - theta).abs() > 1e-3 && dot(&u, &unit(w)) < 0.9999);
            if dot(&v, &v) > 0.0 && clear {
                dirs.push(v);
            }
        }
        let rows: Vec<f32> = (0..2600)
            .flat_map(|_| {
                let (d, m) = (next(120) as usize, 1 + next(4));
                dirs[d]
                    .iter()
                    .map(move |x| x * m as f32)
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut cb = Codebook::new(dim, theta);
        let mut e = Entries::default();
        cb.extend(&rows, &mut e);
        let (codes, refs) = one_by_one(&rows, dim, theta);
        assert_eq!(e.refs, refs);
        assert_eq!(cb.codes, codes);
        assert!(cb.len() < 120, "{} codes: some directions merged", cb.len());
    }

    #[test]
    fn greedy_codebook_by_degree_with_known_cosines() {
        // θ = 0.95. a = 0°, b = 10°, c = 20° (magnitude 3), d = 90°, e = 90° (magnitude 2),
        // f = 140°. cos(a,b) = cos(b,c) = cos 10° = .985 > θ; cos(a,c) = cos 20° = .940 < θ;
        // cos(d,e) = 1; f is alone. Degrees (self included): a 2, b 3, c 2, d 2, e 2, f 1.
        // Round 1: b (degree 3) → code 0 for a, b, c. Round 2: d (ties with e, first) → code 1
        // for d, e. Round 3: f → code 2.
        let rows: Vec<f32> = [
            at(0.0, 1.0),
            at(10.0, 1.0),
            at(20.0, 3.0),
            at(90.0, 1.0),
            at(90.0, 2.0),
            at(140.0, 1.0),
        ]
        .concat();
        let mut cb = Codebook::new(2, 0.95);
        let mut e = Entries::default();
        cb.extend(&rows, &mut e);
        assert_eq!(e.refs, vec![0, 0, 0, 1, 1, 2]);
        assert_eq!(cb.len(), 3);
        // Eq. 14: c comes back as b's direction at c's magnitude; e exactly.
        let r = cb.reconstruct(&e);
        let b = at(10.0, 3.0);
        assert!(
            (r[4] - b[0]).abs() < 1e-5 && (r[5] - b[1]).abs() < 1e-5,
            "{r:?}"
        );
        assert!(r[8].abs() < 1e-6 && (r[9] - 2.0).abs() < 1e-6);
        // Decode: 15° (cos 5° with b) merges into code 0 without moving it; 180° adds code 3.
        let before = cb.codes.clone();
        cb.extend(&at(15.0, 2.0), &mut e);
        assert_eq!((e.refs[6], &cb.codes), (0, &before));
        cb.extend(&at(180.0, 1.0), &mut e);
        assert_eq!((e.refs[7], cb.len()), (3, 4));
        // 4 codes × 2 dims × 4 bytes; 8 entries × (reference 4 + magnitude 4).
        assert_eq!((cb.bytes(), e.bytes()), (32, 64));
    }

    #[test]
    fn repeated_entries_count_once_each_in_the_degrees() {
        // θ = 0.95 on a chain x = 0°, y = 10°, z = 20°, w = 30° (neighbours 10° apart: cos 10° =
        // .985 > θ; 20° apart: .940 < θ). Once each, degrees x 2, y 3, z 3, w 2: y wins the tie
        // (first) and takes x, y, z; w is alone. With w entered twice (as the GQA repeat enters
        // a token every query head keeps), eq. 10 counts both: z has degree 4 (y, z, w, w) and
        // takes y, z and both w; x is alone.
        let once: Vec<f32> = [at(0.0, 1.0), at(10.0, 1.0), at(20.0, 1.0), at(30.0, 1.0)].concat();
        let mut cb = Codebook::new(2, 0.95);
        let mut e = Entries::default();
        cb.extend(&once, &mut e);
        assert_eq!(e.refs, vec![0, 0, 0, 1]);
        let twice: Vec<f32> = [once.clone(), at(30.0, 1.0).to_vec()].concat();
        let mut cb = Codebook::new(2, 0.95);
        let mut e = Entries::default();
        cb.extend(&twice, &mut e);
        assert_eq!(e.refs, vec![1, 0, 0, 0, 0]);
        let z = at(20.0, 1.0);
        assert!((cb.codes[0] - z[0]).abs() < 1e-6 && (cb.codes[1] - z[1]).abs() < 1e-6);
        assert_eq!(e.mags[3], e.mags[4]);
    }

    #[test]
    fn theta_one_merges_only_identical_directions() {
        // 0° at magnitudes 1 and 2 share a direction (cosine exactly 1): one code, each entry
        // keeps its magnitude, so eq. 14 gives both back. 1° is apart (cos 1° < 1).
        let rows: Vec<f32> = [at(0.0, 1.0), at(0.0, 2.0), at(1.0, 1.0)].concat();
        let mut cb = Codebook::new(2, 1.0);
        let mut e = Entries::default();
        cb.extend(&rows, &mut e);
        assert_eq!((cb.len(), e.refs.clone()), (2, vec![0, 0, 1]));
        for (a, b) in cb.reconstruct(&e).iter().zip(&rows) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    fn entries_of_several_heads_share_codes() {
        // Two heads' entries in one codebook at θ = 1: head 1 repeats head 0's 0° and 90°
        // (identical vectors) and adds 45°. Three codes, not five; every entry keeps its own
        // reference and magnitude. A later entry of an existing direction merges into its code.
        let head0: Vec<f32> = [at(0.0, 1.0), at(90.0, 2.0)].concat();
        let head1: Vec<f32> = [at(0.0, 1.0), at(90.0, 2.0), at(45.0, 3.0)].concat();
        let mut cb = Codebook::new(2, 1.0);
        let mut all = Entries::default();
        cb.extend(&[head0, head1].concat(), &mut all);
        assert_eq!(cb.len(), 3);
        assert_eq!(all.refs[..2], all.refs[2..4]);
        let mut h1 = Entries::default();
        h1.extend_from(&all, 2..5);
        for (m, want) in h1.mags.iter().zip([1.0, 2.0, 3.0]) {
            assert!((m - want).abs() < 1e-6, "{m}");
        }
        cb.extend(&at(0.0, 5.0), &mut h1);
        assert_eq!((cb.len(), h1.refs[3]), (3, all.refs[0]));
    }
}
