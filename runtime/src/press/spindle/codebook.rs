//! SpindleKV's cosine codebook (`spindlekv.md` §3.4, eq. 8–14, Algorithm 1).
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
//! The codes ([`Codebook`]) are held apart from the entries that reference them ([`Entries`]: a
//! code and a magnitude per entry), so several heads can share one codebook — SpindleKV's GQA
//! repeat variant keeps one per layer for all its query heads.

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

/// Splits `v` into (unit vector, magnitude); a zero vector stays zero with magnitude 0.
fn unit(v: &[f32]) -> (Vec<f32>, f32) {
    let m = dot(v, v).sqrt();
    if m > 0.0 {
        (v.iter().map(|x| x / m).collect(), m)
    } else {
        (v.to_vec(), 0.0)
    }
}

/// Cosine of unit vectors, identical directions above any cosine: they merge at every θ ≤ 1,
/// whatever the rounding of their dot product.
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a == b {
        f32::INFINITY
    } else {
        dot(a, b)
    }
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

    /// The existing code of highest cosine above θ with unit vector `u`.
    fn best(&self, u: &[f32]) -> Option<usize> {
        (0..self.len())
            .map(|c| (c, cosine(self.code(c), u)))
            .filter(|&(_, s)| s > self.theta)
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|(c, _)| c)
    }

    /// Adds entries (`rows` of `dim` floats), appending their references and magnitudes to
    /// `out`: groups of at most [`MAX_GROUP`]; in each, entries close to an existing code merge
    /// into it (the code vector is unchanged), the others are grouped greedily (eq. 9–13).
    pub fn extend(&mut self, rows: &[f32], out: &mut Entries) {
        for group in rows.chunks(MAX_GROUP * self.dim) {
            let start = out.refs.len();
            let mut fresh: Vec<(usize, Vec<f32>)> = Vec::new();
            for (i, v) in group.chunks_exact(self.dim).enumerate() {
                let (u, m) = unit(v);
                out.mags.push(m);
                match self.best(&u) {
                    Some(c) => out.refs.push(c as u32),
                    None => {
                        out.refs.push(u32::MAX);
                        fresh.push((start + i, u));
                    }
                }
            }
            self.group_greedily(&fresh, &mut out.refs);
        }
    }

    /// Eq. 9–13 over `entries` (index into `refs`, unit vector), with a bitset adjacency and
    /// incrementally updated degrees; writes each entry's code into `refs`.
    fn group_greedily(&mut self, entries: &[(usize, Vec<f32>)], refs: &mut [u32]) {
        let n = entries.len();
        let words = n.div_ceil(64);
        let mut adj = vec![0u64; n * words];
        for i in 0..n {
            for j in i..n {
                if i == j || cosine(&entries[i].1, &entries[j].1) > self.theta {
                    adj[i * words + j / 64] |= 1 << (j % 64);
                    adj[j * words + i / 64] |= 1 << (i % 64);
                }
            }
        }
        let row = |i: usize| &adj[i * words..(i + 1) * words];
        let mut degree: Vec<usize> = (0..n)
            .map(|i| row(i).iter().map(|w| w.count_ones() as usize).sum())
            .collect();
        let mut alive = vec![true; n];
        let mut left = n;
        while left > 0 {
            let iota = (0..n)
                .filter(|&i| alive[i])
                .max_by(|&a, &b| degree[a].cmp(&degree[b]).then(b.cmp(&a)))
                .expect("an alive vertex");
            let code = self.len() as u32;
            self.codes.extend_from_slice(&entries[iota].1);
            let members: Vec<usize> = (0..n)
                .filter(|&j| alive[j] && (j == iota || row(iota)[j / 64] >> (j % 64) & 1 == 1))
                .collect();
            for &j in &members {
                alive[j] = false;
                left -= 1;
                refs[entries[j].0] = code;
            }
            for &j in &members {
                for (k, d) in degree.iter_mut().enumerate() {
                    if alive[k] && row(j)[k / 64] >> (k % 64) & 1 == 1 {
                        *d -= 1;
                    }
                }
            }
        }
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
