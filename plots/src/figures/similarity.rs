//! Layer-similarity matrices per query head (PoD eq. 2, 1 − JS divergence of attention between
//! layers) as a grid of small multiples, with the PoD layer blocks outlined on the diagonal: the
//! plan's blocks when a plan is given, otherwise the blocks the planner's greedy rule
//! (PoD Algorithm 1) gives at δ.

use crate::figures::{index_labels, titled};
use crate::heatmap::{beside_colour_bar, Heatmap, Outline, Scale, COLOUR_BAR_WIDTH};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::Profile;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Where the outlined blocks come from.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// `[q_head][block] = [first_layer, last_layer]`.
    pub blocks: Vec<Vec<[usize; 2]>>,
    /// Said in the subtitle, e.g. "plan blocks, δ = 0.5".
    pub source: String,
}

/// Small multiples of `per_head[q_head][layer][layer]`.
pub struct LayerSimilarity<'a> {
    title: String,
    per_head: &'a [Vec<Vec<f64>>],
    q_to_kv: &'a [usize],
    samples: usize,
    blocks: Option<Blocks>,
}

/// Columns of the grid for `n` panels (3 × 3 for SmolLM2's 9 heads).
fn grid_cols(n: usize) -> usize {
    (1..=n).find(|c| c * c >= n).unwrap_or(1)
}

impl<'a> LayerSimilarity<'a> {
    /// The figure for `p`, outlining `blocks` if given.
    pub fn new(p: &'a Profile, blocks: Option<Blocks>) -> Self {
        LayerSimilarity {
            title: format!(
                "{} — layer similarity per query head (PoD eq. 2)",
                p.model.name
            ),
            per_head: &p.layer_similarity.per_head,
            q_to_kv: &p.model.geometry.q_to_kv,
            samples: p.layer_similarity.samples,
            blocks,
        }
    }

    fn outlines(&self, head: usize) -> Vec<Outline> {
        let Some(b) = &self.blocks else {
            return Vec::new();
        };
        b.blocks
            .get(head)
            .map(|blocks| {
                blocks
                    .iter()
                    .map(|&[a, z]| Outline {
                        x: [a as f64, z as f64 + 1.0],
                        y: [a as f64, z as f64 + 1.0],
                        colour: RGBColor(230, 30, 30),
                        width: 3,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Draw for LayerSimilarity<'_> {
    fn name(&self) -> String {
        String::from("layer-similarity")
    }

    fn size(&self) -> (u32, u32) {
        let n = self.per_head.len().max(1);
        let cols = grid_cols(n) as u32;
        let rows = n.div_ceil(cols as usize) as u32;
        (cols * 430 + COLOUR_BAR_WIDTH + 20, rows * 430 + 80)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let blocks = match &self.blocks {
            Some(b) => format!("red squares: PoD layer blocks ({})", b.source),
            None => String::from("no PoD blocks"),
        };
        let subtitle = format!(
            "1 − Jensen–Shannon divergence (base 2) between layers' attention, {} prompts; {blocks}",
            self.samples
        );
        let body = titled(root, &self.title, &subtitle)?;
        let scale = Scale::spanning(self.per_head.iter().flatten().flatten());
        let n = self.per_head.len().max(1);
        let cols = grid_cols(n);
        let grid = (n.div_ceil(cols), cols);
        let desc = "similarity (1 − JS)";
        beside_colour_bar(&body, grid, self.per_head, scale, desc, |h, m, area| {
            let kv = self.q_to_kv.get(h).copied().unwrap_or(0);
            Heatmap {
                caption: format!("query head {h} (KV head {kv})"),
                values: m,
                x_desc: String::from("layer"),
                y_desc: String::from("layer"),
                x_labels: index_labels(m.len()),
                y_labels: index_labels(m.len()),
                scale,
                cell_decimals: None,
                outlines: self.outlines(h),
            }
            .draw(area)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_is_square_enough() {
        assert_eq!(grid_cols(9), 3);
        assert_eq!(grid_cols(10), 4);
        assert_eq!(grid_cols(1), 1);
    }
}
