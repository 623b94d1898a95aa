//! Perplexity by position: one curve per (method, budget), the perplexity of the tokens up to
//! each position. Where compression hurts, a method's curve leaves FullKV's as the prompt grows.

use crate::colour;
use crate::figures::quality::first_seen;
use crate::figures::titled;
use crate::lines::{coordinates, Axis, Lines, Series};
use crate::render::Draw;
use crate::results::{label, PerplexityCurve};
use crate::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Perplexity-vs-position curves.
pub struct Perplexity<'a> {
    model: &'a str,
    curves: &'a [PerplexityCurve],
}

impl<'a> Perplexity<'a> {
    /// The figure of `curves`.
    pub fn new(model: &'a str, curves: &'a [PerplexityCurve]) -> Self {
        Perplexity { model, curves }
    }

    fn series(&self) -> Vec<Series> {
        let methods = first_seen(self.curves.iter().map(|c| c.method.clone()));
        // One method at several budgets: colour by curve so they stay apart.
        let by_curve = methods.len() < self.curves.len();
        self.curves
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let colour = if by_curve {
                    colour::series(i)
                } else {
                    colour::method(&c.method)
                };
                let points = c
                    .positions
                    .iter()
                    .zip(&c.perplexity)
                    .map(|(&p, &v)| (p as f64, v))
                    .collect();
                Series {
                    markers: c.positions.len() <= 40,
                    ..Series::line(label(&c.method, c.budget), colour, points)
                }
            })
            .collect()
    }
}

impl Draw for Perplexity<'_> {
    fn name(&self) -> String {
        String::from("ppl-vs-position")
    }

    fn size(&self) -> (u32, u32) {
        (1200, 760)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!("{} — perplexity by position", self.model),
            "perplexity of the tokens up to each position, per method and budget",
        )?;
        let series = self.series();
        let (xs, ys) = coordinates(&series);
        Lines {
            caption: String::new(),
            x: Axis::fitting("position (tokens)", &xs, true, 0.02, 10),
            y: Axis::fitting("perplexity", &ys, false, 0.08, 8),
            series: &series,
            legend: true,
            references: Vec::new(),
        }
        .draw(&body)
    }
}
