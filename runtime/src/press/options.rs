//! The switches of a press request beyond the plan ([`PressOptions`]): how window-based
//! selections combine a KV head's query heads, SpindleKV's GQA handling and eq. 2 denominator,
//! and where an evicting press's entries sit after an eviction. Each has a name on the command
//! line and in the results' settings.

use super::gqa::GqaAggregation;

/// Press switches beyond the plan; the defaults are each method's own setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PressOptions {
    /// How window-based selections (SnapKV, PyramidKV, HeadKV, HeadKV-R; SpindleKV without
    /// the repeat) combine a KV head's query heads ([`super::gqa`]).
    pub gqa: GqaAggregation,
    /// SpindleKV on a GQA model: the repeat variant (`docs/papers/spindlekv.md` §3.3, the default)
    /// or one decision per KV head (eq. 3).
    pub spindle_gqa: SpindleGqa,
    /// SpindleKV's eq. 2 denominator (the window's mean by default; `l − a` as printed).
    pub spindle_denominator: Denominator,
    /// Positions of evicting presses; `None`: each method's own (TreeKV re-assigns after every
    /// eviction, the others when the stream reaches the trained context).
    pub positions: Option<PositionPolicy>,
}

/// Where an evicting press's entries sit after an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionPolicy {
    /// Positions `0..len` after every eviction, keys re-rotated (TreeKV §4.1, StreamingLLM §3.2).
    Reassign,
    /// Original positions, re-assigned only when the stream reaches the trained context.
    Keep,
}

/// SpindleKV's eq. 2 denominator (`super::spindle`'s module header).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Denominator {
    /// `min(l_w, l − a)`: the window rows that see key `a` — the window's mean attention.
    #[default]
    WindowRows,
    /// `l − a`, eq. 2 as printed.
    Printed,
}

/// How SpindleKV serves a GQA model (§3.3, `super::spindle`'s module header).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpindleGqa {
    /// KV heads repeated per query head before eviction, one codebook per layer.
    #[default]
    Repeat,
    /// One eviction per KV head from its query heads' combined scores (eq. 3).
    Group,
}

/// `FromStr` and `name()` over a fixed table of names.
macro_rules! named {
    ($ty:ty, $what:literal, $($variant:ident => $name:literal,)+) => {
        impl $ty {
            /// The names the command line and the results' settings use.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// This value's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }
        }

        impl std::str::FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
                match s {
                    $($name => Ok(Self::$variant),)+
                    _ => Err(format!(
                        "unknown {} `{s}`; expected one of {}",
                        $what,
                        Self::NAMES.join(", ")
                    )),
                }
            }
        }
    };
}

named!(Denominator, "SpindleKV denominator", WindowRows => "window-rows", Printed => "l-a",);
named!(SpindleGqa, "SpindleKV GQA handling", Repeat => "repeat", Group => "group",);
named!(PositionPolicy, "position policy", Reassign => "reassign", Keep => "keep",);

impl Denominator {
    /// The denominator of key `a` among `l` entries, `rows` window rows observed.
    pub fn of(self, l: usize, a: usize, rows: usize) -> f32 {
        match self {
            Self::WindowRows => rows.min(l - a).max(1) as f32,
            Self::Printed => (l - a) as f32,
        }
    }
}
