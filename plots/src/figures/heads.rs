//! Head-importance heatmaps (layers × query heads): retrieval scores (HeadKV eq. 1) and
//! retrieval-reasoning scores (HeadKV eq. 2), alone or side by side as in `docs/papers/headkv.md`
//! Figure 7. White lines separate the query heads that share a KV head (GQA groups).

use crate::figures::{index_labels, titled};
use crate::heatmap::{beside_colour_bar, Heatmap, Outline, Scale, COLOUR_BAR_WIDTH};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::{HeadScores, Profile};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One score set to draw.
pub struct Panel<'a> {
    pub caption: String,
    pub scores: &'a HeadScores,
}

impl<'a> Panel<'a> {
    /// The panel of `scores`, captioned `what` and the trials they kept.
    pub fn of(what: &str, scores: &'a HeadScores) -> Self {
        Panel {
            caption: format!(
                "{what} ({} of {} trials kept)",
                scores.trials_kept, scores.trials_total
            ),
            scores,
        }
    }
}

/// Head-importance figure: one or two panels sharing a colour scale.
pub struct Heads<'a> {
    name: String,
    title: String,
    subtitle: String,
    /// `q_to_kv` of the model: draws the GQA group separators.
    q_to_kv: &'a [usize],
    panels: Vec<Panel<'a>>,
}

impl<'a> Heads<'a> {
    fn new(p: &'a Profile, name: &str, what: &str, panels: Vec<Panel<'a>>) -> Self {
        Heads {
            name: name.to_string(),
            title: format!("{} — {what}", p.model.name),
            subtitle: format!(
                "mean score over kept needle trials; profile {} ({})",
                p.settings.date, p.settings.haystack
            ),
            q_to_kv: &p.model.geometry.q_to_kv,
            panels,
        }
    }

    /// Retrieval and retrieval-reasoning side by side (`heads`).
    pub fn side_by_side(p: &'a Profile) -> Self {
        let panels = vec![
            Panel::of("Retrieval heads", &p.retrieval),
            Panel::of("Retrieval-reasoning heads", &p.retrieval_reasoning),
        ];
        Self::new(
            p,
            "heads",
            "head importance (HeadKV eq. 1 and eq. 2)",
            panels,
        )
    }

    /// Retrieval scores alone (`heads-retrieval`).
    pub fn retrieval(p: &'a Profile) -> Self {
        let panels = vec![Panel::of("Retrieval heads", &p.retrieval)];
        Self::new(
            p,
            "heads-retrieval",
            "retrieval heads (HeadKV eq. 1)",
            panels,
        )
    }

    /// Retrieval-reasoning scores alone (`heads-r2`).
    pub fn r2(p: &'a Profile) -> Self {
        let panels = vec![Panel::of(
            "Retrieval-reasoning heads",
            &p.retrieval_reasoning,
        )];
        Self::new(
            p,
            "heads-r2",
            "retrieval-reasoning heads (HeadKV eq. 2)",
            panels,
        )
    }

    fn scale(&self) -> Scale {
        let hi = self
            .panels
            .iter()
            .flat_map(|p| p.scores.scores.iter().flatten())
            .filter(|v| v.is_finite())
            .fold(0.0f64, |a, &b| a.max(b));
        // Round the top up to a tenth so the bar reads in round numbers.
        Scale {
            lo: 0.0,
            hi: ((hi * 10.0).ceil() / 10.0).max(0.1),
        }
    }

    fn group_outlines(&self, layers: usize) -> Vec<Outline> {
        let mut out = Vec::new();
        let mut start = 0;
        for h in 1..=self.q_to_kv.len() {
            if h == self.q_to_kv.len() || self.q_to_kv[h] != self.q_to_kv[start] {
                out.push(Outline {
                    x: [start as f64, h as f64],
                    y: [0.0, layers as f64],
                    colour: WHITE,
                    width: 2,
                });
                start = h;
            }
        }
        out
    }
}

impl Draw for Heads<'_> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn size(&self) -> (u32, u32) {
        (
            (560 * self.panels.len() as u32).max(640) + COLOUR_BAR_WIDTH + 20,
            960,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(root, &self.title, &self.subtitle)?;
        let scale = self.scale();
        let grid = (1, self.panels.len().max(1));
        let desc = "head score";
        beside_colour_bar(&body, grid, &self.panels, scale, desc, |_, panel, area| {
            let layers = panel.scores.scores.len();
            let heads = panel.scores.scores.first().map_or(0, Vec::len);
            Heatmap {
                caption: panel.caption.clone(),
                values: &panel.scores.scores,
                x_desc: String::from("query head (lines: GQA groups)"),
                y_desc: String::from("layer"),
                x_labels: index_labels(heads),
                y_labels: index_labels(layers),
                scale,
                cell_decimals: None,
                outlines: self.group_outlines(layers),
            }
            .draw(area)
        })
    }
}
