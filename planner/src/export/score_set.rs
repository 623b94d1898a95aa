//! Which HeadKV score set the `headkv` and `duo` exports carry, and the plan's scores of a set.

use crate::{Error, HeadKvSection, Method, Plan, Result};

/// Which HeadKV score set the `headkv` and `duo` exports carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScoreSet {
    /// Retrieval heads (HeadKV-R, eq. 1): the plan's `headkv-r` section.
    #[default]
    Retrieval,
    /// Retrieval-reasoning heads (HeadKV-R2, eq. 2): the plan's `headkv` section.
    Reasoning,
}

impl ScoreSet {
    /// The names the command line uses.
    pub const NAMES: [&'static str; 2] = ["retrieval", "reasoning"];

    /// This set's name.
    pub fn name(self) -> &'static str {
        match self {
            ScoreSet::Retrieval => Self::NAMES[0],
            ScoreSet::Reasoning => Self::NAMES[1],
        }
    }

    pub(crate) fn method(self) -> Method {
        match self {
            ScoreSet::Retrieval => Method::HeadKvR,
            ScoreSet::Reasoning => Method::HeadKv,
        }
    }
}

impl std::str::FromStr for ScoreSet {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "retrieval" => Ok(ScoreSet::Retrieval),
            "reasoning" => Ok(ScoreSet::Reasoning),
            _ => Err(Error::invalid(
                "--scores",
                format!("one of {}", ScoreSet::NAMES.join(", ")),
                s,
            )),
        }
    }
}

/// The HeadKV scores `[layer][q_head]` of `set`, refused when all zero.
pub(crate) fn scores(plan: &Plan, set: ScoreSet) -> Result<&HeadKvSection> {
    let method = set.method();
    let section = plan.sections.get::<HeadKvSection>(method).ok_or_else(|| {
        Error::invalid(
            format!("sections.{method}"),
            format!("the {} scores (a {method} section)", set.name()),
            "no such section",
        )
    })?;
    if section.scores.iter().flatten().all(|&s| s == 0.0) {
        return Err(Error::invalid(
            format!("sections.{method}.scores"),
            "at least one non-zero head score",
            format!(
                "all zero ({} of {} profiling trials answered)",
                section.trials_kept, section.trials_total
            ),
        ));
    }
    Ok(section)
}
