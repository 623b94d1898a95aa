//! Quality against KV-cache size, one line per method (its budgets joined in order of size), one
//! panel per task. KV size is the share of the real FullKV bytes (docs/design.md "Equal KV size")
//! on a log₂ axis; FullKV itself is the grey reference line. Each point carries its 95% interval as
//! a vertical bar when the results file has one (schema version 2).

use crate::colour;
use crate::figures::titled;
use crate::heatmap::label_step;
use crate::lines::{Axis, Lines, Series};
use crate::render::Draw;
use crate::results::QualityPoint;
use crate::Result;
use kvplan_eval::row_method::RowMethod;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Quality-vs-KV-size curves.
pub struct Quality<'a> {
    model: &'a str,
    points: &'a [QualityPoint],
}

/// Distinct values in first-seen order.
pub fn first_seen<T: PartialEq + Clone>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// `p` percent written without trailing zeros: 12.5%, 6.25%, 100%.
fn percent(fraction: f64) -> String {
    let s = format!("{:.2}", fraction * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// Each point's 95% interval as a bar; none when any point lacks one (a version-1 file).
fn bars(points: &[&QualityPoint]) -> Vec<(f64, f64)> {
    let all: Option<Vec<(f64, f64)>> = points
        .iter()
        .map(|p| p.interval.map(|i| (i.low, i.high)))
        .collect();
    all.unwrap_or_default()
}

/// Octaves between neighbouring series at the same KV size.
const DODGE: f64 = 0.04;

/// Nudges series with interval bars apart along x (series i of n by (i − (n−1)/2)·[`DODGE`]
/// octaves), so bars of methods at the same KV size do not hide each other.
fn dodge(series: &mut [Series]) {
    let n = series.iter().filter(|s| !s.errors.is_empty()).count();
    let barred = series.iter_mut().filter(|s| !s.errors.is_empty());
    for (i, s) in barred.enumerate() {
        let shift = (i as f64 - (n as f64 - 1.0) / 2.0) * DODGE;
        s.points.iter_mut().for_each(|p| p.0 += shift);
    }
}

impl<'a> Quality<'a> {
    /// The figure of `points`.
    pub fn new(model: &'a str, points: &'a [QualityPoint]) -> Self {
        Quality { model, points }
    }

    fn tasks(&self) -> Vec<String> {
        first_seen(self.points.iter().map(|p| p.task.clone()))
    }

    fn x_axis(&self, px: f64) -> Axis {
        let lo = self
            .points
            .iter()
            .map(|p| p.kv_fraction.log2())
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::min)
            .floor()
            .min(-1.0);
        let octaves = (-lo) as usize;
        let step = label_step(octaves + 1, px, 70.0);
        let keys = (0..=octaves).step_by(step).map(|i| -(i as f64)).collect();
        Axis {
            desc: String::from("KV cache size (share of FullKV, log scale)"),
            range: lo - 0.25..0.25,
            keys,
            format: Box::new(|v| percent(2f64.powf(v))),
        }
    }

    fn draw_task<DB: DrawingBackend>(
        &self,
        task: &str,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<()> {
        let pts: Vec<&QualityPoint> = self.points.iter().filter(|p| p.task == task).collect();
        let methods = first_seen(pts.iter().map(|p| p.method.clone()));
        let mut references = Vec::new();
        let mut series = Vec::new();
        for m in &methods {
            let mut mine: Vec<&QualityPoint> =
                pts.iter().copied().filter(|p| &p.method == m).collect();
            mine.sort_by(|a, b| a.kv_fraction.total_cmp(&b.kv_fraction));
            if RowMethod::of(m).is_full() && mine.len() == 1 {
                references.push((mine[0].score, m.clone()));
                continue;
            }
            series.push(Series {
                label: m.clone(),
                colour: colour::method(m),
                points: mine
                    .iter()
                    .map(|p| (p.kv_fraction.log2(), p.score))
                    .collect(),
                markers: true,
                errors: bars(&mine),
                dashed: crate::lines::is_peer(m),
            });
        }
        dodge(&mut series);
        let ends = pts
            .iter()
            .filter_map(|p| p.interval)
            .flat_map(|i| [i.low, i.high]);
        let scores: Vec<f64> = pts.iter().map(|p| p.score).chain(ends).collect();
        let (w, _) = area.dim_in_pixel();
        Lines {
            caption: task.to_string(),
            x: self.x_axis(w as f64 - 180.0),
            y: Axis::fitting("score", &scores, false, 0.1, 8),
            series: &series,
            legend: true,
            references,
        }
        .draw(area)
    }
}

impl Draw for Quality<'_> {
    fn name(&self) -> String {
        String::from("quality-vs-kv")
    }

    fn size(&self) -> (u32, u32) {
        let n = self.tasks().len().max(1) as u32;
        let cols = n.min(2);
        (cols * 800 + 40, n.div_ceil(cols) * 620 + 80)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!("{} — quality vs KV-cache size", self.model),
            "each point one method at one budget, bars its 95% interval (methods at equal KV size \
             nudged apart); KV bytes over the model's real FullKV bytes",
        )?;
        let tasks = self.tasks();
        let n = tasks.len().max(1);
        let cols = n.min(2);
        let areas = body.split_evenly((n.div_ceil(cols), cols));
        for (task, area) in tasks.iter().zip(&areas) {
            self.draw_task(task, area)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_need_every_interval() {
        use crate::results::ScoreInterval;
        use kvplan_eval::results::IntervalMethod;
        let mut p = QualityPoint {
            task: "niah".into(),
            method: "snapkv".into(),
            budget: Some(64),
            ratio: None,
            kv_fraction: 0.25,
            score: 0.5,
            n: Some(10),
            clusters: None,
            interval: Some(ScoreInterval {
                low: 0.2,
                high: 0.8,
                method: IntervalMethod::Wilson,
            }),
            vs_snapkv: None,
            vs_full: None,
        };
        assert_eq!(bars(&[&p, &p]), vec![(0.2, 0.8), (0.2, 0.8)]);
        let old = QualityPoint {
            interval: None,
            ..p.clone()
        };
        assert!(bars(&[&p, &old]).is_empty());
        p.interval = None;
        assert!(bars(&[&p]).is_empty());
    }

    #[test]
    fn dodging_centres_the_series_with_bars() {
        let line = |errors: Vec<(f64, f64)>| Series {
            label: String::new(),
            colour: RGBColor(0, 0, 0),
            points: vec![(-2.0, 0.5)],
            markers: true,
            errors,
            dashed: false,
        };
        let mut s = [
            line(vec![(0.4, 0.6)]),
            line(Vec::new()),
            line(vec![(0.4, 0.6)]),
        ];
        dodge(&mut s);
        let xs: Vec<f64> = s.iter().map(|l| l.points[0].0).collect();
        assert_eq!(xs, [-2.0 - DODGE / 2.0, -2.0, -2.0 + DODGE / 2.0]);
    }

    #[test]
    fn percents_read_plainly() {
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.125), "12.5%");
        assert_eq!(percent(0.0625), "6.25%");
        assert_eq!(percent(1.0 / 128.0), "0.78%");
    }
}
