//! Whether a newly measured profile (or a plan) says anything the file already on disk does not.
//!
//! `kvplan profile` rewrites files that are committed (`plans/<model>.profile.json`, `….plan.json`).
//! A rerun on another day, or on another CPU whose SIMD kernels round differently, measures the
//! same profile up to float noise (about 1e-6) and stamps today's date on it. Replacing the
//! committed file then changes nothing that drives a budget but dirties the checkout. [`compare`]
//! walks the two JSON documents and tells the two cases apart: equal apart from `date` fields and
//! numbers within [`ABS_TOLERANCE`] + [`REL_TOLERANCE`]·max(|a|, |b|), or the first difference
//! beyond that, with its JSON path, so a replacement can say what it replaced.
//!
//! A newer kvplan may record more than the file on disk holds: a field the old file lacks
//! (`settings.retrieval_reasoning_chance.by_needle`), a note after its last. When everything the
//! old file holds is equal up to noise, those are [`Change::Additions`]: nothing on disk is
//! contradicted, and `kvplan profile` keeps the old file, names what the new one adds, and writes
//! it with `--replace`. A field the new file drops, or any value that moved, is a change.

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
    /// Equal up to noise on everything the old one holds; the new one holds more: object
    /// fields the old lacks, and items after the last of an old list of strings (notes).
    Additions {
        /// Largest |old − new| over the numbers both hold.
        largest: f64,
        /// JSON paths of what the new one adds (`a.b`, `notes[41..]`).
        added: Vec<String>,
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
            Change::Additions { largest, added } => {
                let added: Vec<String> = added.iter().map(|a| format!("`{a}`")).collect();
                format!(
                    "equal up to the date and float noise (largest difference {largest:.1e}); the \
                     new one also records {}",
                    added.join(", ")
                )
            }
            Change::Changed { at, old, new } => format!("`{at}` was {old}, is now {new}"),
        }
    }
}

/// Compares `old` with `new`, ignoring every field named `date`.
pub fn compare(old: &Value, new: &Value) -> Change {
    let mut walk = Walk::default();
    match walk.walk(old, new, &mut String::new()) {
        Some(change) => change,
        None if walk.added.is_empty() => Change::NoiseOnly {
            largest: walk.largest,
        },
        None => Change::Additions {
            largest: walk.largest,
            added: walk.added,
        },
    }
}

/// A walk over two documents: the largest number difference and what the new one adds, until
/// the first change.
#[derive(Default)]
struct Walk {
    largest: f64,
    added: Vec<String>,
}

impl Walk {
    fn walk(&mut self, old: &Value, new: &Value, path: &mut String) -> Option<Change> {
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
                        (Some(x), Some(y)) => self.walk(x, y, path),
                        (None, Some(_)) => {
                            self.added.push(path.clone());
                            None
                        }
                        (x, y) => Some(changed(path, x, y)),
                    };
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            (Value::Array(a), Value::Array(b))
                if a.len() == b.len() || (a.len() < b.len() && b.iter().all(Value::is_string)) =>
            {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let found = self.walk(x, y, path);
                    path.truncate(len);
                    if found.is_some() {
                        return found;
                    }
                }
                if b.len() > a.len() {
                    self.added.push(format!("{path}[{}..]", a.len()));
                }
                None
            }
            (Value::Array(a), Value::Array(b)) => Some(Change::Changed {
                at: path.clone(),
                old: format!("{} items", a.len()),
                new: format!("{} items", b.len()),
            }),
            (Value::Number(a), Value::Number(b)) => numbers(a, b, path, &mut self.largest),
            _ if old == new => None,
            _ => Some(changed(path, Some(old), Some(new))),
        }
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
    fn what_a_newer_kvplan_adds_is_named_and_not_a_change() {
        // A field the old file lacks and notes after its last: additions, with the noise.
        let old = json!({"settings": {"chance": {"p": 0.5}}, "notes": ["a", "b"]});
        let new = json!({"settings": {"chance": {"p": 0.500001, "by_needle": {"p": 0.7}}},
                         "notes": ["a", "b", "c"]});
        let c = compare(&old, &new);
        assert_eq!(
            c,
            Change::Additions {
                largest: (0.500001f64 - 0.5).abs(),
                // Keys in their documents' (sorted) order.
                added: vec!["notes[2..]".into(), "settings.chance.by_needle".into()],
            }
        );
        assert_eq!(
            c.describe(),
            "equal up to the date and float noise (largest difference 1.0e-6); the new one also \
             records `notes[2..]`, `settings.chance.by_needle`"
        );
        // Anything the old one holds that moved is still the change, additions or not.
        let moved = json!({"settings": {"chance": {"p": 0.6, "by_needle": {"p": 0.7}}},
                           "notes": ["a", "b", "c"]});
        assert!(
            matches!(compare(&old, &moved), Change::Changed { ref at, .. } if at == "settings.chance.p")
        );
        // A note rewritten, or inserted before the old ones' end, is a change.
        let inserted = json!({"settings": {"chance": {"p": 0.5}}, "notes": ["a", "x", "b"]});
        assert!(
            matches!(compare(&old, &inserted), Change::Changed { ref at, .. } if at == "notes[1]")
        );
        // Only lists of strings grow: a longer list of numbers is a change.
        let longer = compare(&json!({"l": [1, 2]}), &json!({"l": [1, 2, 3]}));
        assert!(matches!(longer, Change::Changed { .. }), "{longer:?}");
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
    fn integers_strings_lengths_and_dropped_keys_must_match_exactly() {
        for (old, new, at) in [
            (json!({"kept": 42}), json!({"kept": 43}), "kept"),
            (json!({"r": "Paris"}), json!({"r": "paris"}), "r"),
            (json!({"l": [1, 2]}), json!({"l": [1, 2, 3]}), "l"),
            (json!({"n": ["a", "b"]}), json!({"n": ["a"]}), "n"),
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
