//! Wavelet magnitudes (TreeKV §3.3): the mean Haar detail magnitude of the a∘V signal, one line
//! per decomposition level, across layers; and, when the profile records it, by position as in
//! `docs/papers/treekv.md` Figure 2 (the two panels side by side).
//!
//! Schema 1 profiles hold `wavelet.magnitudes[layer][level]` (averaged over positions). The
//! by-position curves come from the optional `details.wavelet_by_position[level][i]` (position
//! `details.wavelet_edge + i` at generation step `details.wavelet_step`), read from the JSON
//! text by [`ByPosition::from_profile_json`] so that profiles without it still plot. Index 0 is
//! drawn as level 1, the finest (highest-frequency) detail.

use crate::colour;
use crate::figures::titled;
use crate::lines::{coordinates, Axis, Lines, Series};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::Profile;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Wavelet magnitudes by position (TreeKV Figure 2), when the profile has them.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct ByPosition {
    /// Generation step t of the signal.
    #[serde(rename = "wavelet_step")]
    pub step: usize,
    /// Positions left out at each end; curve index i is position `edge + i`.
    #[serde(rename = "wavelet_edge")]
    pub edge: usize,
    /// `[level][i]`, each ≥ 0.
    #[serde(rename = "wavelet_by_position")]
    pub magnitudes: Vec<Vec<f64>>,
}

impl ByPosition {
    /// The by-position magnitudes in a profile's JSON text (`details.wavelet_*`), if present
    /// and non-empty.
    pub fn from_profile_json(text: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let details = value.get("details")?.clone();
        let b: ByPosition = serde_json::from_value(details).ok()?;
        let usable = b.magnitudes.iter().any(|row| !row.is_empty())
            && b.magnitudes.iter().flatten().all(|v| v.is_finite());
        usable.then_some(b)
    }
}

/// Wavelet magnitude by layer and level (and by position, if given).
pub struct Wavelet<'a> {
    model: &'a str,
    /// `[layer][level]`.
    magnitudes: &'a [Vec<f64>],
    by_position: Option<ByPosition>,
}

fn level_label(k: usize) -> String {
    if k == 0 {
        String::from("level 1 (finest)")
    } else {
        format!("level {}", k + 1)
    }
}

impl<'a> Wavelet<'a> {
    /// The figure for `p`, with the by-position panel if `by_position` is given.
    pub fn new(p: &'a Profile, by_position: Option<ByPosition>) -> Self {
        Wavelet {
            model: &p.model.name,
            magnitudes: &p.wavelet.magnitudes,
            by_position,
        }
    }

    fn series(&self) -> Vec<Series> {
        let levels = self.magnitudes.first().map_or(0, Vec::len);
        (0..levels)
            .map(|k| {
                let points = self
                    .magnitudes
                    .iter()
                    .enumerate()
                    .filter_map(|(l, row)| row.get(k).map(|&v| (l as f64, v)))
                    .collect();
                Series::line(level_label(k), colour::series(k), points)
            })
            .collect()
    }

    fn draw_by_position<DB: DrawingBackend>(
        &self,
        b: &ByPosition,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<()> {
        let series: Vec<Series> = b
            .magnitudes
            .iter()
            .enumerate()
            .map(|(k, row)| {
                let points = row
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| ((b.edge + i) as f64, v))
                    .collect();
                Series {
                    markers: false,
                    ..Series::line(level_label(k), colour::series(k), points)
                }
            })
            .collect();
        let (xs, ys) = coordinates(&series);
        Lines {
            caption: format!("By position, generation step {}", b.step),
            x: Axis::fitting("position", &xs, false, 0.01, 8),
            y: Axis::fitting("mean |Rec(D_level)|", &ys, true, 0.08, 8),
            series: &series,
            legend: false,
            references: Vec::new(),
        }
        .draw(area)
    }
}

impl Draw for Wavelet<'_> {
    fn name(&self) -> String {
        String::from("wavelet")
    }

    fn size(&self) -> (u32, u32) {
        if self.by_position.is_some() {
            (1700, 760)
        } else {
            (1300, 760)
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!("{} — wavelet detail magnitude (TreeKV §3.3)", self.model),
            "mean magnitude of the Haar detail of the a∘V signal, per decomposition level",
        )?;
        let body = match &self.by_position {
            Some(b) => {
                let (w, _) = body.dim_in_pixel();
                let (left, right) = body.split_horizontally(w * 9 / 20);
                self.draw_by_position(b, &left)?;
                right
            }
            None => body,
        };
        let series = self.series();
        let values: Vec<f64> = self.magnitudes.iter().flatten().copied().collect();
        let layers = self.magnitudes.len().max(1) as f64;
        Lines {
            caption: if self.by_position.is_some() {
                String::from("By layer, averaged over positions")
            } else {
                String::new()
            },
            x: Axis::linear("layer", 0.0, layers - 1.0, 15),
            y: Axis::fitting("mean detail magnitude", &values, true, 0.08, 8),
            series: &series,
            legend: true,
            references: Vec::new(),
        }
        .draw(&body)
    }
}
