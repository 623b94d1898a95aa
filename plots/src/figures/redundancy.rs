//! KV redundancy per layer (SpindleKV §3.2): the fraction of key pairs with cosine similarity
//! above θ_K, of value pairs above θ_V, and the attention sparsity (fraction of tokens with
//! negligible accumulated attention). Shallow layers with redundant, dense KV are where
//! SpindleKV's codebook pays; deep sparse layers are where eviction does.

use crate::colour;
use crate::figures::titled;
use crate::lines::{by_index, Axis, Lines, Series};
use crate::render::Draw;
use crate::Result;
use kvplan_planner::{LayerRedundancy, Profile};
use plotters::coord::Shift;
use plotters::prelude::*;

/// K/V cosine redundancy and attention sparsity by layer.
pub struct Redundancy<'a> {
    model: &'a str,
    layers: &'a [LayerRedundancy],
    theta_k: f64,
    theta_v: f64,
}

impl<'a> Redundancy<'a> {
    /// The figure for `p`.
    pub fn new(p: &'a Profile) -> Self {
        Redundancy {
            model: &p.model.name,
            layers: &p.kv_redundancy,
            theta_k: p.settings.theta_k,
            theta_v: p.settings.theta_v,
        }
    }

    fn series(&self) -> Vec<Series> {
        let line = |i: usize, label: String, f: fn(&LayerRedundancy) -> f64| {
            Series::line(
                label,
                colour::series(i),
                by_index(self.layers.iter().map(f)),
            )
        };
        vec![
            line(
                0,
                format!("key pairs with cosine > θ_K = {}", self.theta_k),
                |r| r.k_cos_fraction,
            ),
            line(
                1,
                format!("value pairs with cosine > θ_V = {}", self.theta_v),
                |r| r.v_cos_fraction,
            ),
            line(2, String::from("attention sparsity"), |r| {
                r.attention_sparsity
            }),
        ]
    }
}

impl Draw for Redundancy<'_> {
    fn name(&self) -> String {
        String::from("kv-redundancy")
    }

    fn size(&self) -> (u32, u32) {
        (1400, 760)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let body = titled(
            root,
            &format!("{} — KV redundancy per layer (SpindleKV §3.2)", self.model),
            "fractions over the profiled prompts, all KV heads",
        )?;
        let series = self.series();
        let layers = self.layers.len().max(1) as f64;
        Lines {
            caption: String::new(),
            x: Axis::linear("layer", 0.0, layers - 1.0, 15),
            y: Axis::linear("fraction", 0.0, 1.0, 10),
            series: &series,
            legend: true,
            references: Vec::new(),
        }
        .draw(&body)
    }
}
