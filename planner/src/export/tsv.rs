//! DuoAttention-style TSV: one row per layer, one tab-separated column per KV head, no header.
//!
//! DuoAttention's `full_attention_heads.tsv` holds a gate in [0, 1] per (layer, KV head), 1 for a
//! head that needs full attention. kvplan writes HeadKV's KV-head importance there (query-head
//! scores summed onto KV heads, as `methods::headkv::kv_head_scores`), divided by the largest so
//! the top head is 1.

use crate::geometry::Geometry;
use crate::methods::headkv;

/// Rows of tab-separated values, one line per row.
pub fn to_tsv(values: &[Vec<f64>]) -> String {
    let mut out = String::new();
    for row in values {
        let cells: Vec<String> = row.iter().map(|v| v.to_string()).collect();
        out.push_str(&cells.join("\t"));
        out.push('\n');
    }
    out
}

/// KV-head importance `[layer][kv_head]` scaled so the largest is 1 (all zero stays zero).
pub fn kv_head_gates(
    q_scores: &[Vec<f64>],
    geometry: &Geometry,
    temperature: f64,
) -> Vec<Vec<f64>> {
    let s = headkv::kv_head_scores(q_scores, geometry, temperature);
    let max = s.iter().flatten().copied().fold(0.0_f64, f64::max);
    s.iter()
        .map(|row| {
            row.iter()
                .map(|&x| if max > 0.0 { x / max } else { 0.0 })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_layers_columns_kv_heads() {
        // 2 layers, 4 q heads → 2 KV heads. Scores sum to 1; KV sums 0.4, 0.2 | 0.2, 0.2;
        // divided by the largest (0.4): 1, 0.5 | 0.5, 0.5.
        let g = Geometry::new(2, 4, 2, 8).unwrap_or_else(|e| panic!("{e}"));
        let q = vec![vec![0.4, 0.0, 0.1, 0.1], vec![0.2, 0.0, 0.0, 0.2]];
        let gates = kv_head_gates(&q, &g, 1.0);
        let rounded: Vec<Vec<f64>> = gates
            .iter()
            .map(|r| r.iter().map(|x| (x * 1e9).round() / 1e9).collect())
            .collect();
        assert_eq!(to_tsv(&rounded), "1\t0.5\n0.5\t0.5\n");
    }
}
