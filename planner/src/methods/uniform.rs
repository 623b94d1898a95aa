//! Uniform budgets (sections `snapkv`, `h2o`, `streaming`): every KV head of every layer keeps
//! the same number of entries, the per-head target `B`, capped at the context length `n`.
//!
//! How the budget splits inside a head:
//! - SnapKV (Li et al. 2024, as in PyramidKV §4.2.2): the last α tokens (observation window)
//!   plus `B − α` selected by pooled attention; `B > α` is required, as the authors' code asserts.
//! - StreamingLLM (Xiao et al. 2024): `sinks` initial tokens (4) plus `B − sinks` recent ones.
//! - H2O (Zhang et al. 2024): heavy hitters plus a recent window; the paper's default splits the
//!   budget in halves: heavy = ⌊B·heavy_fraction⌋, recent = `B − heavy`.

/// `[layer][kv_head]` all equal to `min(per_head, context_len)`.
pub fn budgets(
    layers: usize,
    kv_heads: usize,
    context_len: usize,
    per_head: usize,
) -> Vec<Vec<usize>> {
    vec![vec![per_head.min(context_len); kv_heads]; layers]
}

/// StreamingLLM split of a head's budget: `(sinks, recent)`, summing to `budget`.
pub fn streaming_split(budget: usize, sinks: usize) -> (usize, usize) {
    let s = sinks.min(budget);
    (s, budget - s)
}

/// H2O split of a head's budget: `(heavy, recent)`, summing to `budget`.
pub fn h2o_split(budget: usize, heavy_fraction: f64) -> (usize, usize) {
    let heavy = ((budget as f64 * heavy_fraction).floor() as usize).min(budget);
    (heavy, budget - heavy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_head_gets_the_target_or_the_whole_context() {
        // 2 layers × 3 KV heads, B = 128: 6 heads × 128 = 768 entries.
        let b = budgets(2, 3, 4096, 128);
        assert_eq!(b, vec![vec![128; 3]; 2]);
        // A 100-token prompt is shorter than B: nothing is evicted.
        assert_eq!(budgets(2, 3, 100, 128), vec![vec![100; 3]; 2]);
    }

    #[test]
    fn streaming_keeps_four_sinks_and_the_rest_recent() {
        // B = 1024: 4 sinks + 1020 recent; a budget of 3 holds only sinks.
        assert_eq!(streaming_split(1024, 4), (4, 1020));
        assert_eq!(streaming_split(3, 4), (3, 0));
    }

    #[test]
    fn h2o_halves_the_budget() {
        // B = 129, heavy = ⌊129 · 0.5⌋ = 64, recent = 65.
        assert_eq!(h2o_split(129, 0.5), (64, 65));
    }
}
