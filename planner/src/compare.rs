//! Whether a newly measured profile (or a plan) says anything the file already on disk does not.
//!
//! `kvplan profile` rewrites files that are committed (`plans/<model>.profile.json`, `….plan.json`).
//! A rerun on another day, or on another CPU whose SIMD kernels round differently, measures the
//! same profile up to float noise (about 1e-6) and stamps today's date on it. Replacing the
//! committed file then changes nothing that drives a budget but dirties the checkout. [`compare`]
//! walks the two JSON documents and tells the two cases apart: equal apart from `date` fields and
//! numbers within [`ABS_TOLERANCE`] + [`REL_TOLERANCE`]·max(|a|, |b|), or the first difference
//! beyond that, with its JSON path, so a replacement can say what it replaced.

use serde_json::Value;

/// Absolute part of the noise tolerance on a number.
pub const ABS_TOLERANCE: f64 = 1e-5;
/// Relative part of the noise tolerance on a number.
pub const REL_TOLERANCE: f64 = 1e-4;

/// How a new document relates to the old one.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Equal apart from `date` fields and float noise; the largest difference between two
    /// numbers (0 when none differ).
    NoiseOnly {
        /// Largest |old − new| over every number.
        largest: f64,
    },
    /// The first difference beyond noise.
    Changed {
        /// JSON path, e.g. `retrieval.scores[3][2]`.
        at: String,
        /// The old value, shortened.
        old: String,
        /// The new value, shortened.
        new: String,
    },
}

impl Change {
    /// A one-line account of the change, for the message of the run that replaces a file.
    pub fn describe(&self) -> String {
        match self {
            Change::NoiseOnly { largest } => {
                format!("only the date and float noise differ (largest difference {largest:.1e})")
            }
            Change::Changed { at, old, new } => format!("`{at}` was {old}, is now {new}"),
        }
    }
}

/// Compares `old` with `new`, ignoring every field named `date`.
pub fn compare(old: &Value, new: &Value) -> Change {
    let mut largest = 0.0f64;
    match walk(old, new, &mut String::new(), &mut largest) {
        Some(change) => change,
        None => Change::NoiseOnly { largest },
    }
}

fn walk(old: &Value, new: &Value, path: &mut String, largest: &mut f64) -> Option<Change> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                if key == "date" {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => walk(x, y, path, largest),
                    (x, y) => Some(changed(path, x, y)),
                };
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = walk(x, y, path, largest);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => Some(Change::Changed {
            at: path.clone(),
            old: format!("{} items", a.len()),
            new: format!("{} items", b.len()),
        }),
        (Value::Number(a), Value::Number(b)) => numbers(a, b, path, largest),
        _ if old == new => None,
        _ => Some(changed(path, Some(old), Some(new))),
    }
}

/// Integers must be equal; any other pair of numbers within the tolerance.
fn numbers(
    a: &serde_json::Number,
    b: &serde_json::Number,
    path: &str,
    largest: &mut f64,
) -> Option<Change> {
    let both_integers = !a.is_f64() && !b.is_f64();
    let (x, y) = (
        a.as_f64().unwrap_or(f64::NAN),
        b.as_f64().unwrap_or(f64::NAN),
    );
    let diff = (x - y).abs();
    let within = if both_integers {
        a == b
    } else {
        diff <= ABS_TOLERANCE + REL_TOLERANCE * x.abs().max(y.abs())
    };
    if within {
        *largest = largest.max(diff);
        None
    } else {
        Some(Change::Changed {
            at: path.to_string(),
            old: a.to_string(),
            new: b.to_string(),
        })
    }
}

fn changed(path: &str, old: Option<&Value>, new: Option<&Value>) -> Change {
    let show = |v: Option<&Value>| match v {
        None => String::from("absent"),
        Some(v) => {
            let s = v.to_string();
            match s.char_indices().nth(60) {
                Some((cut, _)) => format!("{}…", &s[..cut]),
                None => s,
            }
        }
    };
    Change::Changed {
        at: if path.is_empty() {
            ".".into()
        } else {
            path.into()
        },
        old: show(old),
        new: show(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates_and_noise_are_not_changes() {
        let old = json!({"settings": {"date": "2026-11-23", "seeds": [0]},
                         "scores": [[0.25, 0.5], [1.0, 0.0]]});
        let new = json!({"settings": {"date": "2026-11-26", "seeds": [0]},
                         "scores": [[0.250001, 0.5], [1.0, 0.0000005]]});
        match compare(&old, &new) {
            Change::NoiseOnly { largest } => assert!((largest - 1e-6).abs() < 1e-9, "{largest}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_score_that_moved_is_named_by_its_path() {
        let old = json!({"retrieval": {"scores": [[0.25, 0.5]]}});
        let new = json!({"retrieval": {"scores": [[0.25, 0.51]]}});
        assert_eq!(
            compare(&old, &new),
            Change::Changed {
                at: "retrieval.scores[0][1]".into(),
                old: "0.5".into(),
                new: "0.51".into()
            }
        );
    }

    #[test]
    fn tolerance_is_relative_for_large_numbers() {
        // 1e-5 + 1e-4 × 1000 = 0.10001: 1000 → 1000.1 is noise, 1000 → 1000.2 is not.
        let noise = compare(&json!([1000.0]), &json!([1000.1]));
        assert!(matches!(noise, Change::NoiseOnly { .. }), "{noise:?}");
        let real = compare(&json!([1000.0]), &json!([1000.2]));
        assert!(matches!(real, Change::Changed { .. }), "{real:?}");
    }

    #[test]
    fn integers_strings_lengths_and_keys_must_match_exactly() {
        for (old, new, at) in [
            (json!({"kept": 42}), json!({"kept": 43}), "kept"),
            (json!({"r": "Paris"}), json!({"r": "paris"}), "r"),
            (json!({"l": [1, 2]}), json!({"l": [1, 2, 3]}), "l"),
            (json!({"a": 1}), json!({"a": 1, "b": 2}), "b"),
            (json!({"a": 1, "b": 2}), json!({"a": 1}), "b"),
            (json!({"x": null}), json!({"x": 0.0}), "x"),
        ] {
            match compare(&old, &new) {
                Change::Changed { at: found, .. } => assert_eq!(found, at, "{old} → {new}"),
                other => panic!("{old} → {new}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_description_says_what_changed() {
        let c = compare(&json!({"a": {"b": "x"}}), &json!({"a": {"b": "y"}}));
        assert_eq!(c.describe(), "`a.b` was \"x\", is now \"y\"");
    }
}
