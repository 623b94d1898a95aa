//! KV redundancy and attention sparsity per layer (SpindleKV §3.2, Figure 3).
//!
//! - Constitutional similarity: the fraction of token pairs (i < j) of one KV head whose cosine
//!   similarity (eq. 4) exceeds θ — pre-RoPE keys against θ_K, values against θ_V. A zero
//!   vector has no direction and is similar to nothing.
//! - Attention sparsity: the accumulated attention of each context token (eq. 2–3: mean over
//!   the observation window's rows, and over the query heads sharing the KV head) is sorted; the
//!   sparsity is the fraction of tokens *outside* the smallest set that carries `mass` (0.9) of
//!   the total — tokens whose attention is negligible. The paper shows the sorted curve (Figure
//!   3a) and gives no scalar; this is ours, scale-free so that lengths compare.

/// Fraction of pairs among the `n = data.len() / dim` vectors whose cosine exceeds `theta`.
pub fn cosine_fraction(data: &[f32], dim: usize, theta: f64) -> f64 {
    let n = data.len().checked_div(dim).unwrap_or(0);
    if n < 2 {
        return 0.0;
    }
    let unit: Vec<Option<Vec<f32>>> = data
        .chunks_exact(dim)
        .map(|v| {
            let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
            (norm > 0.0).then(|| v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
        })
        .collect();
    let mut above = 0u64;
    for i in 0..n {
        let Some(a) = &unit[i] else { continue };
        for b in unit[i + 1..].iter().flatten() {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            if f64::from(dot) > theta {
                above += 1;
            }
        }
    }
    above as f64 / (n * (n - 1) / 2) as f64
}

/// Fraction of tokens outside the smallest set carrying `mass` of the accumulated attention.
pub fn attention_sparsity(accumulated: &[f64], mass: f64) -> f64 {
    let total: f64 = accumulated.iter().sum();
    if accumulated.is_empty() || total <= 0.0 {
        return 0.0;
    }
    let mut v = accumulated.to_vec();
    v.sort_by(|a, b| b.total_cmp(a));
    let mut acc = 0.0;
    let mut needed = v.len();
    for (i, x) in v.iter().enumerate() {
        acc += x;
        // A rounding tolerance, so that ten tokens of 0.1 reach 0.9 at the ninth.
        if acc >= mass * total - 1e-12 {
            needed = i + 1;
            break;
        }
    }
    1.0 - needed as f64 / v.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_fraction_of_vectors_with_known_angles() {
        // (1,0), (2,0), (0,1), (1,1): cosines 1 (a,b), 0 (a,c), 0 (b,c), 1/√2 (a,d), 1/√2 (b,d),
        // 1/√2 (c,d). Above 0.98: one pair of six. Above 0.7: four of six.
        let v = [1.0, 0.0, 2.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        assert!((cosine_fraction(&v, 2, 0.98) - 1.0 / 6.0).abs() < 1e-12);
        assert!((cosine_fraction(&v, 2, 0.7) - 4.0 / 6.0).abs() < 1e-12);
        // Opposite vectors: cosine −1, never above.
        assert_eq!(cosine_fraction(&[1.0, 0.0, -1.0, 0.0], 2, -0.5), 0.0);
        // A zero vector is similar to nothing.
        assert_eq!(cosine_fraction(&[0.0, 0.0, 1.0, 0.0], 2, -1.0), 0.0);
    }

    #[test]
    fn sparsity_counts_tokens_outside_the_mass_carrying_set() {
        // (0.9, 0.05, 0.05, 0): 0.9 of the mass sits on one token of four → 3/4 negligible.
        assert!((attention_sparsity(&[0.9, 0.05, 0.05, 0.0], 0.9) - 0.75).abs() < 1e-12);
        // Uniform over 10: 9 tokens needed for 0.9 → 1/10.
        assert!((attention_sparsity(&[0.1; 10], 0.9) - 0.1).abs() < 1e-9);
        assert_eq!(attention_sparsity(&[], 0.9), 0.0);
    }
}
