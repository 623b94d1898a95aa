//! The method names a command is asked for: checked against the press registry, or every one.

use kvplan_runtime::press::{PressName, PRESS_NAMES};

/// The methods `asked` for, or every method of the press registry; an unknown name is one error
/// listing the registry.
pub fn methods_or_all(asked: Option<&[String]>) -> anyhow::Result<Vec<String>> {
    let methods: Vec<String> = match asked {
        Some(m) => m.to_vec(),
        None => PRESS_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    // The registry's one parse of a press name, and its one error for a name it does not know.
    for m in &methods {
        PressName::parse(m)?;
    }
    Ok(methods)
}

/// `names` (comma-separated on the command line) parsed, duplicates dropped in order, or `all`
/// when one of them is `all`.
pub fn parse_list<T>(names: &[String], all: &[T]) -> anyhow::Result<Vec<T>>
where
    T: std::str::FromStr + PartialEq + Clone,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    if names.iter().any(|n| n == "all") {
        return Ok(all.to_vec());
    }
    let mut out = Vec::new();
    for n in names {
        let x: T = n.trim().parse()?;
        if !out.contains(&x) {
            out.push(x);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_methods_asked_is_every_registry_method() {
        let all = methods_or_all(None).unwrap_or_default();
        assert_eq!(all.len(), PRESS_NAMES.len());
    }

    #[test]
    fn an_unknown_method_is_one_error_listing_the_registry() {
        let asked = [String::from("nope")];
        let err = methods_or_all(Some(&asked)).err().map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(
            err.contains("unknown method `nope`; the registry has"),
            "{err}"
        );
        assert!(err.contains(PRESS_NAMES[0]), "{err}");
    }

    #[test]
    fn a_list_drops_duplicates_in_order_and_all_is_everything() {
        let names = |s: &[&str]| s.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let got: Vec<u32> = parse_list(&names(&["3", " 1", "3"]), &[1, 2, 3]).unwrap_or_default();
        assert_eq!(got, vec![3, 1]);
        let got: Vec<u32> = parse_list(&names(&["1", "all"]), &[1, 2, 3]).unwrap_or_default();
        assert_eq!(got, vec![1, 2, 3]);
    }
}
