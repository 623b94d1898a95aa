//! Method names, the same everywhere (planner sections, runtime registry, CLI, results).

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A method a plan can hold a section for. `full` (FullKV) needs no plan and is not listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Method {
    #[serde(rename = "snapkv")]
    SnapKv,
    #[serde(rename = "h2o")]
    H2o,
    #[serde(rename = "streaming")]
    Streaming,
    #[serde(rename = "pyramid")]
    Pyramid,
    #[serde(rename = "headkv")]
    HeadKv,
    #[serde(rename = "headkv-r")]
    HeadKvR,
    #[serde(rename = "spindle")]
    Spindle,
    #[serde(rename = "pod")]
    Pod,
    #[serde(rename = "treekv")]
    TreeKv,
}

impl Method {
    /// Every method, in the order sections appear in a plan.
    pub const ALL: [Method; 9] = [
        Method::SnapKv,
        Method::H2o,
        Method::Streaming,
        Method::Pyramid,
        Method::HeadKv,
        Method::HeadKvR,
        Method::Spindle,
        Method::Pod,
        Method::TreeKv,
    ];

    /// The method's name: `snapkv`, `h2o`, `streaming`, `pyramid`, `headkv`, `headkv-r`,
    /// `spindle`, `pod`, `treekv`.
    pub fn name(self) -> &'static str {
        match self {
            Method::SnapKv => "snapkv",
            Method::H2o => "h2o",
            Method::Streaming => "streaming",
            Method::Pyramid => "pyramid",
            Method::HeadKv => "headkv",
            Method::HeadKvR => "headkv-r",
            Method::Spindle => "spindle",
            Method::Pod => "pod",
            Method::TreeKv => "treekv",
        }
    }

    /// Whether the method's budgets are driven by the target (they sum to it exactly).
    /// PoD is not: it keeps every token and saves distant keys by layer sharing.
    pub fn follows_target(self) -> bool {
        self != Method::Pod
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Error::UnknownMethod(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Method::ALL {
            assert_eq!(m.name().parse::<Method>().ok(), Some(m));
        }
        assert!("full".parse::<Method>().is_err());
    }
}
