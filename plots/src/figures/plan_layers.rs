//! Per-layer budget bars of a plan: PyramidKV's arithmetic schedule
//! (`docs/papers/pyramidkv.md` eq. 1, as the authors' code) and SpindleKV's eviction schedule
//! (`docs/papers/spindlekv.md` eq. 5–6) with its codebook/eviction split. Each bar is stacked: the
//! observation window (kept in every head) and the entries selected by attention; a grey line
//! marks the uniform budget with the same total.

use crate::figures::titled;
use crate::font;
use crate::heatmap::{nice_ticks, step_decimals, Ticked};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::{Budgets, Error as PlannerError, Method, Plan, Section};
use plotters::chart::{ChartContext, SeriesLabelPosition};
use plotters::coord::Shift;
use plotters::prelude::*;

const WINDOW: RGBColor = RGBColor(170, 170, 170);
const SELECTED: RGBColor = RGBColor(31, 119, 180);
const CODEBOOK: RGBColor = RGBColor(255, 127, 14);

/// Budget per layer for PyramidKV or SpindleKV.
pub struct LayerBudgets<'a> {
    model: &'a str,
    method: Method,
    budgets: Budgets,
    subtitle: String,
}

impl<'a> LayerBudgets<'a> {
    /// The figure of `method` (pyramid or spindle) at `context_len` under the plan's target.
    pub fn new(plan: &'a Plan, method: Method, context_len: usize) -> Result<Self> {
        let budgets = plan.budgets_at(method, context_len)?;
        let s = &plan.sections;
        let subtitle = match (method, s.section(method)) {
            (_, Some(Section::Pyramid(p))) => format!(
                "β = {}, observation window α = {}; context {context_len}, target {}",
                p.beta, p.window, plan.target
            ),
            (_, Some(Section::Spindle(p))) => format!(
                "β = {}, α = {}, window {}, codebook {}; context {context_len}, target {}",
                p.beta,
                p.alpha,
                p.window,
                p.split.map_or(String::from("in every layer"), |k| format!(
                    "in layers 0–{}",
                    k - 1
                )),
                plan.target
            ),
            _ => {
                return Err(PlannerError::invalid(
                    "method",
                    "pyramid or spindle with a section in the plan",
                    method,
                )
                .into())
            }
        };
        Ok(LayerBudgets {
            model: &plan.model.name,
            method,
            budgets,
            subtitle,
        })
    }

    fn title(&self) -> String {
        let what = match self.method {
            Method::Spindle => "SpindleKV eviction schedule and codebook layers",
            _ => "PyramidKV budget per layer",
        };
        format!("{} — {what}", self.model)
    }

    /// Entries per KV head of each layer (the schedule is the same for every KV head; the
    /// mean is drawn in case a rule ever differs).
    fn per_layer(&self) -> Vec<f64> {
        self.budgets
            .per_layer_per_kv_head
            .iter()
            .map(|row| row.iter().sum::<usize>() as f64 / row.len().max(1) as f64)
            .collect()
    }
}

impl Draw for LayerBudgets<'_> {
    fn name(&self) -> String {
        match self.method {
            Method::Spindle => String::from("plan-spindle"),
            _ => String::from("plan-pyramid"),
        }
    }

    fn size(&self) -> (u32, u32) {
        (1300, 760)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(root, &self.title(), &self.subtitle)?;
        let per_layer = self.per_layer();
        let layers = per_layer.len();
        let top = per_layer
            .iter()
            .fold(self.budgets.per_head as f64, |a, &b| a.max(b))
            * 1.12;
        let (y_keys, step) = nice_ticks(0.0, top, 8);
        let d = step_decimals(step);
        let x_keys = (0..layers)
            .step_by(if layers > 32 { 5 } else { 1 })
            .map(|l| l as f64);
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .margin_right(28)
            .x_label_area_size(52)
            .y_label_area_size(90)
            .build_cartesian_2d(
                Ticked::new(-0.7..layers as f64 - 0.3, x_keys.collect()),
                Ticked::new(0.0..top, y_keys),
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(225, 225, 225))
            .x_desc("layer")
            .y_desc("entries kept per KV head")
            .axis_desc_style(font::text(font::AXIS))
            .label_style(font::text(font::TICK))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.d$}"))
            .draw()?;
        self.draw_bars(&mut chart, &per_layer)?;
        self.draw_uniform(&mut chart, layers)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .margin(10)
            .label_font(font::text(font::TICK))
            .background_style(WHITE.mix(0.92))
            .border_style(RGBColor(180, 180, 180))
            .draw()?;
        Ok(())
    }
}

/// The chart every [`LayerBudgets`] series is drawn on.
type LayerChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Ticked, Ticked>>;

impl LayerBudgets<'_> {
    /// The stacked bars per layer (window, then selected entries) and their legend entries.
    fn draw_bars<DB: DrawingBackend>(
        &self,
        chart: &mut LayerChart<'_, DB>,
        per_layer: &[f64],
    ) -> Result<()> {
        let window = self.budgets.window as f64;
        let codebook = &self.budgets.codebook_layers;
        let spindle = self.method == Method::Spindle;
        let bar = |l: usize, lo: f64, hi: f64, c: RGBColor| {
            let x = l as f64;
            Rectangle::new([(x - 0.38, lo), (x + 0.38, hi)], c.filled())
        };
        let selected_colour = |l: usize| {
            if spindle && codebook.get(l).copied().unwrap_or(false) {
                CODEBOOK
            } else {
                SELECTED
            }
        };
        chart.draw_series(
            per_layer
                .iter()
                .enumerate()
                .map(|(l, &b)| bar(l, window.min(b), b, selected_colour(l))),
        )?;
        if window > 0.0 {
            chart
                .draw_series(
                    per_layer
                        .iter()
                        .enumerate()
                        .map(|(l, &b)| bar(l, 0.0, window.min(b), WINDOW)),
                )?
                .label(format!("observation window ({})", self.budgets.window))
                .legend(legend_box(WINDOW));
        }
        if spindle && codebook.iter().any(|&c| c) {
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
                .label("selected by eviction, then codebook (SpindleKV eq. 8–14)")
                .legend(legend_box(CODEBOOK));
        }
        if !(spindle && codebook.iter().all(|&c| c)) {
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())?
                .label(if spindle {
                    "selected by attention (eviction only)"
                } else {
                    "selected by attention (SnapKV-style pooling)"
                })
                .legend(legend_box(SELECTED));
        }
        Ok(())
    }

    /// The grey line of the uniform budget with the same total.
    fn draw_uniform<DB: DrawingBackend>(
        &self,
        chart: &mut LayerChart<'_, DB>,
        layers: usize,
    ) -> Result<()> {
        let uniform = self.budgets.per_head as f64;
        let grey = RGBColor(90, 90, 90);
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(-0.7, uniform), (layers as f64 - 0.3, uniform)],
                grey.stroke_width(2),
            )))?
            .label(format!(
                "uniform budget ({} per head, same total)",
                self.budgets.per_head
            ))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], grey.stroke_width(2))
            });
        Ok(())
    }
}

/// A legend's filled square of colour `c`.
fn legend_box(c: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled())
}
