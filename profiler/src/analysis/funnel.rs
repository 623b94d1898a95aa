//! Attention funnelling per layer (PyramidKV §3): how spread out the last tokens' attention is.
//! Lower layers attend broadly (high entropy, low top-k mass); upper layers concentrate on few
//! tokens (low entropy, high top-k mass) — the "pyramid" that sets per-layer budgets.

/// Entropy of an attention row in bits (0 · log 0 = 0).
pub fn entropy_bits(row: &[f32]) -> f64 {
    super::entropy(row, f64::log2)
}

/// Attention mass on the `k` largest entries of a row.
pub fn top_k_mass(row: &[f32], k: usize) -> f64 {
    let mut v: Vec<f32> = row.to_vec();
    v.sort_by(|a, b| b.total_cmp(a));
    v.iter()
        .take(k)
        .map(|&x| f64::from(x))
        .sum::<f64>()
        .min(1.0)
}

/// Mean entropy (bits) and mean top-k mass over `rows`, or `(0, 0)` when there are none.
pub fn funnel_of(rows: &[&[f32]], k: usize) -> (f64, f64) {
    if rows.is_empty() {
        return (0.0, 0.0);
    }
    let n = rows.len() as f64;
    let e = rows.iter().map(|r| entropy_bits(r)).sum::<f64>() / n;
    let m = rows.iter().map(|r| top_k_mass(r, k)).sum::<f64>() / n;
    (e, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_and_peaked_rows_by_hand() {
        // Uniform over 8 keys: 3 bits; top-2 mass 2/8.
        let u = [0.125f32; 8];
        assert!((entropy_bits(&u) - 3.0).abs() < 1e-9);
        assert!((top_k_mass(&u, 2) - 0.25).abs() < 1e-9);
        // (½, ¼, ¼, 0): H = ½·1 + 2·¼·2 = 1.5 bits; top-1 mass ½.
        let p = [0.5f32, 0.25, 0.25, 0.0];
        assert!((entropy_bits(&p) - 1.5).abs() < 1e-9);
        assert!((top_k_mass(&p, 1) - 0.5).abs() < 1e-9);
        // A one-hot row: 0 bits, top-1 mass 1.
        assert_eq!(entropy_bits(&[0.0, 1.0]), 0.0);
        let (e, m) = funnel_of(&[&u, &p], 1);
        assert!((e - 2.25).abs() < 1e-9 && (m - 0.3125).abs() < 1e-9);
    }
}
