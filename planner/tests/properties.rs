//! Invariants over random geometries, scores, similarities and targets (proptest).

use kvplan_planner::methods::pod;
use kvplan_planner::{
    build_plan, Geometry, HeadScores, LayerFunnel, LayerRedundancy, LayerSimilarity, Method,
    ModelIdentity, Plan, PlanOptions, Profile, ProfileSettings, Target, Wavelet,
    PROFILE_SCHEMA_VERSION,
};
use proptest::prelude::*;

/// The observation window of every SnapKV-style method in `PlanOptions::default()`.
const WINDOW: usize = 8;

fn symmetric(l: usize, raw: &[f64]) -> Vec<Vec<f64>> {
    (0..l)
        .map(|a| {
            (0..l)
                .map(|b| {
                    if a == b {
                        1.0
                    } else {
                        raw[a.min(b) * l + a.max(b)]
                    }
                })
                .collect()
        })
        .collect()
}

/// A random profile; `windows[l % len]` is layer `l`'s attention span (empty: all global).
fn profile(
    layers: usize,
    kv: usize,
    group: usize,
    scores: &[f64],
    sims: &[f64],
    windows: &[Option<usize>],
) -> Profile {
    let spans = (0..layers)
        .map(|l| windows.get(l % windows.len().max(1)).copied().flatten())
        .collect();
    let geometry = Geometry::new(layers, kv * group, kv, 8)
        .and_then(|g| g.with_windows(spans))
        .unwrap_or_else(|e| panic!("{e}"));
    let q = kv * group;
    let grid: Vec<Vec<f64>> = (0..layers)
        .map(|l| (0..q).map(|h| scores[(l * q + h) % scores.len()]).collect())
        .collect();
    let per_head = (0..q)
        .map(|h| {
            symmetric(
                layers,
                &sims[h * layers * layers..(h + 1) * layers * layers],
            )
        })
        .collect();
    Profile {
        schema_version: PROFILE_SCHEMA_VERSION,
        model: ModelIdentity {
            name: String::from("random"),
            architecture: String::from("llama"),
            gguf_sha256: "ab".repeat(32),
            geometry,
        },
        settings: ProfileSettings {
            kvplan_version: String::from("0.1.0"),
            date: String::from("2026-01-01"),
            seeds: vec![1],
            haystack: String::from("none"),
            examples: 1,
            context_lengths: vec![100],
            observation_rows: 4,
            funnel_top_k: 4,
            theta_k: 0.98,
            theta_v: 0.95,
            retrieval_reasoning_chance: None,
        },
        retrieval: HeadScores {
            trials_kept: 1,
            trials_total: 1,
            scores: grid.clone(),
        },
        retrieval_reasoning: HeadScores {
            trials_kept: 1,
            trials_total: 1,
            scores: grid
                .iter()
                .map(|r| r.iter().map(|x| x * x).collect())
                .collect(),
        },
        layer_similarity: LayerSimilarity {
            samples: 1,
            per_head,
        },
        wavelet: Wavelet {
            levels: 2,
            magnitudes: vec![vec![0.5, 0.25]; layers],
        },
        funnel: vec![
            LayerFunnel {
                entropy: 1.0,
                top_k_mass: 0.5
            };
            layers
        ],
        kv_redundancy: vec![
            LayerRedundancy {
                k_cos_fraction: 0.5,
                v_cos_fraction: 0.5,
                attention_sparsity: 0.5
            };
            layers
        ],
        details: None,
    }
}

/// Whether `method` may refuse budget `b` at context `n`: the documented limits only.
fn refusal_allowed(method: Method, n: usize, b: usize) -> bool {
    let spindle_low = n > WINDOW && b > WINDOW && (b - WINDOW) as f64 / (n - WINDOW) as f64 <= 0.05;
    b == 0
        || match method {
            Method::SnapKv => b <= WINDOW && b < n,
            Method::Pyramid => b <= WINDOW && b <= n,
            Method::HeadKv | Method::HeadKvR => b <= WINDOW && b < n,
            Method::Spindle => n > b && (b <= WINDOW || spindle_low),
            _ => false,
        }
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        (1usize..3000).prop_map(Target::Tokens),
        (0.001f64..=1.0).prop_map(Target::Ratio),
    ]
}

/// Layers, KV heads and group of a random geometry.
type Dims = (usize, usize, usize);

/// (dims, scores, similarities of up to 4·3 heads × 10 × 10 layers, layer windows: none, or a
/// pattern of global and windowed layers repeated over the layers).
fn shape() -> impl Strategy<Value = (Dims, Vec<f64>, Vec<f64>, Vec<Option<usize>>)> {
    (1usize..=10, 1usize..=4, 1usize..=3).prop_flat_map(|(l, kv, g)| {
        let scores = prop::collection::vec(prop_oneof![Just(0.0), 0.0f64..=1.0], 1..=40);
        let sims = prop::collection::vec(0.0f64..=1.0, kv * g * l * l);
        let window = prop_oneof![Just(None), (1usize..2000).prop_map(Some)];
        let windows = prop_oneof![Just(Vec::new()), prop::collection::vec(window, 1..=6)];
        (Just((l, kv, g)), scores, sims, windows)
    })
}

fn build(p: &Profile, target: Target) -> Plan {
    let opts = PlanOptions {
        preview_context_len: Some(777),
        ..PlanOptions::default()
    };
    build_plan(p, &Method::ALL, target, &opts).unwrap_or_else(|e| panic!("{e}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn budgets_sum_to_target_and_fit_the_context(
        ((l, kv, g), scores, sims, windows) in shape(), n in 1usize..6000, t in target()
    ) {
        let p = profile(l, kv, g, &scores, &sims, &windows);
        let geo = &p.model.geometry;
        let globals = geo.global_layers();
        // Windowed layers hold their span; the target's average goes to the global layers.
        let spans: usize = (0..l).filter(|&x| geo.is_windowed(x)).map(|x| geo.span(x, n)).sum();
        let plan = build(&p, t);
        let b = t.per_head(n);
        for m in Method::ALL.into_iter().filter(|m| m.follows_target()) {
            match plan.budgets(m, n, t) {
                Ok(bud) => {
                    let grid = &bud.per_layer_per_kv_head;
                    prop_assert_eq!(grid.len(), l);
                    prop_assert!(grid.iter().all(|r| r.len() == kv));
                    let want = (globals.len() * b + spans) * kv;
                    prop_assert_eq!(bud.total(), want, "{} n={} b={}", m, n, b);
                    prop_assert!(grid.iter().flatten().all(|&x| (1..=n).contains(&x)));
                    for x in (0..l).filter(|&x| geo.is_windowed(x)) {
                        prop_assert!(grid[x].iter().all(|&e| e == geo.span(x, n)));
                    }
                    if m == Method::Pyramid {
                        let col: Vec<usize> = globals.iter().map(|&x| grid[x][0]).collect();
                        prop_assert!(col.windows(2).all(|w| w[0] >= w[1]), "not monotone: {:?}", col);
                    }
                }
                Err(e) => prop_assert!(refusal_allowed(m, n, b), "{} n={} b={}: {}", m, n, b, e),
            }
        }
    }

    #[test]
    fn pod_blocks_are_consecutive_cover_and_meet_delta(
        ((l, kv, g), scores, sims, windows) in shape(), delta in 0.0f64..=1.0
    ) {
        let p = profile(l, kv, g, &scores, &sims, &windows);
        let geo = &p.model.geometry;
        let per_head = &p.layer_similarity.per_head;
        for grouping in [pod::Grouping::QueryHead, pod::Grouping::KvHead] {
            for (h, blocks) in pod::blocks(per_head, delta, geo, grouping).iter().enumerate() {
                let mut next = 0;
                for b in blocks {
                    prop_assert_eq!(b[0], next);
                    prop_assert!(b[1] >= b[0]);
                    prop_assert!(b[0] == b[1] || (b[0]..=b[1]).all(|x| !geo.is_windowed(x)));
                    let inside = b[0]..=b[1];
                    let pairs = inside.clone().flat_map(|a| inside.clone().map(move |c| (a, c)));
                    for (a, c) in pairs {
                        prop_assert!(a == c || per_head[h][a][c] >= delta);
                    }
                    next = b[1] + 1;
                }
                prop_assert_eq!(next, l);
            }
        }
        // Under kv-head blocks the query heads of a KV head share their blocks; with one query
        // head per KV head (MHA) they are the query-head blocks.
        let kvb = pod::blocks(per_head, delta, geo, pod::Grouping::KvHead);
        for h in 0..geo.q_heads {
            let first = geo.q_heads_of(geo.kv_of(h)).next().unwrap_or(h);
            prop_assert_eq!(&kvb[h], &kvb[first]);
        }
        if geo.q_heads == geo.kv_heads {
            prop_assert_eq!(kvb, pod::blocks(per_head, delta, geo, pod::Grouping::QueryHead));
        }
        // PoD keys never exceed the context and values keep every token.
        let plan = build(&p, Target::Tokens(64));
        let bud = plan.budgets_at(Method::Pod, 500).unwrap_or_else(|e| panic!("{e}"));
        prop_assert!(bud.keys_per_layer_per_kv_head.iter().flatten().all(|&x| x <= 500));
        let spans: usize = (0..l).map(|x| geo.span(x, 500)).sum();
        prop_assert_eq!(bud.total(), spans * kv);
        prop_assert!(bud.keys_per_layer_per_kv_head[0].iter().all(|&x| x == geo.span(0, 500)));
    }

    #[test]
    fn same_input_gives_byte_identical_plans(
        ((l, kv, g), scores, sims, windows) in shape(), t in target()
    ) {
        let p = profile(l, kv, g, &scores, &sims, &windows);
        let a = build(&p, t).to_json().unwrap_or_else(|e| panic!("{e}"));
        let b = build(&p.clone(), t).to_json().unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(&a, &b);
        // And a plan read back (preview checked against the rules) writes the same bytes.
        let c = Plan::from_json(&a).and_then(|p| p.to_json()).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(&a, &c);
    }
}
