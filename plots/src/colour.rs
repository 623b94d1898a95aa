//! Colours: the viridis scale for heatmaps (perceptually even, readable in grey) and a fixed
//! colour per method, read from the planner's method table, so a method has the same colour in
//! every figure.

use plotters::style::RGBColor;

/// Viridis anchors at 0, 1/8, …, 1 (matplotlib's table, sampled).
const VIRIDIS: [(u8, u8, u8); 9] = [
    (68, 1, 84),
    (72, 40, 120),
    (62, 83, 139),
    (49, 104, 142),
    (33, 145, 140),
    (40, 174, 128),
    (94, 201, 98),
    (173, 220, 48),
    (253, 231, 37),
];

/// Viridis at `t` in [0, 1] (clamped; NaN gives the low end).
pub fn viridis(t: f64) -> RGBColor {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |p: u8, q: u8| (p as f64 + (q as f64 - p as f64) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Whether text on `c` should be dark (the background is light).
pub fn is_light(c: RGBColor) -> bool {
    0.299 * c.0 as f64 + 0.587 * c.1 as f64 + 0.114 * c.2 as f64 > 150.0
}

/// Grey for cells with no data.
pub const MISSING: RGBColor = RGBColor(215, 215, 215);

/// Categorical colours (Tableau 10).
const CATEGORICAL: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Colours of kvpress's presses that kvplan has no method of (`kvpress-<press>`), apart from
/// every method's in the planner's table.
const PRESSES: [(&str, RGBColor); 6] = [
    ("keydiff", RGBColor(199, 21, 133)),
    ("expected", RGBColor(0, 128, 128)),
    ("adakv-expected", RGBColor(230, 171, 2)),
    ("adakv-expected-e2", RGBColor(128, 128, 0)),
    ("kvzip", RGBColor(128, 0, 0)),
    ("duo", RGBColor(102, 51, 0)),
];

/// The press of a peer's method, kvpress's (`kvpress-snapkv` → `snapkv`); `None` for kvplan's.
pub fn peer_press(name: &str) -> Option<&str> {
    name.strip_prefix("kvpress-")
}

/// The colour of method `name`, from the planner's method table; a kvpress press
/// (`kvpress-snapkv`) takes the colour of kvplan's method of its name (its line is dashed) or
/// its own; unknown names get a stable colour from their bytes.
pub fn method(name: &str) -> RGBColor {
    if let Some(press) = peer_press(name) {
        if let Some(&(_, c)) = PRESSES.iter().find(|(p, _)| *p == press) {
            return c;
        }
        if kvplan_planner::methods::spec(press).is_some() {
            return method(press);
        }
    }
    match kvplan_planner::methods::spec(name) {
        Some(spec) => {
            let [r, g, b] = spec.colour;
            RGBColor(r, g, b)
        }
        None => {
            let hash = name
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            CATEGORICAL[hash % CATEGORICAL.len()]
        }
    }
}

/// The i-th categorical colour (series that are not methods: levels, K/V, …).
pub fn series(i: usize) -> RGBColor {
    CATEGORICAL[i % CATEGORICAL.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kvpress_press_takes_its_namesake_s_colour_or_one_of_its_own() {
        assert_eq!(method("kvpress-snapkv"), method("snapkv"));
        assert_eq!(method("kvpress-keydiff"), RGBColor(199, 21, 133));
        let own: Vec<RGBColor> = PRESSES.iter().map(|&(_, c)| c).collect();
        for spec in kvplan_planner::methods::METHODS {
            assert!(!own.contains(&method(spec.name)), "{}", spec.name);
        }
    }

    #[test]
    fn the_reference_line_is_far_from_every_line_colour() {
        // FullKV's line beside the methods' (the leaderboard figure): a grey reference at
        // (110, 110, 110) was 51 from TreeKV's (127, 127, 127) and read as one of them.
        let far = |a: RGBColor, b: RGBColor| {
            a.0.abs_diff(b.0) as u32 + a.1.abs_diff(b.1) as u32 + a.2.abs_diff(b.2) as u32 > 120
        };
        let reference = crate::lines::REFERENCE;
        let methods = kvplan_planner::methods::METHODS
            .iter()
            .map(|s| method(s.name));
        for c in methods.chain(PRESSES.iter().map(|&(_, c)| c)) {
            assert!(far(reference, c), "{c:?}");
        }
    }

    #[test]
    fn viridis_ends_and_clamps() {
        assert_eq!(viridis(0.0), RGBColor(68, 1, 84));
        assert_eq!(viridis(1.0), RGBColor(253, 231, 37));
        assert_eq!(viridis(2.0), viridis(1.0));
        assert_eq!(viridis(f64::NAN), viridis(0.0));
        // Halfway between anchors 4 and 5.
        assert_eq!(viridis(0.5 + 1.0 / 16.0), RGBColor(37, 160, 134));
    }

    #[test]
    fn methods_keep_their_colours() {
        // The Tableau 10 colours the methods had before the table held them.
        assert_eq!(method("full"), CATEGORICAL[0]);
        assert_eq!(method("streaming"), CATEGORICAL[1]);
        assert_eq!(method("snapkv"), CATEGORICAL[3]);
        assert_eq!(method("pod"), CATEGORICAL[9]);
        assert_eq!(method("new-method"), method("new-method"));
        assert!(is_light(viridis(1.0)) && !is_light(viridis(0.0)));
    }
}
