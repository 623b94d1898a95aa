//! Rendering a figure to PNG bytes or SVG text in memory, and writing figures atomically.
//!
//! Every figure implements [`Draw`] once, generically over the plotters backend; PNG goes through
//! an RGB buffer and the `png` encoder, SVG through a string, so nothing touches the disk until
//! [`write_figures`] renames a finished temp file into place.

use crate::{font, Error, Result};
use plotters::coord::Shift;
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

/// A figure that can be drawn on any plotters backend.
pub trait Draw {
    /// File stem, saying what the figure shows (`heads-r2`, `plan-pyramid`, …).
    fn name(&self) -> String;
    /// Size in pixels (width, height).
    fn size(&self) -> (u32, u32);
    /// Draws the whole figure on `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for Error {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        // The figure's name is filled in by `render_*`, which knows it.
        Error::Draw {
            figure: String::new(),
            message: e.to_string(),
        }
    }
}

/// Which files to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    Svg,
    Both,
}

impl Format {
    fn png(self) -> bool {
        matches!(self, Format::Png | Format::Both)
    }
    fn svg(self) -> bool {
        matches!(self, Format::Svg | Format::Both)
    }
}

/// A rendered figure: its file stem and the encodings asked for.
#[derive(Clone, Debug)]
pub struct Rendered {
    pub name: String,
    pub png: Option<Vec<u8>>,
    pub svg: Option<String>,
}

fn named(e: Error, name: &str) -> Error {
    match e {
        Error::Draw { message, .. } => Error::Draw {
            figure: name.to_string(),
            message,
        },
        other => other,
    }
}

fn check_font(name: &str) -> Result<()> {
    if font::ensure_registered() {
        Ok(())
    } else {
        Err(Error::Draw {
            figure: name.to_string(),
            message: String::from("the bundled font does not load"),
        })
    }
}

/// Renders `fig` into raw RGB pixels (width × height × 3 bytes).
pub fn render_rgb(fig: &impl Draw) -> Result<Vec<u8>> {
    let name = fig.name();
    check_font(&name)?;
    let (w, h) = fig.size();
    let mut buf = vec![0u8; w as usize * h as usize * 3];
    draw_on(fig, BitMapBackend::with_buffer(&mut buf, (w, h)), &name)?;
    Ok(buf)
}

/// Draws `fig` on a white `backend` and presents it; an error names the figure.
fn draw_on<DB: DrawingBackend>(fig: &impl Draw, backend: DB, name: &str) -> Result<()> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE)
        .map_err(Error::from)
        .and_then(|()| fig.draw(&root))
        .and_then(|()| root.present().map_err(Error::from))
        .map_err(|e| named(e, name))
}

/// Renders `fig` as a PNG file's bytes.
pub fn render_png(fig: &impl Draw) -> Result<Vec<u8>> {
    let rgb = render_rgb(fig)?;
    let (w, h) = fig.size();
    encode_png(&rgb, w, h).map_err(|message| Error::Png {
        figure: fig.name(),
        message,
    })
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> std::result::Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::High);
        let mut writer = enc.write_header().map_err(|e| e.to_string())?;
        writer.write_image_data(rgb).map_err(|e| e.to_string())?;
        writer.finish().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

/// Renders `fig` as SVG text.
pub fn render_svg(fig: &impl Draw) -> Result<String> {
    let name = fig.name();
    check_font(&name)?;
    let mut out = String::new();
    draw_on(fig, SVGBackend::with_string(&mut out, fig.size()), &name)?;
    Ok(out)
}

/// Renders `fig` in `format`.
pub fn render(fig: &impl Draw, format: Format) -> Result<Rendered> {
    Ok(Rendered {
        name: fig.name(),
        png: format.png().then(|| render_png(fig)).transpose()?,
        svg: format.svg().then(|| render_svg(fig)).transpose()?,
    })
}

/// Writes each figure into `dir` (created if missing) as `<name>.png` / `<name>.svg`, each
/// atomically; returns the paths written, in order.
pub fn write_figures(dir: &Path, figures: &[Rendered]) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        error,
    })?;
    let mut written = Vec::new();
    for f in figures {
        if let Some(png) = &f.png {
            let path = dir.join(format!("{}.png", f.name));
            write_atomic(&path, png)?;
            written.push(path);
        }
        if let Some(svg) = &f.svg {
            let path = dir.join(format!("{}.svg", f.name));
            write_atomic(&path, svg.as_bytes())?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Writes `bytes` to `path` through a temp file in the same directory and a rename, so a reader
/// sees the old file or the new one, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    kvplan_common::fs::write_atomic(path, bytes).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        error,
    })
}
