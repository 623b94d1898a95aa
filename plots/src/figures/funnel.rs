//! Attention funnelling per layer (PyramidKV §3): mean attention entropy (bits) and the mean
//! attention mass on the top-k keys, side by side. Lower entropy and higher top-k mass in upper
//! layers is the pyramid shape that motivates PyramidKV's schedule.

use crate::colour;
use crate::figures::titled;
use crate::lines::{by_index, Axis, Lines, Series};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::{LayerFunnel, Profile};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Entropy and top-k mass by layer.
pub struct Funnel<'a> {
    model: &'a str,
    funnel: &'a [LayerFunnel],
    top_k: usize,
    rows: usize,
}

impl<'a> Funnel<'a> {
    /// The figure for `p`.
    pub fn new(p: &'a Profile) -> Self {
        Funnel {
            model: &p.model.name,
            funnel: &p.funnel,
            top_k: p.settings.funnel_top_k,
            rows: p.settings.observation_rows,
        }
    }
}

impl Draw for Funnel<'_> {
    fn name(&self) -> String {
        String::from("funnel")
    }

    fn size(&self) -> (u32, u32) {
        (1400, 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!(
                "{} — attention funnelling per layer (PyramidKV §3)",
                self.model
            ),
            &format!(
                "mean over the last {} query rows of the profiled prompts, all heads",
                self.rows
            ),
        )?;
        let panels = body.split_evenly((1, 2));
        let layers = self.funnel.len().max(1) as f64;
        // A panel of one series by layer.
        let panel = |caption: String, y: Axis, series: Series, area| {
            Lines {
                caption,
                x: Axis::linear("layer", 0.0, layers - 1.0, 8),
                y,
                series: &[series],
                legend: false,
                references: Vec::new(),
            }
            .draw(area)
        };
        let entropy: Vec<f64> = self.funnel.iter().map(|f| f.entropy).collect();
        panel(
            String::from("Attention entropy"),
            Axis::fitting("entropy (bits)", &entropy, true, 0.08, 8),
            Series::line(
                String::from("entropy"),
                colour::series(0),
                by_index(entropy.iter().copied()),
            ),
            &panels[0],
        )?;
        let mass = format!("top-{} mass", self.top_k);
        panel(
            format!("Attention mass on the top-{} keys", self.top_k),
            Axis::linear(&mass, 0.0, 1.0, 6),
            Series::line(
                mass,
                colour::series(1),
                by_index(self.funnel.iter().map(|f| f.top_k_mass)),
            ),
            &panels[1],
        )
    }
}
