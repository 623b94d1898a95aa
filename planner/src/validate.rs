//! Small checks shared by the profile and plan validators; each error names its JSON path.

use crate::{Error, Geometry, Result};
use serde::de::DeserializeOwned;

/// Parses `text` into `T`, naming the JSON path of any missing, unknown or mistyped field.
pub(crate) fn parse<T: DeserializeOwned>(what: &'static str, text: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        Error::Parse {
            what,
            path,
            message: e.into_inner().to_string(),
        }
    })
}

/// Checks `schema_version` before the full parse, so that a file of a newer schema is reported
/// as such and not as an unknown field.
pub(crate) fn schema_version(what: &'static str, text: &str, expected: u32) -> Result<()> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| Error::Parse {
        what,
        path: String::from("."),
        message: e.to_string(),
    })?;
    match value.get("schema_version") {
        None => Err(Error::invalid("schema_version", expected, "nothing")),
        Some(v) if v.as_u64() == Some(u64::from(expected)) => Ok(()),
        Some(v)
            if v.as_u64()
                .is_some_and(|f| f >= 1 && f < u64::from(expected)) =>
        {
            Err(Error::OldSchema {
                what,
                found: v.as_u64().unwrap_or_default(),
                expected,
            })
        }
        Some(v) => Err(Error::invalid("schema_version", expected, v)),
    }
}

/// A loaded file's `schema_version`: exactly `expected`, the version this build reads and writes.
pub(crate) fn current_schema(found: u32, expected: u32) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(Error::invalid("schema_version", expected, found))
    }
}

/// A finite number ≥ 0.
pub(crate) fn non_negative(path: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(path, "a finite number >= 0", v))
    }
}

/// A finite number in `[lo, hi]`.
pub(crate) fn in_range(path: &str, v: f64, lo: f64, hi: f64) -> Result<()> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(Error::invalid(path, format!("a number in [{lo}, {hi}]"), v))
    }
}

/// A finite number strictly greater than `lo`.
pub(crate) fn above(path: &str, v: f64, lo: f64) -> Result<()> {
    if v.is_finite() && v > lo {
        Ok(())
    } else {
        Err(Error::invalid(path, format!("a finite number > {lo}"), v))
    }
}

/// An integer at least `lo`.
pub(crate) fn at_least(path: &str, v: usize, lo: usize) -> Result<()> {
    if v >= lo {
        Ok(())
    } else {
        Err(Error::invalid(path, format!("at least {lo}"), v))
    }
}

/// A list of exactly `expected` entries.
pub(crate) fn len(path: &str, found: usize, expected: usize, what: &str) -> Result<()> {
    if found == expected {
        Ok(())
    } else {
        Err(Error::invalid(
            path,
            format!("{expected} entries ({what})"),
            format!("{found} entries"),
        ))
    }
}

/// A list of one entry per layer of `g` at `path`, each entry passing `check` at
/// `path[i]`.
pub(crate) fn per_layer<T>(
    path: &str,
    items: &[T],
    g: &Geometry,
    check: impl Fn(&T, &str) -> Result<()>,
) -> Result<()> {
    len(path, items.len(), g.layers, "one per layer")?;
    for (l, item) in items.iter().enumerate() {
        check(item, &format!("{path}[{l}]"))?;
    }
    Ok(())
}

/// A `[rows][cols]` matrix of finite numbers in `[lo, hi]`.
pub(crate) fn matrix(
    path: &str,
    m: &[Vec<f64>],
    rows: (usize, &str),
    cols: (usize, &str),
    lo: f64,
    hi: f64,
) -> Result<()> {
    len(path, m.len(), rows.0, rows.1)?;
    for (i, row) in m.iter().enumerate() {
        let p = format!("{path}[{i}]");
        len(&p, row.len(), cols.0, cols.1)?;
        for (j, &v) in row.iter().enumerate() {
            in_range(&format!("{p}[{j}]"), v, lo, hi)?;
        }
    }
    Ok(())
}
