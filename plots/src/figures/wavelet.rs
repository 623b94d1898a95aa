//! Wavelet magnitudes (TreeKV §3.3): the mean Haar detail magnitude of the a∘V signal, one line
//! per decomposition level, across layers.
//!
//! `treekv.md` Figure 2 plots magnitude *by position* per level; the profile (schema 1) stores
//! only `wavelet.magnitudes[layer][level]` (averaged over positions), so this figure shows level
//! by layer. Index 0 of a layer's list is drawn as level 1, the finest (highest-frequency) detail.

use crate::colour;
use crate::figures::titled;
use crate::lines::{Axis, Lines, Series};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::Profile;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Wavelet magnitude by layer and level.
pub struct Wavelet<'a> {
    model: &'a str,
    /// `[layer][level]`.
    magnitudes: &'a [Vec<f64>],
}

impl<'a> Wavelet<'a> {
    /// The figure for `p`.
    pub fn new(p: &'a Profile) -> Self {
        Wavelet {
            model: &p.model.name,
            magnitudes: &p.wavelet.magnitudes,
        }
    }

    fn series(&self) -> Vec<Series> {
        let levels = self.magnitudes.first().map_or(0, Vec::len);
        (0..levels)
            .map(|k| Series {
                label: if k == 0 {
                    String::from("level 1 (finest)")
                } else {
                    format!("level {}", k + 1)
                },
                colour: colour::series(k),
                points: self
                    .magnitudes
                    .iter()
                    .enumerate()
                    .filter_map(|(l, row)| row.get(k).map(|&v| (l as f64, v)))
                    .collect(),
                markers: true,
            })
            .collect()
    }
}

impl Draw for Wavelet<'_> {
    fn name(&self) -> String {
        String::from("wavelet")
    }

    fn size(&self) -> (u32, u32) {
        (1200, 760)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!(
                "{} — wavelet detail magnitude by layer (TreeKV §3.3)",
                self.model
            ),
            "mean |Haar detail| of the a∘V signal per decomposition level, averaged over positions",
        )?;
        let series = self.series();
        let values: Vec<f64> = self.magnitudes.iter().flatten().copied().collect();
        let layers = self.magnitudes.len().max(1) as f64;
        Lines {
            caption: String::new(),
            x: Axis::linear("layer", 0.0, layers - 1.0, 15),
            y: Axis::fitting("mean detail magnitude", &values, true, 0.08, 8),
            series: &series,
            legend: true,
            references: Vec::new(),
        }
        .draw(&body)
    }
}
