//! The perplexity table of a run: one row per curve (method @ budget), the perplexity at fixed
//! positions and at the end, each with its 95% block-bootstrap interval ([`super::curves`]).

use super::BLOCK;
use crate::results::{label as row_label, PerplexityCurve};
use crate::stats::RESAMPLES;
use crate::table::header;

/// `35.72 [33.10, 38.51]`: the curve's perplexity at index `i` with its interval when it has one.
fn ppl_cell(c: &PerplexityCurve, i: usize) -> String {
    let v = c.perplexity[i];
    match (c.low.get(i), c.high.get(i)) {
        (Some(lo), Some(hi)) => format!("{v:.2} [{lo:.2}, {hi:.2}]"),
        _ => format!("{v:.2}"),
    }
}

/// The perplexity table: one row per curve, the perplexity at each of `at` (positions on the
/// curve; others are skipped) and at the end, each with its 95% interval when the curve has one.
pub fn markdown(curves: &[PerplexityCurve], at: &[usize]) -> String {
    let mut titles: Vec<String> = vec!["method @ budget".into()];
    titles.extend(at.iter().map(|p| format!("≤ {p}")));
    titles.push("all".into());
    let mut out = header(&titles.iter().map(String::as_str).collect::<Vec<_>>());
    for c in curves {
        out.push_str(&format!("| {} |", row_label(&c.method, c.budget)));
        for p in at {
            match c.positions.iter().position(|x| x == p) {
                Some(i) => out.push_str(&format!(" {} |", ppl_cell(c, i))),
                None => out.push_str(" – |"),
            }
        }
        match c.perplexity.len().checked_sub(1) {
            Some(last) => out.push_str(&format!(" {} |\n", ppl_cell(c, last))),
            None => out.push_str(" – |\n"),
        }
    }
    if curves.iter().any(|c| !c.low.is_empty()) {
        out.push_str(&format!(
            "\nPerplexity of the tokens up to each position, [95% CI]: block bootstrap over \
             {BLOCK}-token blocks of every text ({RESAMPLES} resamples, fixed seed).\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ppl_table_reads_the_curve_at_the_asked_positions() {
        let mut c = PerplexityCurve {
            method: "treekv".into(),
            budget: Some(64),
            positions: vec![128, 256, 300],
            perplexity: vec![20.0, 15.5, 14.25],
            low: Vec::new(),
            high: Vec::new(),
        };
        let t = markdown(&[c.clone()], &[128, 512]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| method @ budget | ≤ 128 | ≤ 512 | all |");
        assert_eq!(lines[2], "| treekv @ 64 | 20.00 | – | 14.25 |");
        assert_eq!(lines.len(), 3);
        (c.low, c.high) = (vec![18.0, 14.0, 13.5], vec![22.5, 17.0, 15.0]);
        let t = markdown(&[c], &[128]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[2],
            "| treekv @ 64 | 20.00 [18.00, 22.50] | 14.25 [13.50, 15.00] |"
        );
        assert!(lines[4].starts_with("Perplexity of the tokens up to each position"));
    }
}
