//! HeadKV per-head budgets (`docs/papers/headkv.md` §3, eq. 4): entries kept by each KV head of
//! each layer, as a heatmap with the numbers written in the cells; `headkv` (retrieval-reasoning
//! scores) and `headkv-r` (retrieval scores) side by side when the plan has both.

use crate::figures::{index_labels, titled};
use crate::heatmap::{beside_colour_bar, Heatmap, Scale, COLOUR_BAR_WIDTH};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::{Budgets, HeadKvSection, Method, Plan};
use plotters::coord::Shift;
use plotters::prelude::*;

/// HeadKV budgets per (layer, KV head).
pub struct HeadBudgets<'a> {
    model: &'a str,
    panels: Vec<(Method, Budgets)>,
    subtitle: String,
}

impl<'a> HeadBudgets<'a> {
    /// The figure of the plan's HeadKV sections at `context_len`; None if it has neither.
    pub fn new(plan: &'a Plan, context_len: usize) -> Result<Option<Self>> {
        let mut panels = Vec::new();
        for m in [Method::HeadKv, Method::HeadKvR] {
            if plan.methods().contains(&m) {
                panels.push((m, plan.budgets_at(m, context_len)?));
            }
        }
        let sections = &plan.sections;
        let params = sections
            .get::<HeadKvSection>(Method::HeadKv)
            .or(sections.get::<HeadKvSection>(Method::HeadKvR))
            .map(|s| format!("β = {}, window {}, ", s.beta, s.window))
            .unwrap_or_default();
        Ok((!panels.is_empty()).then(|| HeadBudgets {
            model: &plan.model.name,
            panels,
            subtitle: format!(
                "{params}context {context_len}, target {}; numbers: entries kept",
                plan.target
            ),
        }))
    }
}

fn caption(m: Method) -> &'static str {
    match m {
        Method::HeadKvR => "headkv-r (retrieval scores)",
        _ => "headkv (retrieval-reasoning scores)",
    }
}

impl Draw for HeadBudgets<'_> {
    fn name(&self) -> String {
        String::from("plan-headkv")
    }

    fn size(&self) -> (u32, u32) {
        (470 * self.panels.len() as u32 + COLOUR_BAR_WIDTH + 30, 1080)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!("{} — HeadKV budget per KV head", self.model),
            &self.subtitle,
        )?;
        let grids: Vec<Vec<Vec<f64>>> = self
            .panels
            .iter()
            .map(|(_, b)| {
                b.per_layer_per_kv_head
                    .iter()
                    .map(|row| row.iter().map(|&x| x as f64).collect())
                    .collect()
            })
            .collect();
        let scale = Scale::spanning(grids.iter().flatten().flatten());
        let scale = Scale { lo: 0.0, ..scale };
        let layout = (1, self.panels.len().max(1));
        let desc = "entries kept";
        beside_colour_bar(&body, layout, &grids, scale, desc, |i, grid, area| {
            let (m, _) = &self.panels[i];
            let kv = grid.first().map_or(0, Vec::len);
            Heatmap {
                caption: caption(*m).to_string(),
                values: grid,
                x_desc: String::from("KV head"),
                y_desc: String::from("layer"),
                x_labels: index_labels(kv),
                y_labels: index_labels(grid.len()),
                scale,
                cell_decimals: Some(0),
                outlines: Vec::new(),
            }
            .draw(area)
        })
    }
}
