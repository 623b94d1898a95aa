//! A records row's method, read once into what it names: kvplan's own ([`MethodName`]:
//! `snapkv`, `headkv@perm3`, `vllm:pyramid`), a kvpress press under kvpress's prefix
//! (`kvpress-snapkv`, `kvpress-keydiff`: `tools/kvpress_side_by_side.py`), or another name the
//! records hold. Tables, marks and the leaderboard ask it what a row is instead of matching
//! pieces of the string.

use kvplan_planner::{Method, MethodName};

/// Prefix of the methods kvpress ran (`tools/kvpress_side_by_side.py`).
pub const KVPRESS_PREFIX: &str = "kvpress-";

/// What a records row's method names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowMethod<'a> {
    /// A kvplan method, parsed.
    Kvplan(MethodName),
    /// A kvpress press: the name after [`KVPRESS_PREFIX`] (`snapkv`, `keydiff`).
    Kvpress(&'a str),
    /// Any other name.
    Other(&'a str),
}

impl<'a> RowMethod<'a> {
    /// The row method `method` read.
    pub fn of(method: &'a str) -> Self {
        if let Some(press) = method.strip_prefix(KVPRESS_PREFIX) {
            return Self::Kvpress(press);
        }
        method.parse().map_or(Self::Other(method), Self::Kvplan)
    }

    /// Whether the row is kvplan's FullKV (`full`; not kvpress's `kvpress-full`).
    pub fn is_full(self) -> bool {
        matches!(self, Self::Kvplan(m) if m.is_full())
    }

    /// The kvplan method the row runs or kvpress's press stands for (`headkv` of
    /// `headkv@perm3`, `vllm:headkv` and `kvpress-headkv`); `None` for any other name.
    pub fn method(self) -> Option<Method> {
        match self {
            Self::Kvplan(m) => Some(m.method()),
            Self::Kvpress(press) => press.parse().ok(),
            Self::Other(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_kvplans_kvpress_or_other() {
        assert!(RowMethod::of("full").is_full());
        assert!(!RowMethod::of("kvpress-full").is_full());
        assert_eq!(
            RowMethod::of("kvpress-keydiff"),
            RowMethod::Kvpress("keydiff")
        );
        assert_eq!(RowMethod::of("kvpress-keydiff").method(), None);
        assert_eq!(
            RowMethod::of("kvpress-snapkv").method(),
            Some(Method::SnapKv)
        );
        assert_eq!(RowMethod::of("vllm:headkv").method(), Some(Method::HeadKv));
        assert_eq!(RowMethod::of("headkv@perm1").method(), Some(Method::HeadKv));
        assert_eq!(RowMethod::of("pyramidkv"), RowMethod::Other("pyramidkv"));
    }
}
