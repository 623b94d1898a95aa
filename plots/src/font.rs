//! The bundled font: DejaVu Sans (assets/DejaVuSans.ttf, licence in assets/LICENSE-DejaVu.txt),
//! registered with plotters' ab_glyph support as `sans-serif`, so figures never depend on the
//! machine's fonts (plotters is built without font-kit). Text sizes of every figure live here.

use plotters::style::{register_font, FontFamily, FontStyle, IntoFont, RGBColor, TextStyle};
use std::sync::OnceLock;

/// The font file, embedded in the binary.
pub static DEJAVU_SANS: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Family name figures use; SVG files name it too, so viewers fall back to their own sans-serif.
pub const FAMILY: &str = "sans-serif";

/// Figure title size (px).
pub const TITLE: f64 = 26.0;
/// Panel title size.
pub const PANEL: f64 = 20.0;
/// Axis description size.
pub const AXIS: f64 = 19.0;
/// Tick label and legend size.
pub const TICK: f64 = 16.0;
/// Text inside boxes (PoD block ranges); heatmap cell numbers scale with the cell.
pub const CELL: f64 = 13.0;

static REGISTERED: OnceLock<bool> = OnceLock::new();

/// Registers the bundled font once per process; false if the embedded bytes do not parse
/// (never for the shipped file; a test checks it).
pub fn ensure_registered() -> bool {
    *REGISTERED.get_or_init(|| {
        let normal = register_font(FAMILY, FontStyle::Normal, DEJAVU_SANS).is_ok();
        // Bold falls back to the normal face; registered explicitly so it never looks elsewhere.
        let bold = register_font(FAMILY, FontStyle::Bold, DEJAVU_SANS).is_ok();
        normal && bold
    })
}

/// A text style of `size` px in the bundled font, in near-black.
pub fn text(size: f64) -> TextStyle<'static> {
    (FontFamily::Name(FAMILY), size)
        .into_font()
        .color(&RGBColor(30, 30, 30))
}

/// A text style of `size` px in `colour`.
pub fn coloured(size: f64, colour: RGBColor) -> TextStyle<'static> {
    (FontFamily::Name(FAMILY), size).into_font().color(&colour)
}
