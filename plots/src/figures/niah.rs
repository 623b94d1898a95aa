//! Needle-in-a-haystack heatmap of one method at one budget: context length across, needle
//! depth down (0 % at the top, as NIAH figures are read), mean score written in each cell.
//! Cells not run are grey.

use crate::figures::titled;
use crate::heatmap::{colour_bar, Heatmap, Scale, COLOUR_BAR_WIDTH};
use crate::render::Draw;
use crate::results::{file_label, label, NiahCell};
use crate::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

/// NIAH scores of one (method, budget).
pub struct Niah<'a> {
    model: &'a str,
    method: String,
    budget: Option<usize>,
    cells: Vec<&'a NiahCell>,
}

/// Sorted distinct values (by total order).
fn distinct(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

impl<'a> Niah<'a> {
    /// The figure of the cells of `method` at `budget` among `cells`.
    pub fn new(model: &'a str, method: &str, budget: Option<usize>, cells: &'a [NiahCell]) -> Self {
        Niah {
            model,
            method: method.to_string(),
            budget,
            cells: cells
                .iter()
                .filter(|c| c.method == method && c.budget == budget)
                .collect(),
        }
    }

    /// `(lengths, depths, grid[depth_row][length_col])`, depth rows from deepest to 0 % so that
    /// 0 % is drawn at the top. Repeated cells are averaged.
    fn grid(&self) -> (Vec<usize>, Vec<f64>, Vec<Vec<f64>>) {
        let lengths: Vec<usize> = {
            let mut l: Vec<usize> = self.cells.iter().map(|c| c.context_len).collect();
            l.sort_unstable();
            l.dedup();
            l
        };
        let mut depths = distinct(self.cells.iter().map(|c| c.depth).collect());
        depths.reverse();
        let mut sum = vec![vec![(0.0, 0usize); lengths.len()]; depths.len()];
        for c in &self.cells {
            let col = lengths.iter().position(|&l| l == c.context_len);
            let row = depths.iter().position(|&d| d == c.depth);
            if let (Some(r), Some(k)) = (row, col) {
                sum[r][k].0 += c.score;
                sum[r][k].1 += 1;
            }
        }
        let grid = sum
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|(s, n)| if n == 0 { f64::NAN } else { s / n as f64 })
                    .collect()
            })
            .collect();
        (lengths, depths, grid)
    }
}

impl Draw for Niah<'_> {
    fn name(&self) -> String {
        format!("niah-{}", file_label(&self.method, self.budget))
    }

    fn size(&self) -> (u32, u32) {
        (1100, 820)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let (lengths, depths, grid) = self.grid();
        let mean = {
            let v: Vec<f64> = grid
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .collect();
            v.iter().sum::<f64>() / v.len().max(1) as f64
        };
        let budget = match self.budget {
            Some(b) => format!("budget {b} entries per (layer, KV head)"),
            None => String::from("full KV cache"),
        };
        let body = titled(
            root,
            &format!(
                "{} — needle in a haystack, {}",
                self.model,
                label(&self.method, self.budget)
            ),
            &format!(
                "{budget}; mean score {mean:.3} over {} cells",
                self.cells.len()
            ),
        )?;
        let (w, _) = body.dim_in_pixel();
        let (map, bar) = body.split_horizontally(w - COLOUR_BAR_WIDTH);
        let scale = Scale { lo: 0.0, hi: 1.0 };
        let rows = Heatmap {
            caption: String::new(),
            values: &grid,
            x_desc: String::from("context length (tokens)"),
            y_desc: String::from("needle depth"),
            x_labels: lengths.iter().map(|l| l.to_string()).collect(),
            y_labels: depths
                .iter()
                .map(|d| format!("{:.0}%", d * 100.0))
                .collect(),
            scale,
            cell_decimals: Some(2),
            outlines: Vec::new(),
        }
        .draw(&map)?;
        colour_bar(&bar, scale, "score", Some(rows))
    }
}
