//! A small seeded generator (SplitMix64) and the draws the example builders need, so examples
//! depend only on the seed and never on burn or the platform.

/// SplitMix64: a small seeded generator, so examples depend only on the seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator for stream `parts` of `seed` (task, example, …): distinct parts give
    /// unrelated streams.
    pub fn derive(seed: u64, parts: &[u64]) -> Self {
        let mut r = Self::new(seed);
        for &p in parts {
            let mixed = r.next_u64() ^ p.wrapping_mul(0xA24B_AED4_963E_E407);
            r = Self::new(mixed);
        }
        r
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`: the top 53 bits as a fraction.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi` (Python's `random.randint`).
    pub fn int_in(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// `k` distinct indices of `0..n` in draw order (`random.sample(range(n), k)`); `k` is
    /// capped at `n`. A partial Fisher–Yates: the first `k` of a draw of `k + 1` are the draw
    /// of `k`, so a longer sample extends a shorter one.
    pub fn sample_indices(&mut self, n: usize, k: usize) -> Vec<usize> {
        let k = k.min(n);
        let mut all: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = i + self.below((n - i) as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(k);
        all
    }

    /// `k` distinct elements of `items` in draw order (`random.sample(items, k)`).
    pub fn sample<T: Clone>(&mut self, items: &[T], k: usize) -> Vec<T> {
        self.sample_indices(items.len(), k)
            .into_iter()
            .map(|i| items[i].clone())
            .collect()
    }

    /// `k` random upper-case ASCII letters.
    pub fn uppercase(&mut self, k: usize) -> String {
        (0..k)
            .map(|_| char::from(b'A' + self.below(26) as u8))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_splitmix64_reference_values() {
        // SplitMix64 with seed 0 (Vigna's reference implementation, splitmix64.c): the first
        // outputs are 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F.
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
        let x = Rng::new(0).next_f64();
        assert!((x - 0xE220_A839_7B1D_CDAFu64 as f64 / 2f64.powi(64)).abs() < 1e-15);
    }

    #[test]
    fn samples_are_distinct_and_a_longer_sample_extends_a_shorter_one() {
        let short = Rng::new(7).sample_indices(50, 5);
        let long = Rng::new(7).sample_indices(50, 9);
        assert_eq!(&long[..5], &short[..]);
        let mut sorted = long.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 9);
        assert!(long.iter().all(|&i| i < 50));
        assert_eq!(Rng::new(1).sample_indices(3, 10).len(), 3);
    }

    #[test]
    fn shuffle_permutes_and_draws_stay_in_range() {
        let mut v: Vec<u32> = (0..20).collect();
        Rng::new(3).shuffle(&mut v);
        let mut back = v.clone();
        back.sort_unstable();
        assert_eq!(back, (0..20).collect::<Vec<_>>());
        assert_ne!(v, back);
        let mut r = Rng::new(5);
        for _ in 0..1000 {
            let x = r.int_in(10_000, 99_998);
            assert!((10_000..=99_998).contains(&x));
        }
        let w = r.uppercase(5);
        assert!(w.len() == 5 && w.chars().all(|c| c.is_ascii_uppercase()));
        assert_ne!(
            Rng::derive(0, &[1, 2]).next_u64(),
            Rng::derive(0, &[2, 1]).next_u64()
        );
    }
}
