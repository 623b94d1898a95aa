//! The evaluation results these plots read: the schema is the evaluation's
//! ([`kvplan_eval::results`], which `kvplan eval` writes), re-exported here; this module adds the
//! file-name form of a method and budget.

pub use kvplan_eval::results::{
    label, EvalResults, NiahCell, PairedDelta, PerplexityCurve, QualityPoint, ScoreInterval,
    RESULTS_SCHEMA_VERSION,
};

/// `method-budget` or `method` (file-name text).
pub fn file_label(method: &str, budget: Option<usize>) -> String {
    let clean: String = method
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match budget {
        Some(b) => format!("{clean}-{b}"),
        None => clean,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_labels_keep_names_safe() {
        assert_eq!(file_label("headkv-r", Some(64)), "headkv-r-64");
        assert_eq!(file_label("full", None), "full");
        assert_eq!(file_label("a/b", None), "a_b");
    }
}
