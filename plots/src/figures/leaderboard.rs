//! The kvpress leaderboard's layout: score against the effective compression ratio, one line
//! per method (its target ratios joined in order of compression), FullKV as a horizontal line.
//! The x axis is the effective ratio measured per prompt (`kvplan_eval::ratio`), linear from 0
//! (nothing evicted) rightwards, as the leaderboard plots it; each point carries its 95%
//! interval as a vertical bar when it has one.

use crate::colour;
use crate::figures::quality::first_seen;
use crate::figures::titled;
use crate::lines::{Axis, Lines, Series};
use crate::render::Draw;
use crate::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One method at one target ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Method (its colour).
    pub method: String,
    /// Its name in the legend (the method with a table's mark: `pod ‡`).
    pub label: String,
    /// Mean effective compression ratio, in [0, 1).
    pub effective: f64,
    /// Score in percent.
    pub score: f64,
    /// 95% interval of the score in percent, when there is one.
    pub interval: Option<(f64, f64)>,
}

/// The leaderboard figure of one model.
pub struct Leaderboard<'a> {
    /// Model name (title, file name).
    pub model: &'a str,
    /// What the score is (`RULER 4096, average of 13 tasks`).
    pub what: &'a str,
    /// Every method's points.
    pub points: &'a [Point],
    /// FullKV's score in percent.
    pub full: Option<f64>,
}

impl Leaderboard<'_> {
    /// One series per method, its points by effective ratio.
    fn series(&self) -> Vec<Series> {
        let methods = first_seen(self.points.iter().map(|p| p.method.clone()));
        methods
            .iter()
            .map(|m| {
                let mut mine: Vec<&Point> = self.points.iter().filter(|p| &p.method == m).collect();
                mine.sort_by(|a, b| a.effective.total_cmp(&b.effective));
                let bars: Option<Vec<(f64, f64)>> = mine.iter().map(|p| p.interval).collect();
                Series {
                    label: mine.first().map_or_else(|| m.clone(), |p| p.label.clone()),
                    colour: colour::method(m),
                    points: mine.iter().map(|p| (p.effective, p.score)).collect(),
                    markers: true,
                    errors: bars.unwrap_or_default(),
                    dashed: crate::lines::is_peer(m),
                }
            })
            .collect()
    }

    /// What the subtitle says of the bars: a line gets them only when every point of it has an
    /// interval (none where a task holds a single prompt, `kvplan_eval::stats::resamplable`).
    fn bars(series: &[Series]) -> &'static str {
        let with = series.iter().filter(|s| !s.errors.is_empty()).count();
        if with == 0 {
            "no intervals (a task holds one prompt)"
        } else if with < series.len() {
            "bars: 95% intervals (lines without: a task holds one prompt)"
        } else {
            "bars: 95% intervals"
        }
    }
}

impl Draw for Leaderboard<'_> {
    fn name(&self) -> String {
        format!("leaderboard-{}", self.model)
    }

    fn size(&self) -> (u32, u32) {
        (1100, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let series = self.series();
        let body = titled(
            root,
            &format!("{} — score vs effective compression ratio", self.model),
            &format!(
                "{}; x: 1 − KV bytes held / FullKV bytes of the context, measured per prompt; {}",
                self.what,
                Self::bars(&series)
            ),
        )?;
        let hi = self
            .points
            .iter()
            .map(|p| p.effective)
            .fold(0.75f64, f64::max);
        let ends = self
            .points
            .iter()
            .filter_map(|p| p.interval)
            .flat_map(|(a, b)| [a, b]);
        let scores: Vec<f64> = self
            .points
            .iter()
            .map(|p| p.score)
            .chain(ends)
            .chain(self.full)
            .collect();
        let references = self
            .full
            .map(|f| vec![(f, kvplan_eval::aggregate::FULL.to_string())])
            .unwrap_or_default();
        Lines {
            caption: String::new(),
            x: Axis::linear(
                "compression ratio (effective)",
                0.0,
                (hi + 0.05).min(1.0),
                8,
            ),
            y: Axis::fitting("score", &scores, true, 0.05, 8),
            series: &series,
            legend: true,
            references,
        }
        .draw(&body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(method: &str, effective: f64, score: f64) -> Point {
        Point {
            method: method.into(),
            label: method.into(),
            effective,
            score,
            interval: Some((score - 5.0, score + 5.0)),
        }
    }

    #[test]
    fn one_line_per_method_in_order_of_compression() {
        let points = [
            point("snapkv", 0.75, 40.0),
            point("snapkv", 0.25, 80.0),
            point("knorm", 0.5, 50.0),
        ];
        let fig = Leaderboard {
            model: "m",
            what: "RULER",
            points: &points,
            full: Some(90.0),
        };
        let s = fig.series();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].points, [(0.25, 80.0), (0.75, 40.0)]);
        assert_eq!(s[0].errors, [(75.0, 85.0), (35.0, 45.0)]);
        assert_eq!(fig.name(), "leaderboard-m");
        let svg = crate::render::render_svg(&fig).expect("draws");
        assert!(svg.contains("full") && svg.contains("knorm"));
    }

    #[test]
    fn a_marked_label_names_the_line_and_the_method_keeps_its_colour() {
        let points = [Point {
            label: "pod ‡".into(),
            ..point("pod", 0.1, 60.0)
        }];
        let fig = Leaderboard {
            model: "m",
            what: "RULER",
            points: &points,
            full: None,
        };
        let s = fig.series();
        assert_eq!(s[0].label, "pod ‡");
        assert_eq!(s[0].colour, colour::method("pod"));
        assert_ne!(colour::method("pod ‡"), colour::method("pod"));
    }

    #[test]
    fn the_subtitle_names_bars_only_where_lines_have_them() {
        let with = [point("snapkv", 0.5, 40.0), point("knorm", 0.5, 30.0)];
        let mut some = with.clone();
        some[1].interval = None;
        let none = [Point {
            interval: None,
            ..point("snapkv", 0.5, 40.0)
        }];
        let said = |points: &[Point]| {
            Leaderboard::bars(
                &Leaderboard {
                    model: "m",
                    what: "RULER",
                    points,
                    full: None,
                }
                .series(),
            )
        };
        assert_eq!(said(&with), "bars: 95% intervals");
        assert!(said(&some).contains("lines without"));
        assert!(said(&none).starts_with("no intervals"));
        let svg = crate::render::render_svg(&Leaderboard {
            model: "m",
            what: "RULER",
            points: &none,
            full: None,
        })
        .expect("draws");
        assert!(!svg.contains("bars: 95%"));
    }
}
