//! Inter-layer attention similarity (PoD §2.1 eq. 1–2).
//!
//! For every query head h and pair of layers (a, b): the Jensen–Shannon divergence between the
//! attention rows of the same query (one of the last q tokens of a sample) in layer a and layer
//! b, averaged over the q rows and the N samples (eq. 2). JS uses log base 2, so it lies in
//! [0, 1]; the profile stores similarity = 1 − JS (eq. 2 calls the average divergence itself
//! "similarity" yet groups layers whose value is ≥ δ — our resolution, as in the planner).

use std::f64::consts::LN_2;

/// Entropy of `p` in nats (0 · ln 0 = 0).
fn entropy_nats(p: &[f32]) -> f64 {
    super::entropy(p, f64::ln)
}

/// Jensen–Shannon divergence of two distributions over the same support, log base 2, in [0, 1].
pub fn js_divergence_bits(p: &[f32], q: &[f32]) -> f64 {
    js_with_entropies(p, q, entropy_nats(p), entropy_nats(q))
}

/// JS = H(M) − (H(P) + H(Q)) / 2 with M = (P + Q) / 2, given H(P), H(Q) in nats.
fn js_with_entropies(p: &[f32], q: &[f32], hp: f64, hq: f64) -> f64 {
    let hm: f64 = p
        .iter()
        .zip(q)
        .map(|(&a, &b)| 0.5 * (f64::from(a) + f64::from(b)))
        .filter(|&m| m > 0.0)
        .map(|m| -m * m.ln())
        .sum();
    ((hm - 0.5 * (hp + hq)) / LN_2).clamp(0.0, 1.0)
}

/// Mean 1 − JS between layers, per query head, over the rows of one sample.
///
/// `rows[layer][head][row]` are attention rows over one key order (the same for every layer).
/// Returns `[head][layer_a][layer_b]`, symmetric with ones on the diagonal.
pub fn layer_similarity(rows: &[Vec<Vec<Vec<f32>>>]) -> Vec<Vec<Vec<f64>>> {
    let layers = rows.len();
    let heads = rows.first().map_or(0, Vec::len);
    let mut out = vec![vec![vec![1.0; layers]; layers]; heads];
    for (h, sim) in out.iter_mut().enumerate() {
        let n_rows = rows.iter().map(|l| l[h].len()).min().unwrap_or(0);
        if n_rows == 0 {
            continue;
        }
        let ent: Vec<Vec<f64>> = rows
            .iter()
            .map(|l| l[h].iter().map(|r| entropy_nats(r)).collect())
            .collect();
        for a in 0..layers {
            for b in a + 1..layers {
                let js: f64 = (0..n_rows)
                    .map(|r| {
                        js_with_entropies(&rows[a][h][r], &rows[b][h][r], ent[a][r], ent[b][r])
                    })
                    .sum::<f64>()
                    / n_rows as f64;
                sim[a][b] = 1.0 - js;
                sim[b][a] = 1.0 - js;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_of_known_distributions() {
        // Identical: 0. Disjoint supports: 1 bit (the maximum with log base 2).
        assert!(js_divergence_bits(&[0.5, 0.5], &[0.5, 0.5]).abs() < 1e-12);
        assert!((js_divergence_bits(&[1.0, 0.0], &[0.0, 1.0]) - 1.0).abs() < 1e-12);
        // P = (1, 0), Q = (1/2, 1/2): M = (3/4, 1/4).
        // KL(P‖M) = log2(4/3); KL(Q‖M) = ½ log2(2/3) + ½ log2(2) = ½ log2(4/3).
        // JS = ½ (log2(4/3) + ½ log2(4/3)) = ¾ log2(4/3) ≈ 0.311278.
        let expected = 0.75 * (4.0f64 / 3.0).log2();
        let js = js_divergence_bits(&[1.0, 0.0], &[0.5, 0.5]);
        assert!((js - expected).abs() < 1e-9, "{js} vs {expected}");
        // Symmetric.
        assert!((js_divergence_bits(&[0.5, 0.5], &[1.0, 0.0]) - js).abs() < 1e-12);
    }

    #[test]
    fn layer_similarity_averages_rows_and_is_symmetric() {
        // 3 layers, 1 head, 2 rows over 2 keys. Layers 0 and 1 identical; layer 2 disjoint from
        // layer 0 in row 0 (JS 1) and identical in row 1 (JS 0): mean JS ½ → similarity ½.
        let l0 = vec![vec![vec![1.0, 0.0], vec![0.5, 0.5]]];
        let l1 = l0.clone();
        let l2 = vec![vec![vec![0.0, 1.0], vec![0.5, 0.5]]];
        let s = layer_similarity(&[l0, l1, l2]);
        assert_eq!(s.len(), 1);
        assert!((s[0][0][1] - 1.0).abs() < 1e-12);
        assert!((s[0][0][2] - 0.5).abs() < 1e-12);
        assert_eq!(s[0][2][0], s[0][0][2]);
        assert_eq!(s[0][1][1], 1.0);
    }
}
