//! Windowed layers, worked by hand on a 4-layer geometry (2 query heads on 1 KV head,
//! head_dim 8): layers 0 and 3 attend over a sliding window of 512 tokens, layers 1 and 2
//! globally. Every method holds min(512, n) entries in layers 0 and 3 and spends the target's
//! per-head average over layers 1 and 2 only.

use kvplan_planner::budgets::full_kv_bytes;
use kvplan_planner::methods::{Pooling, Section};
use kvplan_planner::sections::compute;
use kvplan_planner::{
    Budgets, Geometry, HeadKvSection, Method, PodSection, PyramidSection, ScoreSource, Sections,
    SnapKvSection, SpindleSection, Target,
};
use kvplan_planner::{LayerFunnel, LayerRedundancy};

const W: usize = 512;

fn geometry() -> Geometry {
    Geometry::new(4, 2, 1, 8)
        .and_then(|g| g.with_windows(vec![Some(W), None, None, Some(W)]))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn sections() -> Sections {
    let mut s = Sections::default();
    s.insert(Section::SnapKv(SnapKvSection {
        window: 8,
        kernel_size: 7,
        pooling: Pooling::Maxpool,
    }));
    let funnel = LayerFunnel {
        entropy: 1.0,
        top_k_mass: 0.5,
    };
    s.insert(Section::Pyramid(PyramidSection {
        window: 8,
        beta: 20.0,
        kernel_size: 7,
        pooling: Pooling::Maxpool,
        funnel: vec![funnel; 4],
    }));
    s.insert(Section::HeadKv(HeadKvSection {
        source: ScoreSource::RetrievalReasoning,
        window: 8,
        beta: 1.01,
        temperature: 1.0,
        kernel_size: 7,
        pooling: Pooling::Maxpool,
        trials_kept: 1,
        trials_total: 1,
        layer_uniform: false,
        // The windowed layers' high scores must not count.
        scores: vec![
            vec![0.9, 0.9],
            vec![0.3, 0.1],
            vec![0.0, 0.0],
            vec![0.9, 0.9],
        ],
    }));
    let redundancy = LayerRedundancy {
        k_cos_fraction: 0.5,
        v_cos_fraction: 0.5,
        attention_sparsity: 0.5,
    };
    s.insert(Section::Spindle(SpindleSection {
        window: 8,
        beta: 0.05,
        alpha: 0.525,
        theta_k: 0.98,
        theta_v: 0.95,
        split: None,
        redundancy: vec![redundancy; 4],
    }));
    s.insert(Section::Pod(pod(vec![[0, 0], [1, 2], [3, 3]])));
    s
}

/// The fixture's PoD section with `blocks` for both query heads.
fn pod(blocks: Vec<[usize; 2]>) -> PodSection {
    PodSection {
        delta: 0.5,
        target_saving: None,
        saving: 0.25,
        sinks: 16,
        tau: 0.7,
        blocks: vec![blocks; 2],
        grouping: Default::default(),
    }
}

/// `m`'s budgets on the fixture at `n` tokens under a target of `b` entries per head.
fn budgets(m: Method, n: usize, b: usize) -> Budgets {
    compute(&sections(), &geometry(), m, n, Target::Tokens(b))
        .unwrap_or_else(|e| panic!("{m}: {e}"))
}

fn grid(m: Method, n: usize, b: usize) -> Vec<Vec<usize>> {
    budgets(m, n, b).per_layer_per_kv_head
}

/// Per-layer entries of the one KV head when the windowed layers 0 and 3 hold `window` and the
/// global layers 1 and 2 hold `global`.
fn by_layer(window: usize, global: [usize; 2]) -> Vec<Vec<usize>> {
    vec![vec![window], vec![global[0]], vec![global[1]], vec![window]]
}

#[test]
fn sections_validate_against_the_windows() {
    assert!(sections().validate(&geometry()).is_ok());
}

#[test]
fn uniform_budgets_on_global_layers_only() {
    // n = 2000, B = 72: layers 1, 2 keep 72; layers 0, 3 hold their window of 512.
    assert_eq!(grid(Method::SnapKv, 2000, 72), by_layer(512, [72, 72]));
    // n = 300 < W: a windowed layer holds the whole prompt, 300.
    assert_eq!(grid(Method::SnapKv, 300, 72), by_layer(300, [72, 72]));
}

#[test]
fn pyramid_schedule_over_the_two_global_layers() {
    // m = 2 global layers, B = 72, α = 8: c = 64, top ⌊64/20⌋ = 3, bottom 128 − 3 = 125,
    // step ⌊122/1⌋ = 122 → 125, 3 (sum 128 = 2·64); plus α: 133, 11.
    assert_eq!(grid(Method::Pyramid, 2000, 72), by_layer(512, [133, 11]));
}

#[test]
fn headkv_pool_over_global_heads_is_per_layer_with_one_kv_head() {
    // Global rows only: layer 1 (0.3, 0.1), layer 2 (0, 0); Σ = 0.4 → KV scores 1.0 and 0.
    // b = 72 − 8 = 64, β = 1.01: pool per head ⌊64/1.01⌋ = 63, basic 1; pool 2·63 = 126 all to
    // layer 1 → 1 + 126 + 8 = 135 and 1 + 0 + 8 = 9 (sum 144 = 2·72).
    assert_eq!(grid(Method::HeadKv, 2000, 72), by_layer(512, [135, 9]));
}

#[test]
fn spindle_schedule_and_codebook_on_global_layers_only() {
    // n = 1008, l_w = 8 → l_c = 1000; B = 208 → r_c = 0.2: r = 0.35, 0.05 over the 2 global
    // layers → 350, 50, plus 8: 358, 58.
    let b = budgets(Method::Spindle, 1008, 208);
    assert_eq!(b.per_layer_per_kv_head, by_layer(512, [358, 58]));
    assert_eq!(b.codebook_layers, vec![false, true, true, false]);
}

#[test]
fn pod_shares_keys_between_adjacent_global_layers_only() {
    // Blocks [0], [1, 2], [3]: layer 2's distant keys are shared; it keeps the proximal window
    // B = 72. Values: every token in global layers (2000), the window in windowed ones.
    let b = budgets(Method::Pod, 2000, 72);
    assert_eq!(b.per_layer_per_kv_head, by_layer(512, [2000, 2000]));
    assert_eq!(b.keys_per_layer_per_kv_head, by_layer(512, [2000, 72]));
    // A block mixing a windowed and a global layer is refused, naming it.
    let mut s = sections();
    s.insert(Section::Pod(pod(vec![[0, 1], [2, 2], [3, 3]])));
    let e = s.validate(&geometry()).err().map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some(
            "sections.pod.blocks[0][0]: expected a single-layer block for windowed layer 0, \
             found [0, 1]"
        )
    );
}

#[test]
fn every_method_holds_the_same_bytes_and_full_kv_counts_windows() {
    // FullKV at n = 2000: spans 512 + 2000 + 2000 + 512 = 5024 entries per KV head,
    // 2 × 5024 × 8 × 4 bytes = 321,536.
    let g = geometry();
    assert_eq!(full_kv_bytes(&g, 2000, 4), 321_536);
    // Target-following methods: 512 + 72 + 72 + 512 = 1168 entries → 2 × 1168 × 32 = 74,752.
    for m in [Method::SnapKv, Method::Pyramid, Method::HeadKv] {
        let b = compute(&sections(), &g, m, 2000, Target::Tokens(72))
            .unwrap_or_else(|e| panic!("{m}: {e}"));
        assert_eq!(b.total(), 1168, "{m}");
        assert_eq!(b.kv_bytes(8, 4), 74_752, "{m}");
        assert!(b.compress);
    }
}

#[test]
fn a_prompt_inside_every_budget_is_not_compressed() {
    // n = 60 < B = 72: every layer holds the whole prompt, windowed ones too (60 < 512).
    let b = budgets(Method::SnapKv, 60, 72);
    assert_eq!(b.total(), 4 * 60);
    assert!(!b.compress);
}
