//! Every figure kind rendered in memory from small hand-made inputs (a 4-layer, 4-head model
//! built here, a plan from it, the hand-made results fixture): PNG size and ink, SVG title and
//! labels, file names, and the bundled font.

use kvplan_planner::{
    build_plan, Geometry, Method, Plan, PlanOptions, Profile, Target, PROFILE_SCHEMA_VERSION,
};
use kvplan_plots::figures::wavelet::{ByPosition, Wavelet};
use kvplan_plots::render::{render, render_png, render_rgb, render_svg, Draw};
use kvplan_plots::{
    detect, plan_figures, profile_figures, results_figures, write_figures, EvalResults, FileKind,
    Format, ProfileExtras, Rendered,
};
use std::path::{Path, PathBuf};

const LAYERS: usize = 4;
const HEADS: usize = 4;

fn ok<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// A tiny profile: 4 layers, 4 query heads over 2 KV heads; one strong retrieval head (2, 1).
/// Built as JSON so that optional fields added to the schema later need no change here.
fn profile() -> Profile {
    let scores = |strong: f64| {
        let mut s = vec![vec![0.05; HEADS]; LAYERS];
        s[2][1] = strong;
        s[3][3] = strong / 2.0;
        s
    };
    let sim = |d: f64| -> Vec<Vec<f64>> {
        (0..LAYERS)
            .map(|a| {
                (0..LAYERS)
                    .map(|b| (1.0 - d * (a as f64 - b as f64).abs()).max(0.0))
                    .collect()
            })
            .collect()
    };
    let layers = || (0..LAYERS).map(|l| l as f64);
    let json = serde_json::json!({
        "schema_version": PROFILE_SCHEMA_VERSION,
        "model": {
            "name": "TinyModel",
            "architecture": "llama",
            "gguf_sha256": "ab".repeat(32),
            "geometry": ok(Geometry::new(LAYERS, HEADS, 2, 8)),
        },
        "settings": {
            "kvplan_version": "0.1.0",
            "date": "2026-11-22",
            "seeds": [0],
            "haystack": "test",
            "examples": 4,
            "context_lengths": [64],
            "observation_rows": 8,
            "funnel_top_k": 4,
            "theta_k": 0.98,
            "theta_v": 0.95,
        },
        "retrieval": {"trials_kept": 3, "trials_total": 4, "scores": scores(0.8)},
        "retrieval_reasoning": {"trials_kept": 2, "trials_total": 4, "scores": scores(0.6)},
        "layer_similarity": {
            "samples": 2,
            "per_head": (0..HEADS).map(|h| sim(0.1 + 0.05 * h as f64)).collect::<Vec<_>>(),
        },
        "wavelet": {
            "levels": 3,
            "magnitudes": layers()
                .map(|l| (0..3).map(|k| 0.1 * (k as f64 + 1.0) * (1.0 + l)).collect())
                .collect::<Vec<Vec<f64>>>(),
        },
        "funnel": layers()
            .map(|l| serde_json::json!({"entropy": 5.0 - l, "top_k_mass": 0.2 + 0.2 * l}))
            .collect::<Vec<_>>(),
        "kv_redundancy": layers()
            .map(|l| serde_json::json!({
                "k_cos_fraction": 0.5 - 0.1 * l,
                "v_cos_fraction": 0.4 - 0.1 * l,
                "attention_sparsity": 0.3 + 0.2 * l,
            }))
            .collect::<Vec<_>>(),
    });
    ok(Profile::from_json(&json.to_string()))
}

fn plan(p: &Profile, budget: usize) -> Plan {
    ok(build_plan(
        p,
        &Method::ALL,
        Target::Tokens(budget),
        &PlanOptions::default(),
    ))
}

fn results() -> EvalResults {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results-handmade.json");
    ok(EvalResults::load(&path))
}

fn names(figs: &[Rendered]) -> Vec<&str> {
    figs.iter().map(|f| f.name.as_str()).collect()
}

/// Decodes a PNG; returns (width, height, RGB bytes).
fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = ok(decoder.read_info());
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = ok(reader.next_frame(&mut buf));
    buf.truncate(info.buffer_size());
    assert_eq!(info.color_type, png::ColorType::Rgb);
    (info.width, info.height, buf)
}

/// Share of pixels that are not white, and the number of distinct colours.
fn ink(rgb: &[u8]) -> (f64, usize) {
    let px: Vec<&[u8]> = rgb.chunks(3).collect();
    let inked = px.iter().filter(|p| p.iter().any(|&c| c < 250)).count();
    let mut colours: Vec<&[u8]> = px.clone();
    colours.sort_unstable();
    colours.dedup();
    (inked as f64 / px.len().max(1) as f64, colours.len())
}

/// A figure is readable: right size, not blank, SVG carries its title and `labels`.
fn check(f: &Rendered, size: (u32, u32), title: &str, labels: &[&str]) {
    let png = f.png.as_deref().unwrap_or_default();
    let (w, h, rgb) = decode(png);
    assert_eq!((w, h), size, "{}: size", f.name);
    let (share, colours) = ink(&rgb);
    assert!(
        share > 0.03,
        "{}: only {share:.3} of the pixels are inked",
        f.name
    );
    assert!(colours > 20, "{}: only {colours} colours", f.name);
    let svg = f.svg.as_deref().unwrap_or_default();
    assert!(svg.starts_with("<svg"), "{}: not an SVG", f.name);
    for want in std::iter::once(title).chain(labels.iter().copied()) {
        assert!(svg.contains(want), "{}: SVG lacks {want:?}", f.name);
    }
}

fn size_of(f: &Rendered) -> (u32, u32) {
    let (w, h, _) = decode(f.png.as_deref().unwrap_or_default());
    (w, h)
}

#[test]
fn profile_figures_render_readably() {
    let p = profile();
    let figs = ok(profile_figures(&p, &ProfileExtras::default(), Format::Both));
    assert_eq!(
        names(&figs),
        [
            "heads",
            "heads-retrieval",
            "heads-r2",
            "layer-similarity",
            "wavelet",
            "funnel",
            "kv-redundancy"
        ]
    );
    let expect: [(&str, &[&str]); 7] = [
        (
            "TinyModel — head importance",
            &[
                "Retrieval heads",
                "Retrieval-reasoning heads",
                "query head",
                "layer",
                "head score",
            ],
        ),
        (
            "TinyModel — retrieval heads",
            &["3 of 4 trials kept", "layer"],
        ),
        (
            "TinyModel — retrieval-reasoning heads",
            &["2 of 4 trials kept", "layer"],
        ),
        (
            "TinyModel — layer similarity",
            &["query head 3 (KV head 1)", "similarity (1 − JS)", "δ = 0.5"],
        ),
        (
            "TinyModel — wavelet detail magnitude",
            &[
                "level 1 (finest)",
                "level 3",
                "layer",
                "mean detail magnitude",
            ],
        ),
        (
            "TinyModel — attention funnelling",
            &["entropy (bits)", "top-4 mass", "layer"],
        ),
        (
            "TinyModel — KV redundancy",
            &["θ_K = 0.98", "attention sparsity", "fraction"],
        ),
    ];
    for (f, (title, labels)) in figs.iter().zip(expect) {
        let size = size_of(f);
        check(f, size, title, labels);
    }
    assert_eq!(size_of(&figs[0]), (1270, 960));
}

#[test]
fn wavelet_by_position_is_drawn_beside_the_layer_curves() {
    let text = r#"{"details": {"notes": [], "wavelet_step": 512, "wavelet_edge": 32,
        "wavelet_by_position": [[0.1, 0.2, 0.4], [0.2, 0.3, 0.5], [0.3, 0.3, 0.6]]}}"#;
    let b = ByPosition::from_profile_json(text);
    assert_eq!(b.as_ref().map(|b| (b.step, b.edge)), Some((512, 32)));
    assert_eq!(ByPosition::from_profile_json(r#"{"wavelet": {}}"#), None);
    let p = profile();
    let fig = ok(render(&Wavelet::new(&p, b), Format::Both));
    check(
        &fig,
        (1700, 760),
        "TinyModel — wavelet detail magnitude",
        &[
            "By position, generation step 512",
            "By layer, averaged over positions",
            "position",
        ],
    );
}

#[test]
fn plan_figures_render_readably() {
    let p = profile();
    let plan = plan(&p, 16);
    let (figs, skipped) = ok(plan_figures(&plan, 64, Format::Both));
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(
        names(&figs),
        ["plan-pyramid", "plan-spindle", "plan-headkv", "plan-pod"]
    );
    let expect: [(&str, &[&str]); 4] = [
        (
            "TinyModel — PyramidKV budget per layer",
            &[
                "context 64",
                "entries kept per KV head",
                "uniform budget (16 per head",
            ],
        ),
        (
            "TinyModel — SpindleKV eviction schedule",
            &["codebook", "in every layer", "layer"],
        ),
        (
            "TinyModel — HeadKV budget per KV head",
            &[
                "headkv (retrieval-reasoning scores)",
                "headkv-r (retrieval scores)",
                "KV head",
                "entries kept",
            ],
        ),
        (
            "TinyModel — PoD layer blocks per head",
            &["query head", "KV head", "saving"],
        ),
    ];
    for (f, (title, labels)) in figs.iter().zip(expect) {
        check(f, size_of(f), title, labels);
    }
}

#[test]
fn spindle_below_beta_is_drawn_at_a_shorter_context_with_the_reason() {
    let p = profile();
    // B = 16, window 8: r_c = 8/(n − 8) must exceed β = 0.05, so n < 168. From 4096, halving
    // reaches 128 (r_c = 8/120 ≈ 0.067).
    let (figs, skipped) = ok(plan_figures(&plan(&p, 16), 4096, Format::Both));
    assert!(names(&figs).contains(&"plan-spindle"));
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].figure, "plan-spindle");
    assert_eq!(skipped[0].drawn_at, Some(128));
    assert!(skipped[0].reason.contains("must exceed β"));
    let spindle = figs.iter().find(|f| f.name == "plan-spindle");
    assert!(spindle
        .and_then(|f| f.svg.as_deref())
        .is_some_and(|s| s.contains("context 128")));
}

#[test]
fn results_figures_render_readably() {
    let r = results();
    let figs = ok(results_figures(&r, Format::Both));
    assert_eq!(
        names(&figs),
        [
            "niah-full",
            "niah-snapkv-128",
            "niah-headkv-128",
            "niah-streaming-128",
            "quality-vs-kv",
            "ppl-vs-position"
        ]
    );
    let title = "SmolLM2-135M-Instruct — needle in a haystack, snapkv @ 128";
    check(
        &figs[1],
        (1100, 820),
        title,
        &[
            "context length (tokens)",
            "needle depth",
            "50%",
            "8192",
            "score",
        ],
    );
    check(
        &figs[4],
        size_of(&figs[4]),
        "SmolLM2-135M-Instruct — quality vs KV-cache size",
        &["niah", "qa", "12.5%", "100%", "streaming", "full"],
    );
    check(
        &figs[5],
        size_of(&figs[5]),
        "SmolLM2-135M-Instruct — perplexity by position",
        &["position (tokens)", "perplexity", "snapkv @ 128"],
    );
}

#[test]
fn a_task_where_every_method_scores_the_same_still_has_a_readable_axis() {
    // Both points of the task score 0.5 (a RULER run where FullKV and SnapKV each get one of two
    // tasks): the score axis must span them, with ticks, not collapse to a 1e-9 sliver whose
    // reference line maps off the canvas (this overflowed the pixel arithmetic).
    let r = ok(EvalResults::from_json(
        r#"{"schema_version": 1, "model": "m", "niah": [], "perplexity": [], "quality": [
            {"task": "ruler", "method": "full", "budget": null, "kv_fraction": 1.0, "score": 0.5},
            {"task": "ruler", "method": "snapkv", "budget": 64, "kv_fraction": 0.16, "score": 0.5}
        ]}"#,
    ));
    let figs = ok(results_figures(&r, Format::Both));
    assert_eq!(names(&figs), ["quality-vs-kv"]);
    check(
        &figs[0],
        size_of(&figs[0]),
        "m — quality vs KV-cache size",
        &["ruler", "score", "0.5", "snapkv"],
    );
}

#[test]
fn niah_cells_not_run_are_grey_not_missing() {
    let mut r = results();
    r.niah
        .retain(|c| c.method == "snapkv" && !(c.context_len == 8192 && c.depth == 0.5));
    let figs = ok(results_figures(&r, Format::Png));
    let (_, _, rgb) = decode(figs[0].png.as_deref().unwrap_or_default());
    let grey = rgb.chunks(3).filter(|p| *p == [215, 215, 215]).count();
    assert!(grey > 1000, "the missing cell should be grey ({grey} px)");
}

/// A figure of one word of text: what the bundled font draws.
struct OnlyText;

impl Draw for OnlyText {
    fn name(&self) -> String {
        String::from("only-text")
    }
    fn size(&self) -> (u32, u32) {
        (200, 60)
    }
    fn draw<DB: plotters::prelude::DrawingBackend>(
        &self,
        root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    ) -> kvplan_plots::Result<()> {
        root.draw(&plotters::element::Text::new(
            "Heads",
            (10, 10),
            kvplan_plots::font::text(32.0),
        ))?;
        Ok(())
    }
}

#[test]
fn text_is_drawn_with_the_bundled_font() {
    // plotters is built without font-kit, so any glyph on the canvas comes from the embedded
    // DejaVu Sans through ab_glyph: no system font is involved.
    assert!(kvplan_plots::font::ensure_registered());
    let rgb = ok(render_rgb(&OnlyText));
    let (share, colours) = ink(&rgb);
    assert!(share > 0.02 && share < 0.5, "text ink share {share}");
    assert!(
        colours > 5,
        "anti-aliased glyphs give grey levels, found {colours}"
    );
    let png = ok(render_png(&OnlyText));
    assert_eq!(decode(&png).0, 200);
    assert!(ok(render_svg(&OnlyText)).contains("Heads"));
}

#[test]
fn figures_are_written_atomically_under_their_names() {
    let dir = std::env::temp_dir().join(format!("kvplan-plots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let p = profile();
    let figs = ok(profile_figures(&p, &ProfileExtras::default(), Format::Svg));
    let written = ok(write_figures(&dir, &figs[..2]));
    assert_eq!(
        written,
        vec![dir.join("heads.svg"), dir.join("heads-retrieval.svg")]
    );
    let mut listed: Vec<String> = ok(std::fs::read_dir(&dir))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    listed.sort();
    assert_eq!(listed, ["heads-retrieval.svg", "heads.svg"]);
    let _ = std::fs::remove_dir_all(&dir);
    let err = write_figures(Path::new("/proc/kvplan-no-such-dir"), &figs[..1]);
    assert!(err.is_err_and(|e| e.to_string().contains("/proc/kvplan-no-such-dir")));
}

#[test]
fn files_are_told_apart_by_content() {
    let p = profile();
    let plan_json = ok(plan(&p, 16).to_json());
    assert_eq!(ok(detect(&plan_json)), FileKind::Plan);
    assert_eq!(ok(detect(&ok(p.to_json()))), FileKind::Profile);
    assert_eq!(ok(detect(&ok(results().to_json()))), FileKind::Results);
}
