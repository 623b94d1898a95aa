//! The method names a command is asked for, parsed ([`MethodName`]), or every one.

use kvplan_planner::{MethodName, METHODS};

/// The methods `asked` for, parsed, or every method of the table; a name that does not parse is
/// one error ([`kvplan_planner::BadMethodName`]: an unknown name lists every form).
pub fn methods_or_all(asked: Option<&[String]>) -> anyhow::Result<Vec<MethodName>> {
    match asked {
        Some(names) => Ok(names.iter().map(|n| n.parse()).collect::<Result<_, _>>()?),
        None => Ok(METHODS.iter().map(|m| m.method.into()).collect()),
    }
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
        let names: Vec<String> = all.iter().map(MethodName::to_string).collect();
        assert_eq!(names, kvplan_runtime::press::PRESS_NAMES);
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
        assert!(err.contains("full, snapkv"), "{err}");
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
