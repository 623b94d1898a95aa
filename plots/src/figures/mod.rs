//! One file per figure kind. Each figure is a small struct borrowing its data and implementing
//! [`crate::Draw`]; [`crate::sets`] builds them from a profile, a plan or results.

pub mod funnel;
pub mod heads;
pub mod leaderboard;
pub mod niah;
pub mod perplexity;
pub mod plan_heads;
pub mod plan_layers;
pub mod plan_pod;
pub mod quality;
pub mod redundancy;
pub mod similarity;
pub mod wavelet;

use crate::{font, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Height of the title band (title and subtitle).
pub const TITLE_BAND: u32 = 74;

/// Draws the figure title (and a smaller subtitle line) at the top of `root`; returns the area
/// below it.
pub fn titled<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<DB, Shift>> {
    let (w, _) = root.dim_in_pixel();
    let centre = plotters::style::text_anchor::Pos::new(
        plotters::style::text_anchor::HPos::Center,
        plotters::style::text_anchor::VPos::Top,
    );
    let x = w as i32 / 2;
    let title_size = fitting_size(root, title, font::TITLE, w)?;
    root.draw(&Text::new(
        title.to_string(),
        (x, 10),
        font::text(title_size).pos(centre),
    ))?;
    if !subtitle.is_empty() {
        let size = fitting_size(root, subtitle, font::TICK, w)?;
        root.draw(&Text::new(
            subtitle.to_string(),
            (x, 44),
            font::coloured(size, RGBColor(90, 90, 90)).pos(centre),
        ))?;
    }
    let (_, below) = root.split_vertically(TITLE_BAND);
    Ok(below)
}

/// The largest size up to `size` at which `text` fits `width` px less a margin (never below
/// 60 % of `size`: a longer text is the figure's fault and shows cut).
pub fn fitting_size<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
    width: u32,
) -> Result<f64> {
    let mut s = size;
    while s > size * 0.6 {
        let (tw, _) = root.estimate_text_size(text, &font::text(s))?;
        if tw + 30 <= width {
            break;
        }
        s -= 1.0;
    }
    Ok(s)
}

/// Labels `0`, `1`, … `n − 1`.
pub fn index_labels(n: usize) -> Vec<String> {
    (0..n).map(|i| i.to_string()).collect()
}
