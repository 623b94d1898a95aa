//! PoD layer blocks per query head (`docs/papers/pod.md` §2, Algorithm 1): each
//! column is a query head, each box a block of adjacent layers that share distant attention
//! scores; the block's lowest layer (dark) computes them and keeps the distant keys. A second
//! panel shows, per KV head, the layers whose distant keys are stored (what the cache saves).

use crate::figures::titled;
use crate::font;
use crate::heatmap::{label_step, text_centre, Ticked};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::methods::pod;
use kvplan_planner::{Error as PlannerError, Geometry, Method, Plan, PodSection};
use plotters::coord::Shift;
use plotters::prelude::*;

const BLOCK: [RGBColor; 2] = [RGBColor(198, 219, 239), RGBColor(253, 208, 162)];
const LOWEST: [RGBColor; 2] = [RGBColor(33, 113, 181), RGBColor(217, 72, 1)];
const STORED: RGBColor = RGBColor(33, 113, 181);
const SHARED: RGBColor = RGBColor(225, 225, 225);

/// PoD blocks of a plan.
pub struct PodBlocks<'a> {
    model: &'a str,
    section: &'a PodSection,
    geometry: &'a Geometry,
}

impl<'a> PodBlocks<'a> {
    /// The figure of the plan's PoD section.
    pub fn new(plan: &'a Plan) -> Result<Self> {
        let section = plan
            .sections
            .get::<PodSection>(Method::Pod)
            .ok_or_else(|| PlannerError::invalid("sections.pod", "a PoD section", "none"))?;
        Ok(PodBlocks {
            model: &plan.model.name,
            section,
            geometry: &plan.model.geometry,
        })
    }

    fn layer_axis(&self, px: f64) -> Ticked {
        let layers = self.geometry.layers;
        let step = label_step(layers, px, font::TICK * 1.5);
        let keys = (0..layers).step_by(step).map(|l| l as f64 + 0.5).collect();
        Ticked::new(0.0..layers as f64, keys)
    }

    fn column_axis(n: usize) -> Ticked {
        Ticked::new(0.0..n as f64, (0..n).map(|h| h as f64 + 0.5).collect())
    }

    /// A panel of `heads` columns (`x_desc`) by the layers, its mesh drawn.
    fn head_panel<'c, DB: DrawingBackend>(
        &self,
        area: &'c DrawingArea<DB, Shift>,
        caption: &str,
        heads: usize,
        x_desc: &str,
    ) -> Result<ChartContext<'c, DB, Cartesian2d<Ticked, Ticked>>> {
        let (_, h) = area.dim_in_pixel();
        let mut chart = ChartBuilder::on(area)
            .caption(caption, font::text(font::PANEL))
            .margin(10)
            .x_label_area_size(52)
            .y_label_area_size(70)
            .build_cartesian_2d(Self::column_axis(heads), self.layer_axis(h as f64 - 130.0))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(x_desc)
            .y_desc("layer")
            .axis_desc_style(font::text(font::AXIS))
            .label_style(font::text(font::TICK))
            .x_label_formatter(&|v| format!("{}", v.floor()))
            .y_label_formatter(&|v| format!("{}", v.floor()))
            .draw()?;
        Ok(chart)
    }

    fn draw_blocks<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let q = self.geometry.q_heads;
        let mut chart = self.head_panel(area, "Blocks per query head", q, "query head")?;
        for (head, blocks) in self.section.blocks.iter().enumerate() {
            let x = head as f64;
            for (i, &[a, z]) in blocks.iter().enumerate() {
                let (lo, hi) = (a as f64, z as f64 + 1.0);
                let span = [(x + 0.1, lo), (x + 0.9, hi)];
                chart.draw_series([
                    Rectangle::new(span, BLOCK[i % 2].filled()),
                    Rectangle::new([(x + 0.1, lo), (x + 0.9, lo + 1.0)], LOWEST[i % 2].filled()),
                    Rectangle::new(span, RGBColor(60, 60, 60).stroke_width(1)),
                ])?;
                if z > a + 1 {
                    let style = font::text(font::CELL).pos(text_centre());
                    chart.draw_series(std::iter::once(Text::new(
                        format!("{a}–{z}"),
                        (x + 0.5, (lo + 1.0 + hi) / 2.0),
                        style,
                    )))?;
                }
            }
        }
        Ok(())
    }

    fn draw_stored<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let kv = self.geometry.kv_heads;
        let shared = pod::shared_keys(&self.section.blocks, self.geometry);
        let caption = "Distant keys (blue: stored, grey: shared)";
        let mut chart = self.head_panel(area, caption, kv, "KV head")?;
        let cells = shared.iter().enumerate().flat_map(|(l, row)| {
            row.iter().enumerate().map(move |(k, &s)| {
                let c = if s { SHARED } else { STORED };
                let (x, y) = (k as f64, l as f64);
                Rectangle::new([(x + 0.05, y + 0.05), (x + 0.95, y + 0.95)], c.filled())
            })
        });
        chart.draw_series(cells)?;
        Ok(())
    }
}

impl Draw for PodBlocks<'_> {
    fn name(&self) -> String {
        String::from("plan-pod")
    }

    fn size(&self) -> (u32, u32) {
        (1300, 1000)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let s = self.section;
        let delta = match s.target_saving {
            Some(t) => format!("δ = {} (chosen for a saving of {t})", s.delta),
            None => format!("δ = {}", s.delta),
        };
        let body = titled(
            root,
            &format!("{} — PoD layer blocks per head", self.model),
            &format!(
                "{delta}; saving {:.2} of (layer, KV head) distant-key slots; n_s = {}, τ = {}; \
                 dark: a block's lowest layer (computes scores, stores distant keys)",
                s.saving, s.sinks, s.tau
            ),
        )?;
        let (w, _) = body.dim_in_pixel();
        let (left, right) = body.split_horizontally(w * 2 / 3);
        self.draw_blocks(&left)?;
        self.draw_stored(&right)
    }
}
