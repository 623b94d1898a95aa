//! The HeadKV / Retrieval_Head score file: one line, `{"<layer>-<head>": [score, …], …}`.
//!
//! The authors' loader (`json.loads(file.readline())`, then `np.mean` of each list, then
//! `reshape(layers, heads)`) depends on key order, so keys are written layer-major, heads in
//! increasing order (`"0-0", "0-1", …, "1-0", …`) — not sorted as strings. Heads are query heads.
//! We store one mean score per head, so each list holds that one score (its mean is the score).

use crate::{Error, Result};

/// The one-line score file (with a final newline) for scores `[layer][q_head]`.
pub fn to_headkv_json(scores: &[Vec<f64>]) -> String {
    let mut out = String::from("{");
    for (l, row) in scores.iter().enumerate() {
        for (h, s) in row.iter().enumerate() {
            if out.len() > 1 {
                out.push_str(", ");
            }
            let v = serde_json::to_string(s).unwrap_or_else(|_| String::from("0.0"));
            out.push_str(&format!("\"{l}-{h}\": [{v}]"));
        }
    }
    out.push_str("}\n");
    out
}

/// Reads a score file back into `[layer][q_head]` means (any key order; every head present).
pub fn from_headkv_json(text: &str, layers: usize, heads: usize) -> Result<Vec<Vec<f64>>> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text.trim())
        .map_err(|e| Error::Parse {
            what: "HeadKV score file",
            path: String::from("."),
            message: e.to_string(),
        })?;
    let mut out = vec![vec![f64::NAN; heads]; layers];
    for (key, v) in &map {
        let bad = || {
            Error::invalid(
                key.clone(),
                format!("a key \"layer-head\" within {layers}×{heads} with a list of numbers"),
                v,
            )
        };
        let (l, h) = key.split_once('-').ok_or_else(bad)?;
        let (l, h): (usize, usize) = (l.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
        let list = v.as_array().filter(|a| !a.is_empty()).ok_or_else(bad)?;
        let nums: Option<Vec<f64>> = list.iter().map(|x| x.as_f64()).collect();
        let nums = nums.ok_or_else(bad)?;
        let cell = out.get_mut(l).and_then(|r| r.get_mut(h)).ok_or_else(bad)?;
        *cell = nums.iter().sum::<f64>() / nums.len() as f64;
    }
    for (l, row) in out.iter().enumerate() {
        if let Some(h) = row.iter().position(|x| x.is_nan()) {
            return Err(Error::invalid(
                format!("{l}-{h}"),
                "a score for every head",
                "none",
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_layer_major_not_string_sorted() {
        // 11 layers × 1 head: string order would put "10-0" before "2-0".
        let scores: Vec<Vec<f64>> = (0..11).map(|l| vec![l as f64 / 10.0]).collect();
        let line = to_headkv_json(&scores);
        let p2 = line.find("\"2-0\"").unwrap_or(usize::MAX);
        let p10 = line.find("\"10-0\"").unwrap_or(0);
        assert!(p2 < p10, "{line}");
        assert!(line.starts_with("{\"0-0\": [0.0], \"1-0\": [0.1]"));
        assert_eq!(line.matches('\n').count(), 1);
    }

    #[test]
    fn reads_back_means_of_trial_lists() {
        // The authors' files hold one score per trial: the mean of [0.2, 0.4] is 0.3.
        let s = from_headkv_json(r#"{"0-1": [0.2, 0.4], "0-0": [1.0]}"#, 1, 2).ok();
        assert_eq!(s.map(|s| s[0][0]), Some(1.0));
        let s = from_headkv_json(r#"{"0-1": [0.2, 0.4], "0-0": [1.0]}"#, 1, 2).ok();
        assert!(s.is_some_and(|s| (s[0][1] - 0.3).abs() < 1e-12));
        let round = from_headkv_json(&to_headkv_json(&[vec![0.5, 0.25]]), 1, 2).ok();
        assert_eq!(round, Some(vec![vec![0.5, 0.25]]));
        assert!(from_headkv_json(r#"{"0-0": [1.0]}"#, 1, 2).is_err());
        assert!(from_headkv_json(r#"{"0-5": [1.0]}"#, 1, 2).is_err());
    }
}
