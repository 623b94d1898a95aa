//! Shared line-chart pieces: axes with round, non-overlapping ticks ([`Axis`]) and a panel of
//! labelled series with markers, optional interval bars and a legend ([`Lines`]).

use crate::heatmap::{nice_ticks, step_decimals, text_px, Ticked};
use crate::{font, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;

/// One axis: its range, tick positions and tick text.
pub struct Axis {
    pub desc: String,
    pub range: Range<f64>,
    pub keys: Vec<f64>,
    pub format: Box<dyn Fn(f64) -> String>,
}

impl Axis {
    /// A linear axis over `[lo, hi]` with at most about `max_ticks` round ticks.
    pub fn linear(desc: &str, lo: f64, hi: f64, max_ticks: usize) -> Axis {
        let (lo, hi) = if hi - lo < 1e-12 {
            (lo - 0.5, hi + 0.5)
        } else {
            (lo, hi)
        };
        let (keys, step) = nice_ticks(lo, hi, max_ticks);
        let d = step_decimals(step);
        Axis {
            desc: desc.to_string(),
            range: lo..hi,
            keys,
            format: Box::new(move |v| format!("{v:.d$}")),
        }
    }

    /// A linear axis over the finite `values` padded by `pad` of their span (and including 0
    /// when `from_zero`).
    pub fn fitting(
        desc: &str,
        values: &[f64],
        from_zero: bool,
        pad: f64,
        max_ticks: usize,
    ) -> Axis {
        let finite = values.iter().copied().filter(|v| v.is_finite());
        let (mut lo, mut hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if from_zero {
            lo = lo.min(0.0);
        }
        if hi - lo < 1e-9 {
            // One value (e.g. every method scored 0.5): an axis around it, not a 1e-9 sliver
            // whose ticks and reference lines map thousands of pixels away.
            let half = hi.abs().max(1.0) * 0.5;
            (lo, hi) = (lo - half, hi + half);
        }
        let span = hi - lo;
        let lo = if from_zero && lo >= 0.0 {
            lo
        } else {
            lo - span * pad
        };
        Axis::linear(desc, lo, hi + span * pad, max_ticks)
    }

    /// Ticks that fit `px` pixels of axis for labels about `label_px` wide: how many.
    pub fn max_ticks(px: f64, label_px: f64) -> usize {
        ((px / label_px.max(1.0)) as usize).clamp(2, 12)
    }

    fn ticked(&self) -> Ticked {
        Ticked::new(self.range.clone(), self.keys.clone())
    }
}

/// A labelled series of points.
pub struct Series {
    pub label: String,
    pub colour: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// Draw a circle at each point.
    pub markers: bool,
    /// The y interval `(low, high)` of each point, drawn as a vertical bar; empty: none.
    pub errors: Vec<(f64, f64)>,
    /// Draw the line dashed (a peer's implementation: kvpress's presses, [`is_peer`]).
    pub dashed: bool,
}

impl Series {
    /// A solid line through `points`, a marker at each, no interval bars.
    pub fn line(label: String, colour: RGBColor, points: Vec<(f64, f64)>) -> Series {
        Series {
            label,
            colour,
            points,
            markers: true,
            errors: Vec::new(),
            dashed: false,
        }
    }
}

/// Each of `values` at its index: the points `(i, v)` of a value per layer.
pub fn by_index(values: impl IntoIterator<Item = f64>) -> Vec<(f64, f64)> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| (i as f64, v))
        .collect()
}

/// Every point's x and every point's y of `series`, for the axes that fit them.
pub fn coordinates(series: &[Series]) -> (Vec<f64>, Vec<f64>) {
    series.iter().flat_map(|s| s.points.iter().copied()).unzip()
}

/// Whether `method` is a peer's implementation (kvpress's presses, `kvpress-…`): drawn dashed,
/// in the colour of kvplan's method of the same name where there is one.
pub fn is_peer(method: &str) -> bool {
    crate::colour::peer_press(method).is_some()
}

/// Colour of reference lines (FullKV, uniform budgets): black, apart from every method's colour
/// (a grey reference read as TreeKV's grey line in the leaderboard figure).
pub const REFERENCE: RGBColor = RGBColor(0, 0, 0);

/// A legend column: a line swatch and a label per entry, from `top` px down.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor, u32, bool)],
    top: i32,
) -> Result<()> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let style = font::text(font::TICK).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, colour, width, dashed)) in entries.iter().enumerate() {
        let y = top + i as i32 * 26;
        let swatch: &[(i32, i32)] = if *dashed {
            &[(8, 17), (25, 34)]
        } else {
            &[(8, 34)]
        };
        for &(a, b) in swatch {
            area.draw(&PathElement::new(
                vec![(a, y), (b, y)],
                colour.stroke_width(*width + 1),
            ))?;
        }
        area.draw(&Text::new(label.clone(), (42, y), style.clone()))?;
    }
    Ok(())
}

/// A line panel.
pub struct Lines<'a> {
    pub caption: String,
    pub x: Axis,
    pub y: Axis,
    pub series: &'a [Series],
    /// Draw a legend in a column right of the plot (never over the data).
    pub legend: bool,
    /// Horizontal reference lines: (y, label).
    pub references: Vec<(f64, String)>,
}

/// Width of the widest tick label of `axis`.
pub fn widest_label(axis: &Axis) -> f64 {
    axis.keys
        .iter()
        .map(|&k| text_px(&(axis.format)(k), font::TICK))
        .fold(0.0, f64::max)
}

impl Lines<'_> {
    fn legend_entries(&self) -> Vec<(String, RGBColor, u32, bool)> {
        let refs = self
            .references
            .iter()
            .map(|(_, l)| (l.clone(), REFERENCE, 2, false));
        let series = self
            .series
            .iter()
            .map(|s| (s.label.clone(), s.colour, 3, s.dashed));
        refs.chain(series).collect()
    }

    /// Draws the panel on `area`.
    pub fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let entries = self.legend_entries();
        let (w, _) = area.dim_in_pixel();
        let legend_w = entries
            .iter()
            .map(|(l, _, _, _)| text_px(l, font::TICK))
            .fold(0.0, f64::max) as u32
            + 50;
        let (plot, legend) = if self.legend && !entries.is_empty() {
            let (p, l) = area.split_horizontally(w.saturating_sub(legend_w));
            (p, Some(l))
        } else {
            (area.clone(), None)
        };
        let left = (widest_label(&self.y) + 50.0) as u32;
        let mut chart = ChartBuilder::on(&plot)
            .caption(&self.caption, font::text(font::PANEL))
            .margin(10)
            .margin_right(24)
            .x_label_area_size(52)
            .y_label_area_size(left)
            .build_cartesian_2d(self.x.ticked(), self.y.ticked())?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .x_desc(&self.x.desc)
            .y_desc(&self.y.desc)
            .axis_desc_style(font::text(font::AXIS))
            .label_style(font::text(font::TICK))
            .x_label_formatter(&|v| (self.x.format)(*v))
            .y_label_formatter(&|v| (self.y.format)(*v))
            .draw()?;
        let (x0, x1) = (self.x.range.start, self.x.range.end);
        for (y, label) in &self.references {
            let _ = label;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x0, *y), (x1, *y)],
                REFERENCE.stroke_width(2),
            )))?;
        }
        for s in self.series {
            let c = s.colour;
            // Dense curves without markers read better thinner.
            let width = if s.markers { 3 } else { 2 };
            if s.dashed {
                chart.draw_series(DashedLineSeries::new(
                    s.points.iter().copied(),
                    10,
                    6,
                    c.stroke_width(width),
                ))?;
            } else {
                chart.draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    c.stroke_width(width),
                ))?;
            }
            if s.markers {
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
            }
            let bars = s.points.iter().zip(&s.errors);
            chart.draw_series(bars.map(|(&(x, _), &(lo, hi))| {
                PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2))
            }))?;
        }
        if let Some(legend) = legend {
            let top = chart.plotting_area().get_pixel_range().1.start - legend.get_base_pixel().1;
            draw_legend(&legend, &entries, top + 10)?;
        }
        Ok(())
    }
}
