//! The hand-made SmolLM2 profile through the planner, with expectations worked by hand from the
//! pattern in `fixtures/README.md`.

mod common;

use common::{build, profile};
use kvplan_planner::methods::headkv::HeadKvOptions;
use kvplan_planner::methods::pod::PodOptions;
use kvplan_planner::HeadKvSection;
use kvplan_planner::{Method, Plan, PlanOptions, PodSection, Profile, Target};

fn plan(target: Target) -> Plan {
    build(&profile(), &Method::ALL, target, &PlanOptions::default())
}

/// `method`'s budgets `[layer][KV head]` in `p` at 8192 tokens, after checking that they hold
/// the target's 128 entries per head in all.
fn budgets_at_8192(p: &Plan, method: Method) -> Vec<Vec<usize>> {
    let b = p.budgets_at(method, 8192).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.total(), 30 * 3 * 128);
    b.per_layer_per_kv_head
}

/// The profile's six scored heads as `(layer, KV head)`, by falling retrieval score: 0.62, 0.48,
/// 0.35, 0.21, 0.12, 0.05 (`fixtures/README.md` names their query heads).
const SCORED: [(usize, usize); 6] = [(14, 1), (16, 0), (20, 2), (11, 0), (22, 1), (8, 0)];

/// The budgets of the [`SCORED`] heads, in that order.
fn scored(k: &[Vec<usize>]) -> Vec<usize> {
    SCORED.iter().map(|&(l, h)| k[l][h]).collect()
}

#[test]
fn fixture_profile_loads() {
    let p = profile();
    assert_eq!(p.model.geometry.q_to_kv, vec![0, 0, 0, 1, 1, 1, 2, 2, 2]);
    assert_eq!(p.retrieval.scores[14][4], 0.62);
}

#[test]
fn pyramid_on_smollm2_by_hand() {
    // B = 128, α = 8, β = 20, 30 layers, n = 8192: c = 120; top = ⌊120/20⌋ = 6;
    // bottom = 240 − 6 = 234; step = ⌊228/29⌋ = 7 (r = 228 − 203 = 25).
    // Σ (234 − 7l) = 30·234 − 7·435 = 3975; target 30·120 = 3600; E = 375 = 30·25/2 →
    // 12 from every layer and one more from the top 15 (layers 15–29).
    // Layer 0: 234 − 12 + 8 = 230. Layer 14: 234 − 98 − 12 + 8 = 132. Layer 15: 234 − 105 − 13
    // + 8 = 124. Layer 29: 234 − 203 − 13 + 8 = 26.
    let k = budgets_at_8192(&plan(Target::Tokens(128)), Method::Pyramid);
    assert_eq!(k[0], vec![230; 3]);
    assert_eq!(k[14], vec![132; 3]);
    assert_eq!(k[15], vec![124; 3]);
    assert_eq!(k[29], vec![26; 3]);
}

#[test]
fn headkv_r_on_smollm2_by_hand() {
    // Retrieval scores sum to 1.83. B = 128, α = 8 → b = 120; pool per head ⌊120/1.01⌋ = 118,
    // basic 2; pool 118 · 90 = 10620 → per unit of raw score 10620/1.83 = 5803.2787:
    // (14, q4 → kv1) 0.62 → 3598.03; (16, q1 → kv0) 0.48 → 2785.57; (20, q7 → kv2) 0.35 →
    // 2031.15; (11, q2 → kv0) 0.21 → 1218.69; (22, q5 → kv1) 0.12 → 696.39; (8, q0 → kv0)
    // 0.05 → 290.16. Floors sum 10618; the 2 left go to fractions .69 and .57.
    // Budgets = 2 + share + 8: 3608, 2796, 2041, 1229, 706, 300; every other head 10.
    let k = budgets_at_8192(&plan(Target::Tokens(128)), Method::HeadKvR);
    assert_eq!(scored(&k), [3608, 2796, 2041, 1229, 706, 300]);
    assert_eq!(k[0], vec![10; 3]);
}

#[test]
fn headkv_r_layer_uniform_control_by_hand() {
    // The same plan under `headkv-r@layer-uniform`: each layer keeps HeadKV-R's total (above)
    // split over its 3 KV heads. Layer 14: 10 + 3608 + 10 = 3628 → 1210, 1209, 1209; layer 16:
    // 2796 + 10 + 10 = 2816 → 939, 939, 938; a layer of 10s stays 10s.
    let p = plan(Target::Tokens(128));
    let name: kvplan_planner::MethodName = "headkv-r@layer-uniform"
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let (m, c) = (name.method(), name.control().expect("a control"));
    let controlled =
        kvplan_planner::controls::with_control(&p, m, c).unwrap_or_else(|e| panic!("{e}"));
    let k = budgets_at_8192(&controlled, Method::HeadKvR);
    assert_eq!(k[14], vec![1210, 1209, 1209]);
    assert_eq!(k[16], vec![939, 939, 938]);
    assert_eq!(k[0], vec![10; 3]);
    // The flag never enters a built plan's file.
    let text = serde_json::to_string(&p).unwrap_or_else(|e| panic!("{e}"));
    assert!(!text.contains("layer_uniform"));
}

#[test]
fn headkv_r_with_its_own_beta_by_hand() {
    // β = 2 for headkv-r only. b = 120; pool per head ⌊120/2⌋ = 60, basic 60; pool 60 · 90 =
    // 5400 → per unit of raw score 5400/1.83 = 2950.8197: 0.62 → 1829.51; 0.48 → 1416.39;
    // 0.35 → 1032.79; 0.21 → 619.67; 0.12 → 354.10; 0.05 → 147.54. Floors sum 5397; the 3 left
    // go to fractions .79, .67 and .54. Budgets = 60 + share + 8: 1897, 1484, 1101, 688, 422,
    // 216; every other head 68.
    let opts = PlanOptions {
        headkv: HeadKvOptions {
            beta_r: Some(2.0),
            ..HeadKvOptions::default()
        },
        ..PlanOptions::default()
    };
    let p = build(&profile(), &Method::ALL, Target::Tokens(128), &opts);
    let k = budgets_at_8192(&p, Method::HeadKvR);
    assert_eq!(scored(&k), [1897, 1484, 1101, 688, 422, 216]);
    assert_eq!(k[0], vec![68; 3]);
    // headkv (retrieval-reasoning) keeps the shared β.
    let beta = |m| {
        p.sections
            .get::<HeadKvSection>(m)
            .unwrap_or_else(|| panic!("no {m:?}"))
            .beta
    };
    assert_eq!((beta(Method::HeadKv), beta(Method::HeadKvR)), (1.01, 2.0));
}

#[test]
fn pod_on_smollm2_by_hand() {
    // δ = 0.5: blocks of 13, 9 and 6 layers for query heads h mod 3 = 0, 1, 2; each KV head keeps
    // distant keys at {0, 6, 9, 12, 13, 18, 24, 26, 27}: saving 21/30.
    let p = plan(Target::Ratio(0.125));
    let pod = p
        .sections
        .get::<PodSection>(Method::Pod)
        .unwrap_or_else(|| panic!("no pod"));
    assert_eq!(pod.blocks[0], vec![[0, 12], [13, 25], [26, 29]]);
    assert_eq!(pod.blocks[4], vec![[0, 8], [9, 17], [18, 26], [27, 29]]);
    assert_eq!(
        pod.blocks[8],
        vec![[0, 5], [6, 11], [12, 17], [18, 23], [24, 29]]
    );
    assert!((pod.saving - 0.7).abs() < 1e-12);
    // n = 8192, ratio 1/8 → proximal 1024 = 16 sinks + 1008 recent.
    let b = p
        .budgets_at(Method::Pod, 8192)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((b.sinks, b.recent), (16, 1008));
    for (l, row) in b.keys_per_layer_per_kv_head.iter().enumerate() {
        let stored = [0, 6, 9, 12, 13, 18, 24, 26, 27].contains(&l);
        assert_eq!(row, &vec![if stored { 8192 } else { 1024 }; 3], "layer {l}");
    }
    // KV bytes: values 90 · 8192, keys 27 · 8192 + 63 · 1024, × 64 × 4 bytes.
    let bytes = (90 * 8192 + 27 * 8192 + 63 * 1024) * 64 * 4;
    assert_eq!(b.kv_bytes(64, 4), bytes as u64);
}

#[test]
fn pod_delta_for_a_target_saving() {
    // A saving of 0.7 is reached at δ = 0.5 (blocks above); the next larger similarity value,
    // 0.52, splits head kind 2 further (1 − 0.1·5 = 0.5 < 0.52) and saves less, so 0.5 is the
    // largest δ reaching 0.7.
    let opts = PlanOptions {
        pod: PodOptions {
            target_saving: Some(0.7),
            ..PodOptions::default()
        },
        ..PlanOptions::default()
    };
    let p = build(&profile(), &[Method::Pod], Target::Tokens(64), &opts);
    let pod = p
        .sections
        .get::<PodSection>(Method::Pod)
        .unwrap_or_else(|| panic!("no pod"));
    assert_eq!(pod.delta, 0.5);
    assert_eq!(pod.target_saving, Some(0.7));
}

#[test]
fn plan_round_trips_byte_identical() {
    let opts = PlanOptions {
        preview_context_len: Some(4096),
        ..PlanOptions::default()
    };
    let a = build(&profile(), &Method::ALL, Target::Tokens(128), &opts)
        .to_json()
        .unwrap_or_else(|e| panic!("{e}"));
    let b = Plan::from_json(&a)
        .and_then(|p| p.to_json())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a, b);
}

#[test]
fn evidence_keeps_six_significant_digits() {
    use kvplan_planner::build::evidence;
    // Two funnel entropies of layer 0 measured by two builds of the runtime (summation order).
    assert_eq!(evidence(8.586831886975324), 8.58683);
    assert_eq!(evidence(8.586831863772348), 8.58683);
    assert_eq!(evidence(0.000123456789), 0.000123457);
    assert_eq!(evidence(-2.5e-7), -2.5e-7);
    assert_eq!(evidence(123456789.0), 123457000.0);
    assert_eq!(evidence(0.9999996), 1.0);
    assert_eq!(evidence(0.0), 0.0);
    // Written as the short decimal, not as the nearest double's 17 digits.
    assert_eq!(
        serde_json::to_string(&evidence(0.1 + 0.2)).unwrap_or_default(),
        "0.3"
    );
}

#[test]
fn summation_noise_in_the_evidence_leaves_the_plan_bytes_alone() {
    let opts = PlanOptions {
        preview_context_len: Some(4096),
        ..PlanOptions::default()
    };
    let json = |p: &Profile| {
        build(p, &Method::ALL, Target::Tokens(128), &opts)
            .to_json()
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let a = profile();
    let mut b = a.clone();
    let nudge = |x: &mut f64| *x *= 1.0 + 3e-9;
    for f in &mut b.funnel {
        nudge(&mut f.entropy);
        nudge(&mut f.top_k_mass);
    }
    for r in &mut b.kv_redundancy {
        nudge(&mut r.k_cos_fraction);
        nudge(&mut r.v_cos_fraction);
        nudge(&mut r.attention_sparsity);
    }
    for m in b.wavelet.magnitudes.iter_mut().flatten() {
        nudge(m);
    }
    assert_ne!(a, b);
    assert_eq!(json(&a), json(&b));
    // A change in the 5th digit does show.
    let mut c = a.clone();
    c.funnel[3].entropy *= 1.0 + 3e-5;
    assert_ne!(json(&a), json(&c));
}
