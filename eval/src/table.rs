//! The Markdown table of a run: one row per (method, budget), one column per context length
//! (mean score over depths and examples, in percent), then the mean, the KV fraction and the
//! share of FullKV's mean score.

use crate::records::Record;

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn row_label(method: &str, budget: Option<usize>) -> String {
    match budget {
        Some(b) => format!("{method} @ {b}"),
        None => method.to_string(),
    }
}

/// The table of `task`'s records; rows in the order first met.
pub fn markdown(task: &str, records: &[Record]) -> String {
    let recs: Vec<&Record> = records.iter().filter(|r| r.task == task).collect();
    let mut lengths: Vec<usize> = recs.iter().map(|r| r.context_len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mut rows: Vec<(String, Option<usize>)> = Vec::new();
    for r in &recs {
        let id = (r.method.clone(), r.budget);
        if !rows.contains(&id) {
            rows.push(id);
        }
    }
    let scores_of = |m: &str, b: Option<usize>, len: Option<usize>| -> Vec<f64> {
        recs.iter()
            .filter(|r| r.method == m && r.budget == b && len.is_none_or(|l| r.context_len == l))
            .map(|r| r.score)
            .collect()
    };
    let full_mean = {
        let s = scores_of("full", None, None);
        (!s.is_empty()).then(|| mean(&s))
    };
    let mut out = String::from("| method @ budget |");
    for l in &lengths {
        out.push_str(&format!(" {l} |"));
    }
    out.push_str(" mean | KV fraction | of FullKV |\n|---|");
    out.push_str(&"---:|".repeat(lengths.len() + 3));
    out.push('\n');
    for (m, b) in &rows {
        out.push_str(&format!("| {} |", row_label(m, *b)));
        for &l in &lengths {
            let s = scores_of(m, *b, Some(l));
            if s.is_empty() {
                out.push_str(" – |");
            } else {
                out.push_str(&format!(" {:.1} |", 100.0 * mean(&s)));
            }
        }
        let all = scores_of(m, *b, None);
        let fractions: Vec<f64> = recs
            .iter()
            .filter(|r| &r.method == m && r.budget == *b)
            .map(|r| r.kv_fraction)
            .collect();
        let share = match full_mean {
            Some(f) if f > 0.0 => format!("{:.0}%", 100.0 * mean(&all) / f),
            _ => "–".to_string(),
        };
        out.push_str(&format!(
            " {:.1} | {:.3} | {share} |\n",
            100.0 * mean(&all),
            mean(&fractions)
        ));
    }
    out
}

/// The perplexity table: one row per curve, the perplexity at each of `at` (positions on the
/// curve; others are skipped) and at the end.
pub fn ppl_markdown(curves: &[kvplan_plots::PerplexityCurve], at: &[usize]) -> String {
    let mut out = String::from("| method @ budget |");
    for p in at {
        out.push_str(&format!(" ≤ {p} |"));
    }
    out.push_str(" all |\n|---|");
    out.push_str(&"---:|".repeat(at.len() + 1));
    out.push('\n');
    for c in curves {
        out.push_str(&format!("| {} |", row_label(&c.method, c.budget)));
        for p in at {
            match c.positions.iter().position(|x| x == p) {
                Some(i) => out.push_str(&format!(" {:.2} |", c.perplexity[i])),
                None => out.push_str(" – |"),
            }
        }
        let last = c.perplexity.last().copied().unwrap_or(f64::NAN);
        out.push_str(&format!(" {last:.2} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(method: &str, budget: Option<usize>, len: usize, score: f64, kv: f64) -> Record {
        Record {
            task: "niah".into(),
            model: "m".into(),
            context_len: len,
            depth: 0.5,
            example: 0,
            method: method.into(),
            budget,
            needle: String::new(),
            expected: Vec::new(),
            response: String::new(),
            score,
            kv_fraction: kv,
            seconds: 0.0,
        }
    }

    #[test]
    fn table_has_a_row_per_method_budget_and_a_column_per_length() {
        let records = [
            rec("full", None, 512, 1.0, 1.0),
            rec("full", None, 1024, 0.5, 1.0),
            rec("snapkv", Some(64), 512, 0.5, 0.125),
            rec("snapkv", Some(64), 1024, 0.0, 0.0625),
        ];
        let t = markdown("niah", &records);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| method @ budget | 512 | 1024 | mean | KV fraction | of FullKV |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|");
        assert_eq!(lines[2], "| full | 100.0 | 50.0 | 75.0 | 1.000 | 100% |");
        assert_eq!(
            lines[3],
            "| snapkv @ 64 | 50.0 | 0.0 | 25.0 | 0.094 | 33% |"
        );
        assert_eq!(lines.len(), 4);
    }

    #[test]
    fn ppl_table_reads_the_curve_at_the_asked_positions() {
        let c = kvplan_plots::PerplexityCurve {
            method: "treekv".into(),
            budget: Some(64),
            positions: vec![128, 256, 300],
            perplexity: vec![20.0, 15.5, 14.25],
        };
        let t = ppl_markdown(&[c], &[128, 512]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| method @ budget | ≤ 128 | ≤ 512 | all |");
        assert_eq!(lines[2], "| treekv @ 64 | 20.00 | – | 14.25 |");
    }
}
