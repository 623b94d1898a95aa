//! Shared drawing pieces: a labelled heatmap panel (cell grid, thinned tick labels, optional
//! numbers in cells and outlined rectangles), a vertical colour bar with values, and line
//! panels' tick spacing. Row 0 is drawn at the bottom.

use crate::colour::{self, viridis};
use crate::{font, Result};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;

/// A rectangle outlined on a heatmap, in cell units: columns `x[0]..x[1]`, rows `y[0]..y[1]`.
#[derive(Clone, Copy, Debug)]
pub struct Outline {
    pub x: [f64; 2],
    pub y: [f64; 2],
    pub colour: RGBColor,
    pub width: u32,
}

/// Colour scale of a heatmap: values from `lo` (dark) to `hi` (bright).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub lo: f64,
    pub hi: f64,
}

impl Scale {
    /// The scale spanning `values` (finite ones); a constant or empty input gets a unit span.
    pub fn spanning<'a>(values: impl IntoIterator<Item = &'a f64>) -> Scale {
        let (lo, hi) = values
            .into_iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        if !lo.is_finite() {
            Scale { lo: 0.0, hi: 1.0 }
        } else if hi - lo < 1e-12 {
            Scale { lo, hi: lo + 1.0 }
        } else {
            Scale { lo, hi }
        }
    }

    /// Position of `v` on the scale, in [0, 1].
    pub fn unit(&self, v: f64) -> f64 {
        ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    /// The colour of `v` (grey for NaN: no data).
    pub fn colour(&self, v: f64) -> RGBColor {
        if v.is_nan() {
            colour::MISSING
        } else {
            viridis(self.unit(v))
        }
    }
}

/// One heatmap panel. `values[row][col]`; NaN marks a cell with no data.
pub struct Heatmap<'a> {
    pub caption: String,
    pub values: &'a [Vec<f64>],
    pub x_desc: String,
    pub y_desc: String,
    /// One label per column / row.
    pub x_labels: Vec<String>,
    pub y_labels: Vec<String>,
    pub scale: Scale,
    /// Decimals of the number written in each cell; None writes none.
    pub cell_decimals: Option<usize>,
    pub outlines: Vec<Outline>,
}

/// Smallest step in 1, 2, 5, 10, 20, 50, … that keeps `n` labels of `label_px` each within
/// `available_px`.
pub fn label_step(n: usize, available_px: f64, label_px: f64) -> usize {
    let fits = |step: usize| (n.div_ceil(step) as f64) * label_px <= available_px;
    let mut base = 1;
    loop {
        for m in [1, 2, 5] {
            let step = base * m;
            if step >= n || fits(step) {
                return step.max(1);
            }
        }
        base *= 10;
    }
}

/// Approximate width in px of `text` at `size` (DejaVu Sans averages ~0.6 em per character).
pub fn text_px(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.62
}

/// A linear f64 axis whose ticks sit exactly at `keys` (plotters' `WithKeyPoints` over f64
/// loses the formatter bound that `configure_mesh` needs, so this small one replaces it).
#[derive(Clone, Debug)]
pub struct Ticked {
    pub range: Range<f64>,
    pub keys: Vec<f64>,
}

impl Ticked {
    /// Axis over `range` with ticks at `keys`.
    pub fn new(range: Range<f64>, keys: Vec<f64>) -> Self {
        Ticked { range, keys }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let t = if span.abs() < f64::EPSILON {
            0.0
        } else {
            (value - self.range.start) / span
        };
        // Values far outside the range (a reference line off the axis) stay a few axis lengths
        // away instead of overflowing the pixel arithmetic.
        let t = if t.is_finite() {
            t.clamp(-8.0, 8.0)
        } else {
            0.0
        };
        limit.0 + (t * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Light points would only draw mesh lines, which these figures do not use.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Key points at the centres of every `step`-th cell among `n`.
fn centres(n: usize, step: usize) -> Vec<f64> {
    (0..n)
        .step_by(step.max(1))
        .map(|i| i as f64 + 0.5)
        .collect()
}

fn label_at(labels: &[String], v: f64) -> String {
    if v < 0.0 {
        return String::new();
    }
    labels.get(v as usize).cloned().unwrap_or_default()
}

impl Heatmap<'_> {
    fn rows(&self) -> usize {
        self.values.len()
    }

    fn cols(&self) -> usize {
        self.values.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Draws the panel on `area`; returns the absolute pixel rows of its plotting area (for a
    /// colour bar beside it).
    pub fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<Range<i32>> {
        let (rows, cols) = (self.rows().max(1), self.cols().max(1));
        let (w, h) = area.dim_in_pixel();
        let y_label_w = self
            .y_labels
            .iter()
            .map(|l| text_px(l, font::TICK))
            .fold(0.0, f64::max);
        let x_label_w = self
            .x_labels
            .iter()
            .map(|l| text_px(l, font::TICK))
            .fold(0.0, f64::max);
        let left = (y_label_w + 45.0) as u32;
        let plot_w = (w as f64 - left as f64 - 20.0).max(10.0);
        let plot_h = (h as f64 - 110.0).max(10.0);
        let x_step = label_step(cols, plot_w, x_label_w + 12.0);
        let y_step = label_step(rows, plot_h, font::TICK * 1.5);
        let x_keys = centres(cols, x_step);
        let y_keys = centres(rows, y_step);
        let mut chart = ChartBuilder::on(area)
            .caption(&self.caption, font::text(font::PANEL))
            .margin(8)
            .margin_right(14)
            .x_label_area_size(50)
            .y_label_area_size(left)
            .build_cartesian_2d(
                Ticked::new(0.0..cols as f64, x_keys),
                Ticked::new(0.0..rows as f64, y_keys),
            )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .axis_desc_style(font::text(font::AXIS))
            .label_style(font::text(font::TICK))
            .x_label_formatter(&|v| label_at(&self.x_labels, *v))
            .y_label_formatter(&|v| label_at(&self.y_labels, *v))
            .draw()?;
        let cells = self.values.iter().enumerate().flat_map(|(r, row)| {
            row.iter().enumerate().map(move |(c, &v)| {
                let (x, y) = (c as f64, r as f64);
                Rectangle::new([(x, y), (x + 1.0, y + 1.0)], self.scale.colour(v).filled())
            })
        });
        chart.draw_series(cells)?;
        if let Some(d) = self.cell_decimals {
            let cell_px = (plot_w / cols as f64).min(plot_h / rows as f64);
            let size = (cell_px * 0.45).clamp(9.0, 20.0);
            let texts = self.values.iter().enumerate().flat_map(|(r, row)| {
                row.iter()
                    .enumerate()
                    .filter(|(_, v)| v.is_finite())
                    .map(move |(c, &v)| {
                        let ink = if colour::is_light(self.scale.colour(v)) {
                            RGBColor(20, 20, 20)
                        } else {
                            WHITE
                        };
                        let style = font::coloured(size, ink).pos(text_centre());
                        Text::new(format!("{v:.d$}"), (c as f64 + 0.5, r as f64 + 0.5), style)
                    })
            });
            chart.draw_series(texts)?;
        }
        let outlines = self.outlines.iter().map(|o| {
            Rectangle::new(
                [(o.x[0], o.y[0]), (o.x[1], o.y[1])],
                o.colour.stroke_width(o.width),
            )
        });
        chart.draw_series(outlines)?;
        Ok(chart.plotting_area().get_pixel_range().1)
    }
}

/// Text anchored at its centre.
pub fn text_centre() -> plotters::style::text_anchor::Pos {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    Pos::new(HPos::Center, VPos::Center)
}

/// Width in px that [`colour_bar`] needs.
pub const COLOUR_BAR_WIDTH: u32 = 130;

/// Decimals that label a scale of `span` in round numbers.
pub fn decimals_for(span: f64) -> usize {
    if span >= 20.0 {
        0
    } else if span >= 2.0 {
        1
    } else {
        2
    }
}

/// Round tick values within [lo, hi] (at most about `max` of them) and their step:
/// multiples of 1, 2, 2.5 or 5 × 10^k.
pub fn nice_ticks(lo: f64, hi: f64, max: usize) -> (Vec<f64>, f64) {
    let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
    let raw = span / max.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    // Rounded to the step's decimals so that 3 × 0.2 reads 0.6, not 0.6000000000000001.
    let scale = 10f64.powi(step_decimals(step) as i32);
    let ticks = (first..=last)
        .map(|i| (i as f64 * step * scale).round() / scale)
        .collect();
    (ticks, step)
}

/// Decimals that write every multiple of `step` exactly (0.25 → 2, 0.2 → 1, 5 → 0).
pub fn step_decimals(step: f64) -> usize {
    (0..6)
        .find(|&d| {
            let x = step * 10f64.powi(d as i32);
            (x - x.round()).abs() < 1e-6
        })
        .unwrap_or(6)
}

/// The pixel rows covering both `acc` and `rows` (panels side by side or in a grid).
pub fn union(acc: Option<Range<i32>>, rows: Range<i32>) -> Option<Range<i32>> {
    Some(match acc {
        None => rows,
        Some(a) => a.start.min(rows.start)..a.end.max(rows.end),
    })
}

/// Heatmap panels sharing a colour bar: `body` less the bar is split into `grid` (rows, columns)
/// areas, `panel(i, item, area)` draws the panel of each of `items` in turn and returns its
/// plotting rows ([`Heatmap::draw`]), and the bar of `scale` (the quantity `desc`) beside them
/// spans those rows ([`colour_bar`]).
pub fn beside_colour_bar<DB: DrawingBackend, T>(
    body: &DrawingArea<DB, Shift>,
    grid: (usize, usize),
    items: &[T],
    scale: Scale,
    desc: &str,
    mut panel: impl FnMut(usize, &T, &DrawingArea<DB, Shift>) -> Result<Range<i32>>,
) -> Result<()> {
    let (w, _) = body.dim_in_pixel();
    let (maps, bar) = body.split_horizontally(w - COLOUR_BAR_WIDTH);
    let areas = maps.split_evenly(grid);
    let mut y_px = None;
    for (i, (item, area)) in items.iter().zip(&areas).enumerate() {
        y_px = union(y_px, panel(i, item, area)?);
    }
    colour_bar(&bar, scale, desc, y_px)
}

/// A vertical colour bar for `scale` on the left of `area`, spanning the absolute pixel rows
/// `y_px` (the panels' plotting rows; None draws nothing), with round labelled values and the
/// quantity `desc`.
pub fn colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    scale: Scale,
    desc: &str,
    y_px: Option<Range<i32>>,
) -> Result<()> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let Some(y_px) = y_px else {
        return Ok(());
    };
    let (_, base_y) = area.get_base_pixel();
    let (top, bottom) = (y_px.start - base_y, y_px.end - base_y);
    let (x0, x1) = (12, 36);
    let height = (bottom - top).max(1);
    let steps = height.min(200);
    for i in 0..steps {
        let a = bottom - height * i / steps;
        let b = bottom - height * (i + 1) / steps;
        let c = viridis((i as f64 + 0.5) / steps as f64);
        area.draw(&Rectangle::new([(x0, b), (x1, a)], c.filled()))?;
    }
    area.draw(&Rectangle::new(
        [(x0, top), (x1, bottom)],
        RGBColor(60, 60, 60).stroke_width(1),
    ))?;
    let (ticks, step) = nice_ticks(scale.lo, scale.hi, 6);
    let d = step_decimals(step);
    let label = font::text(font::TICK).pos(Pos::new(HPos::Left, VPos::Center));
    for v in ticks {
        let y = bottom - (height as f64 * scale.unit(v)).round() as i32;
        area.draw(&PathElement::new(
            vec![(x1, y), (x1 + 5, y)],
            RGBColor(60, 60, 60),
        ))?;
        area.draw(&Text::new(format!("{v:.d$}"), (x1 + 8, y), label.clone()))?;
    }
    let desc_style = font::text(font::AXIS)
        .pos(Pos::new(HPos::Center, VPos::Center))
        .transform(FontTransform::Rotate90);
    area.draw(&Text::new(
        desc.to_string(),
        (x1 + 78, (top + bottom) / 2),
        desc_style,
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_step_keeps_labels_apart() {
        // 30 labels of 24 px in 600 px fit every one; in 300 px every second; in 100 px every tenth.
        assert_eq!(label_step(30, 720.0, 24.0), 1);
        assert_eq!(label_step(30, 400.0, 24.0), 2);
        assert_eq!(label_step(30, 100.0, 24.0), 10);
        assert_eq!(label_step(3, 1.0, 24.0), 5);
    }

    #[test]
    fn nice_ticks_are_round() {
        assert_eq!(nice_ticks(0.0, 0.7, 6).0, vec![0.0, 0.2, 0.4, 0.6]);
        assert_eq!(
            nice_ticks(0.0, 1.0, 6).0,
            vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        );
        assert_eq!(nice_ticks(0.0, 128.0, 6).1, 25.0);
        assert_eq!(
            (step_decimals(0.25), step_decimals(0.2), step_decimals(5.0)),
            (2, 1, 0)
        );
    }

    #[test]
    fn scale_spans_finite_values() {
        let s = Scale::spanning(&[0.2, f64::NAN, 0.6]);
        assert_eq!((s.lo, s.hi), (0.2, 0.6));
        assert!((s.unit(0.4) - 0.5).abs() < 1e-12);
        assert_eq!(Scale::spanning(&[0.3, 0.3]).hi, 1.3);
        assert_eq!(s.colour(f64::NAN), colour::MISSING);
    }
}
