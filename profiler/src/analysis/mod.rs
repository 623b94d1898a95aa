//! The analyses, one file each; every function here is pure (host-side numbers in, numbers out).

pub mod chance;
pub mod funnel;
pub mod metrics;
pub mod reasoning;
pub mod redundancy;
pub mod retrieval;
pub mod similarity;
pub mod wavelet;

/// Entropy `−Σ x·log x` of the distribution `p` with the logarithm `log` (`f64::log2`: bits,
/// `f64::ln`: nats); zero entries add nothing (0 · log 0 = 0).
pub fn entropy(p: &[f32], log: impl Fn(f64) -> f64) -> f64 {
    p.iter()
        .filter(|&&x| x > 0.0)
        .map(|&x| {
            let x = f64::from(x);
            -x * log(x)
        })
        .sum()
}

/// Index of the largest value (ties: the lowest index), as `torch.argmax`/`topk(1)` pick it.
pub fn argmax(row: &[f32]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in row.iter().enumerate() {
        if best.is_none_or(|b| v > row[b]) {
            best = Some(i);
        }
    }
    best
}

/// Indices of the `k` largest values, largest first (ties: lower index first).
pub fn top_k(row: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_and_top_k_break_ties_by_lower_index() {
        assert_eq!(argmax(&[0.1, 0.4, 0.4, 0.1]), Some(1));
        assert_eq!(argmax(&[]), None);
        assert_eq!(top_k(&[0.1, 0.4, 0.4, 0.3], 3), vec![1, 2, 3]);
        assert_eq!(top_k(&[0.5, 0.5], 5), vec![0, 1]);
    }
}
