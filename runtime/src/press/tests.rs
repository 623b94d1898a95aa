//! Presses on a tiny random model: every press under every budget wrapper keeps at most its
//! budget, and with a budget at least the context gives FullKV's output. The presses come from
//! the registry, configured from a plan the planner builds for the tiny model's geometry, so a
//! new method is in the matrix without an edit here.

use burn::backend::Flex;
use kvplan_planner::{build_plan, Method, Plan, PlanOptions, Pooling, Profile, Target, METHODS};

use super::from_plan::FromPlan;
use super::full::FullPress;
use super::options::{PositionPolicy, PressOptions};
use super::pod::{PodPress, Proximal};
use super::registry::press_from;
use super::snapkv::SnapKvScorer;
use super::spindle::{Codebooks, SpindlePress};
use super::treekv::TreeKvPress;
use super::*;
use crate::generate::SplitMix64;

use crate::model::rope::{Rope, RopeSet};
use crate::test_model::V;
pub(super) use crate::test_model::{D, NH, NKV, THETA};

pub(super) type B = Flex;

pub(super) const L: usize = 2;

/// The tiny model's RoPE frequencies.
pub(super) fn rope() -> RopeSet {
    RopeSet::uniform(D, THETA, L)
}

/// The tiny model's geometry and weight draw.
fn tiny_spec() -> crate::test_model::TinySpec {
    crate::test_model::TinySpec::small(99, L, 256)
}

/// A 2-layer Llama with 4 query heads on 2 KV heads, random weights.
pub(crate) fn tiny_model() -> Model<B> {
    let g = crate::test_model::tiny_gguf(&tiny_spec());
    Model::from_gguf(&g, &Default::default()).expect("tiny model")
}

/// [`tiny_model`] as a Qwen2 file: Q/K/V biases in every layer.
fn tiny_qwen2_model() -> Model<B> {
    let spec = tiny_spec();
    let g = crate::test_model::as_qwen2(&crate::test_model::tiny_gguf(&spec), &spec);
    Model::from_gguf(&g, &Default::default()).expect("tiny qwen2 model")
}

pub(super) fn prompt(n: usize) -> Vec<u32> {
    let mut rng = SplitMix64::new(5);
    (0..n).map(|_| (rng.next_u64() % V as u64) as u32).collect()
}

/// The tiny model's plan: a section for every method of the planner's table, built by the
/// planner from a hand-made profile of the tiny model's geometry (`fixtures/tiny.profile.json`:
/// 2 layers, 4 query heads on 2 KV heads, head_dim 8), at 12 entries per head.
pub(super) fn tiny_plan() -> Plan {
    let profile = Profile::from_json(include_str!("fixtures/tiny.profile.json"))
        .unwrap_or_else(|e| panic!("tiny profile: {e}"));
    build_plan(
        &profile,
        &Method::ALL,
        Target::Tokens(12),
        &PlanOptions::default(),
    )
    .unwrap_or_else(|e| panic!("tiny plan: {e}"))
}

/// `alloc` as the planner's `[layer][kv_head]` grid.
fn grid(alloc: &Allocation) -> Vec<Vec<usize>> {
    (0..L).map(|l| alloc.layer(l, NKV)).collect()
}

/// Every method's press from the registry, configured from `plan` for a prompt of `n` tokens,
/// with budgets `alloc` in place of the plan's (FullKV as the registry builds it, without one).
pub(super) fn registry_presses(
    plan: &Plan,
    model: &Model<B>,
    alloc: &Allocation,
    n: usize,
) -> Vec<(&'static str, Box<dyn Press<B>>)> {
    registry_presses_except(plan, model, alloc, n, &[])
}

/// [`registry_presses`] without the methods named in `skip`.
pub(super) fn registry_presses_except(
    plan: &Plan,
    model: &Model<B>,
    alloc: &Allocation,
    n: usize,
    skip: &[&str],
) -> Vec<(&'static str, Box<dyn Press<B>>)> {
    let build = |method: Method| -> Box<dyn Press<B>> {
        if !method.has_section() {
            return Box::new(FullPress);
        }
        let mut budgets = plan
            .budgets(method, n, plan.target)
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        budgets.per_layer_per_kv_head = grid(alloc);
        let from = FromPlan {
            method,
            plan,
            budgets: &budgets,
            config: &model.config,
            options: PressOptions::default(),
        };
        press_from(&from).unwrap_or_else(|e| panic!("{method}: {e}"))
    };
    METHODS
        .iter()
        .filter(|m| !skip.contains(&m.name))
        .map(|m| (m.name, build(m.method)))
        .collect()
}

/// Methods the budget matrix leaves out, each with tests of its own: FullKV keeps everything,
/// PoD keeps every token (its budgets do not follow the target), SpindleKV holds its entries in
/// codebooks rather than K/V tensors (it changes the forward pass).
const OUTSIDE_THE_MATRIX: [&str; 3] = ["full", "spindle", "pod"];

/// The presses of the budget matrix under `alloc`, by name: every method whose budgets follow
/// the target and whose cache is the model's own K/V tensors (it keeps the model's forward
/// pass), so the cache holds exactly the entries kept.
fn presses(
    model: &Model<B>,
    alloc: &Allocation,
    n: usize,
) -> Vec<(&'static str, Box<dyn Press<B>>)> {
    let plan = tiny_plan();
    let all = registry_presses(&plan, model, alloc, n);
    let (inside, outside): (Vec<_>, Vec<_>) = all.into_iter().partition(|(name, press)| {
        let method: Method = name.parse().expect("a table name");
        method.follows_target() && !press.changes_forward()
    });
    let left_out: Vec<&str> = outside.iter().map(|(name, _)| *name).collect();
    assert_eq!(left_out, OUTSIDE_THE_MATRIX, "methods without a matrix row");
    inside
}

/// SpindleKV under `alloc` with codebooks in every layer at θ_K = θ_V = `theta`, window 4.
pub(super) fn spindle(alloc: &Allocation, theta: f64) -> SpindlePress {
    let books = Codebooks {
        layers: vec![true; L],
        theta_k: theta,
        theta_v: theta,
    };
    SpindlePress::new(alloc.clone(), 4, books, rope())
}

pub(super) fn allocations(b: usize) -> Vec<Allocation> {
    vec![
        Allocation::Uniform(b),
        Allocation::PerLayer(vec![b + 2, b - 2]),
        Allocation::PerHead(vec![vec![b + 1, b - 1], vec![b - 2, b + 2]]),
    ]
}

fn logits_of(t: burn::tensor::Tensor<B, 2>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

/// Prefill then `steps` greedy decode steps; every step's logits.
pub(super) fn run(
    model: &Model<B>,
    press: &mut dyn Press<B>,
    ids: &[u32],
    steps: usize,
) -> Vec<Vec<f32>> {
    let mut s = Session::new(model, press);
    let mut out = vec![logits_of(s.prefill(ids).expect("prefill"))];
    for _ in 0..steps {
        let next = crate::generate::argmax(out.last().expect("logits"));
        out.push(logits_of(s.step(next).expect("step")));
    }
    out
}

/// Asserts that every step's logits of `got` are within `tol` of `want`'s and pick the same
/// token; `what` names the run in the message.
pub(super) fn assert_same_output(got: &[Vec<f32>], want: &[Vec<f32>], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: steps");
    for (step, (a, b)) in got.iter().zip(want).enumerate() {
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(diff <= tol, "{what} step {step}: {diff}");
        let (x, y) = (crate::generate::argmax(a), crate::generate::argmax(b));
        assert_eq!(x, y, "{what} step {step}: argmax");
    }
}

/// `scorer`'s prefill scores of one head of five entries (positions 0–4, budget 3) that observed
/// only the attention `row` of the query at position 2: a one-row window at the question's end,
/// followed by a tail (3, 4).
pub(super) fn scores_before_a_tail(scorer: &mut dyn Scorer, row: [f32; 5]) -> Scores {
    let obs = crate::observe::LayerObservation {
        attention: vec![crate::observe::AttentionRows {
            query_positions: vec![2],
            probs: vec![vec![row.to_vec()]],
            key_positions: vec![(0..5).collect()],
            kv_of: vec![0],
        }],
        ..Default::default()
    };
    scorer.prefill_scores(LayerView::new(0, &[(0..5).collect()], Some(&obs), &[3]))
}

/// Runs a 20-token prompt and 5 greedy steps with FullKV and, under every allocation of 40
/// entries per head (above the context: nothing to evict), with each press `presses` builds for
/// it (named in the message with the allocation); each must give FullKV's output within `tol`.
pub(super) fn assert_fullkv_output_above_the_context(
    model: &Model<B>,
    tol: f32,
    presses: impl Fn(&Allocation, usize) -> Vec<(&'static str, Box<dyn Press<B>>)>,
) {
    let ids = prompt(20);
    let full = run(model, &mut FullPress, &ids, 5);
    for alloc in allocations(40) {
        for (name, mut press) in presses(&alloc, ids.len()) {
            let got = run(model, press.as_mut(), &ids, 5);
            assert_same_output(&got, &full, tol, &format!("{name} {alloc:?}"));
        }
    }
}

#[test]
fn every_press_under_every_wrapper_keeps_at_most_its_budget() {
    let model = tiny_model();
    let ids = prompt(30);
    for alloc in allocations(12) {
        for (name, mut press) in presses(&model, &alloc, ids.len()) {
            let decoding = press.evicts_while_decoding();
            let mut s = Session::new(&model, press.as_mut());
            s.prefill(&ids).expect("prefill");
            for step in 0..=4 {
                for (l, layer) in s.cache.layers.iter().enumerate() {
                    for h in 0..NKV {
                        let b = alloc.budget(l, h);
                        // Prefill keeps exactly the budget; only decode-time methods hold it
                        // while decoding, the others grow by one entry a step.
                        let limit = if decoding { b } else { b + step };
                        assert_eq!(
                            layer.len(h),
                            limit,
                            "{name} {alloc:?} l{l} h{h} step {step}"
                        );
                    }
                }
                // The bytes held are the entries kept, and nothing else.
                let entries: usize = s
                    .cache
                    .layers
                    .iter()
                    .map(|l| (0..NKV).map(|h| l.len(h)).sum::<usize>())
                    .sum();
                assert_eq!(s.memory().held_bytes as usize, entries * D * 4 * 2);
                s.step(7).expect("step");
            }
        }
    }
}

#[test]
fn tokens_appended_uncompressed_stay_on_top_of_the_budget_while_decoding() {
    // Question-agnostic evaluation: the context (30 tokens) is compressed to the budget, the
    // question (5 tokens) appended whole. A method holding its budget while generating must
    // hold budget + 5 from then on — evicting 5 context entries at the first step to get back
    // to the budget would leave it fewer bytes than the reported KV fraction; the others grow
    // by one entry a step from budget + 5.
    let model = tiny_model();
    let ids = prompt(35);
    for alloc in allocations(12) {
        for (name, mut press) in presses(&model, &alloc, 30) {
            let decoding = press.evicts_while_decoding();
            let mut s = Session::new(&model, press.as_mut());
            s.prefill(&ids[..30]).expect("context");
            s.extend(&ids[30..]).expect("question");
            for step in 0..=4 {
                for (l, layer) in s.cache.layers.iter().enumerate() {
                    for h in 0..NKV {
                        let b = alloc.budget(l, h) + 5;
                        let want = if decoding { b } else { b + step };
                        assert_eq!(layer.len(h), want, "{name} {alloc:?} l{l} h{h} step {step}");
                    }
                }
                s.step(7).expect("step");
            }
        }
    }
}

#[test]
fn a_budget_above_the_context_gives_fullkv_output() {
    let model = tiny_model();
    assert_fullkv_output_above_the_context(&model, 1e-5, |alloc, n| presses(&model, alloc, n));
}

#[test]
fn heads_with_different_budgets_hold_different_lengths_without_padding() {
    let model = tiny_model();
    let alloc = Allocation::PerHead(vec![vec![9, 5], vec![6, 8]]);
    let mut press = SelectionPress::new(
        Method::HeadKv,
        Box::new(SnapKvScorer::new(4, 3, Pooling::Maxpool)),
        alloc,
    );
    let mut s = Session::new(&model, &mut press);
    s.prefill(&prompt(24)).expect("prefill");
    let lens: Vec<Vec<usize>> = s
        .cache
        .layers
        .iter()
        .map(|l| (0..NKV).map(|h| l.len(h)).collect())
        .collect();
    assert_eq!(lens, vec![vec![9, 5], vec![6, 8]]);
    assert!(matches!(
        s.cache.layers[0].store(),
        Some(crate::cache::KvStore::PerHead { .. })
    ));
    // (9 + 5 + 6 + 8) entries × (K + V) × 8 dims × 4 bytes.
    assert_eq!(s.memory().held_bytes, 28 * 2 * 8 * 4);
    assert_eq!(s.memory().full_bytes, (2 * 24 * D * 4 * L * NKV) as u64);
    // Every head's window (the last 4 prompt positions) is kept.
    for l in &s.cache.layers {
        for h in 0..NKV {
            assert!(l.positions(h).ends_with(&[20, 21, 22, 23]));
        }
    }
}

#[test]
fn rerotation_moves_keys_to_their_new_positions() {
    // Keys kept at positions 0, 2, 5 and moved to 0, 1, 2 equal the pre-RoPE keys rotated at
    // 0, 1, 2 directly.
    let model = tiny_model();
    let mut cache = model.new_cache();
    let mut obs = Observer::new(observe_kv(), L);
    model
        .forward(
            &prompt(6),
            &mut cache,
            Some(&mut obs),
            crate::model::Logits::Last,
        )
        .expect("forward");
    let layer = &mut cache.layers[1];
    layer.retain(&[vec![0, 2, 5], vec![0, 2, 5]]);
    reassign_layer(layer, rope().layer(1));
    let kv = &obs.layers[1].keys_values[0];
    let rope = Rope::<B>::new(D, THETA, 16, &Default::default());
    for h in 0..NKV {
        let rows: Vec<f32> = [0usize, 2, 5]
            .iter()
            .flat_map(|&t| kv.keys[(h * 6 + t) * D..(h * 6 + t + 1) * D].to_vec())
            .collect();
        let pre = burn::tensor::Tensor::<B, 3>::from_data(
            burn::tensor::TensorData::new(rows, [1, 3, D]),
            &Default::default(),
        );
        let pos = burn::tensor::Tensor::from_data(
            burn::tensor::TensorData::new(vec![0i64, 1, 2], [3]),
            &Default::default(),
        );
        let want: Vec<f32> = rope.apply(1, pre, pos).into_data().iter::<f32>().collect();
        let got: Vec<f32> = layer
            .head(h)
            .expect("keys")
            .0
            .into_data()
            .iter::<f32>()
            .collect();
        for (a, b) in got.iter().zip(&want) {
            assert!((a - b).abs() < 1e-5, "{got:?} vs {want:?}");
        }
        assert_eq!(layer.positions(h), &[0, 1, 2]);
    }
}

fn observe_kv() -> crate::observe::ObserveConfig {
    crate::observe::ObserveConfig {
        keys_values: true,
        ..Default::default()
    }
}

#[test]
fn treekv_reassigns_positions_and_holds_its_budget_while_decoding() {
    let model = tiny_model();
    let mut press = TreeKvPress::new(Allocation::Uniform(10), 2, 3, 2, rope());
    let mut s = Session::new(&model, &mut press);
    s.prefill(&prompt(24)).expect("prefill");
    assert_eq!(s.cache.next_position, 10);
    for _ in 0..6 {
        s.step(3).expect("step");
        assert_eq!(s.cache.next_position, 10);
        for l in &s.cache.layers {
            assert_eq!(l.positions(0), (0..10).collect::<Vec<_>>().as_slice());
        }
    }
    assert_eq!(s.tokens, 30);
    drop(s);
    // The press still knows where its entries came from: sinks 0, 1, the newest three 27–29.
    let orig = press.original_positions(0, 0);
    assert_eq!(orig.len(), 10);
    assert_eq!(&orig[..2], &[0, 1]);
    assert_eq!(&orig[7..], &[27, 28, 29]);
}

#[test]
fn allocation_takes_the_simplest_form() {
    assert_eq!(
        Allocation::from_grid(&[vec![4, 4], vec![4, 4]]),
        Allocation::Uniform(4)
    );
    assert_eq!(
        Allocation::from_grid(&[vec![5, 5], vec![3, 3]]),
        Allocation::PerLayer(vec![5, 3])
    );
    let g = vec![vec![5, 4], vec![3, 3]];
    assert_eq!(Allocation::from_grid(&g), Allocation::PerHead(g.clone()));
}

#[test]
fn group_mean_averages_query_heads_of_a_kv_head() {
    let per_q = vec![
        vec![1.0, 3.0],
        vec![3.0, 5.0],
        vec![0.0, 2.0],
        vec![2.0, 2.0],
    ];
    // Consecutive query heads per KV head: (1+3)/2, (3+5)/2 and (0+2)/2, (2+2)/2.
    let consecutive = group_mean(&per_q, &[0, 0, 1, 1], 2);
    assert_eq!(consecutive, vec![vec![2.0, 4.0], vec![1.0, 2.0]]);
    // An interleaved map: heads 0, 2 → KV 0: (1+0)/2, (3+2)/2; heads 1, 3: (3+2)/2, (5+2)/2.
    let interleaved = group_mean(&per_q, &[0, 1, 0, 1], 2);
    assert_eq!(interleaved, vec![vec![0.5, 2.5], vec![2.5, 3.5]]);
    // Unfolded to one cache head per query head, each reads its own copy, in order within its
    // KV head: [0, 1, 0, 1] → heads 0, 2 read copies 0, 1 of KV 0; heads 1, 3 copies 2, 3.
    assert_eq!(unfolded(&[0, 1, 0, 1], 4), vec![0, 2, 1, 3]);
    assert_eq!(unfolded(&[0, 0, 1, 1], 4), vec![0, 1, 2, 3]);
    assert_eq!(unfolded(&[0, 0, 1, 1], 2), vec![0, 0, 1, 1]);
    assert_eq!(top_k(&[0.5, 2.0, 0.5, 1.0], 2), vec![1, 3]);
    // Ties keep the earlier entry.
    assert_eq!(top_k(&[1.0, 1.0, 1.0], 2), vec![0, 1]);
}

#[test]
fn the_registry_lists_its_names_on_a_bad_one() {
    let model = tiny_model();
    let err = build_press::<B>("snapkv2", None, 10, None, &model.config)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unknown method `snapkv2`"), "{err}");
    // The list is the method table's, in its order: FullKV first, then the plan's sections.
    assert!(
        err.contains(
            "full, snapkv, h2o, streaming, pyramid, headkv, headkv-r, spindle, pod, treekv"
        ),
        "{err}"
    );
    let err = build_press::<B>("snapkv", None, 10, None, &model.config)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("needs a plan"), "{err}");
}

#[test]
fn spindle_with_theta_one_gives_fullkv_output() {
    // θ = 1: no two vectors merge, so the codebook only splits each vector into direction and
    // magnitude (eq. 14 gives it back up to rounding); with a budget above the context nothing
    // is evicted.
    assert_fullkv_output_above_the_context(&tiny_model(), 1e-4, |alloc, _| {
        vec![("spindle", Box::new(spindle(alloc, 1.0)))]
    });
}

#[test]
fn spindle_keeps_its_budget_in_codebooks_and_holds_no_tensors() {
    let model = tiny_model();
    let ids = prompt(30);
    for alloc in allocations(12) {
        let mut press = spindle(&alloc, 0.5);
        let mut s = Session::new(&model, &mut press);
        s.prefill(&ids).expect("prefill");
        s.step(3).expect("step");
        let held = s.memory().held_bytes;
        assert_eq!(s.cache.bytes(), 0, "codebook layers hold no K/V tensors");
        drop(s);
        let mut book_bytes = 0;
        for l in 0..L {
            for h in 0..NKV {
                // Prefill kept the budget; the decode step added one entry.
                assert_eq!(
                    press.entries(l, h),
                    Some(alloc.budget(l, h) + 1),
                    "{alloc:?}"
                );
                let (ck, cv) = press.codes(l, h).expect("codes");
                assert!(ck <= alloc.budget(l, h) + 1 && cv <= alloc.budget(l, h) + 1);
                book_bytes += (ck + cv) * D * 4 + (alloc.budget(l, h) + 1) * 16;
            }
        }
        assert_eq!(held as usize, book_bytes);
    }
}

#[test]
fn capabilities_by_name_are_the_built_presses_and_agree_with_their_hooks() {
    let model = tiny_model();
    let ids = prompt(12);
    let plan = tiny_plan();
    for &name in PRESS_NAMES {
        // Through the registry's public entry, with the plan's own budgets.
        let spec = build_press::<B>(name, Some(&plan), ids.len(), None, &model.config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut press = spec.press;
        assert_eq!(press.name(), name);
        let caps = press.capabilities();
        let parsed: kvplan_planner::MethodName = name.parse().expect("a registry name");
        assert_eq!(capabilities(parsed), caps, "{name}");
        // The presses whose papers evict while generating (H2O §3, StreamingLLM §3.2, TreeKV
        // Algorithm 1, TOVA §3.3), restated by hand: the table's decode policy must say so.
        let evicting = ["h2o", "streaming", "treekv", "tova"];
        assert_eq!(
            caps.evicts_while_decoding,
            evicting.contains(&name),
            "{name}"
        );
        // Re-assigning positions succeeds exactly for the presses that say they stream.
        let mut s = Session::new(&model, press.as_mut());
        s.prefill(&ids).expect("prefill");
        let moved = s.press.reassign_positions(&mut s.cache, model.rope_set());
        assert_eq!(moved.is_ok(), caps.streams_past_context, "{name}");
    }
}

fn proximal(sinks: usize, recent: usize) -> Proximal {
    Proximal { sinks, recent }
}

fn geometry() -> kvplan_planner::Geometry {
    kvplan_planner::Geometry::new(L, NH, NKV, D).expect("geometry")
}

#[test]
fn pod_with_every_layer_in_its_own_block_equals_fullkv() {
    // Each layer is the lowest of its own block: distant scores are the layer's own, so eq. 4
    // is plain softmax attention split in two groups. Qwen2's Q/K/V biases go through PoD's
    // forward pass as through the model's.
    for (arch, model) in [("llama", tiny_model()), ("qwen2", tiny_qwen2_model())] {
        let ids = prompt(30);
        let full = run(&model, &mut FullPress, &ids, 5);
        let blocks = vec![vec![[0, 0], [1, 1]]; NH];
        let mut pod = PodPress::new(blocks, &geometry(), proximal(2, 6), 0.7, rope());
        let got = run(&model, &mut pod, &ids, 5);
        assert_same_output(&got, &full, 1e-4, &format!("{arch} pod, one layer a block"));
        assert_eq!((pod.gated, pod.skipped), (0, 0));
    }
}

#[test]
fn pod_refuses_the_architectures_its_forward_pass_does_not_apply() {
    for arch in ["llama", "qwen2"] {
        assert!(
            crate::press::from_plan::refuse_pod_on(arch).is_ok(),
            "{arch}"
        );
    }
    let err = crate::press::from_plan::refuse_pod_on("gemma3")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"gemma3\"") && err.contains("sliding-window"),
        "{err}"
    );
}

#[test]
fn pod_shares_distant_keys_once_per_block_and_gates_with_tau() {
    // One block [0, 1] for every head: layer 1 keeps only 2 sink + 6 recent keys per KV head,
    // every value, and takes its distant scores from layer 0.
    let model = tiny_model();
    let ids = prompt(30);
    let blocks = vec![vec![[0, 1]]; NH];
    for (tau, all_skipped) in [(0.0, true), (1.0, false)] {
        let mut pod = PodPress::new(blocks.clone(), &geometry(), proximal(2, 6), tau, rope());
        let mut s = Session::new(&model, &mut pod);
        s.prefill(&ids).expect("prefill");
        for _ in 0..3 {
            s.step(4).expect("step");
        }
        let held = s.memory().held_bytes as usize;
        drop(s);
        // Layer 0: 33 keys + 33 values; layer 1: 8 keys + 33 values; per KV head, 8 dims, f32.
        assert_eq!(held, NKV * (33 + 33 + 8 + 33) * D * 4);
        assert_eq!((pod.keys_held(0, 0), pod.keys_held(1, 1)), (33, 8));
        // The gate is evaluated for layer 1's 4 query heads at each of the 3 decode steps;
        // τ = 0 skips every distant part, τ = 1 none (g < 1 while distant tokens exist).
        assert_eq!(pod.gated, 3 * NH);
        assert_eq!(pod.skipped, if all_skipped { 3 * NH } else { 0 });
    }
    // With a proximal window covering the whole context nothing is distant: FullKV again.
    let full = run(&model, &mut FullPress, &ids, 3);
    let mut pod = PodPress::new(blocks, &geometry(), proximal(4, 60), 0.7, rope());
    let got = run(&model, &mut pod, &ids, 3);
    assert_same_output(&got, &full, 1e-4, "pod, nothing distant");
}

/// Per layer, per head: positions; per-head budgets; the next position.
type Streamed = (Vec<Vec<Vec<usize>>>, Vec<Vec<usize>>, usize);

/// Streams `ids[1..]` after the 1-token prompt `ids[..1]` (as `kvplan eval ppl` does) under
/// `method` from the tiny plan (12 entries per head), positions as `policy` says; returns each
/// layer's per-head positions, the per-head budgets and the cache's next position.
fn streamed(method: Method, policy: PositionPolicy) -> Streamed {
    let model = tiny_model();
    let plan = tiny_plan();
    let ids = prompt(41);
    let budgets = plan
        .budgets(method, ids.len(), plan.target)
        .unwrap_or_else(|e| panic!("{method}: {e}"));
    let from = FromPlan {
        method,
        plan: &plan,
        budgets: &budgets,
        config: &model.config,
        options: PressOptions {
            positions: Some(policy),
            ..Default::default()
        },
    };
    let mut press = press_from::<B>(&from).unwrap_or_else(|e| panic!("{method}: {e}"));
    let mut s = Session::new(&model, press.as_mut());
    s.prefill(&ids[..1]).expect("prefill");
    for &t in &ids[1..] {
        s.step(t).expect("step");
    }
    let positions = s
        .cache
        .layers
        .iter()
        .map(|l| (0..l.kv_heads()).map(|h| l.positions(h).to_vec()).collect())
        .collect();
    (
        positions,
        budgets.per_layer_per_kv_head,
        s.cache.next_position,
    )
}

#[test]
fn evicting_presses_under_reassign_end_with_positions_zero_to_len() {
    for method in [Method::Streaming, Method::H2o, Method::TreeKv] {
        let (positions, budgets, next) = streamed(method, PositionPolicy::Reassign);
        for (l, layer) in positions.iter().enumerate() {
            for (h, pos) in layer.iter().enumerate() {
                // 41 tokens seen, `budget` held, at positions 0..budget.
                let want: Vec<usize> = (0..budgets[l][h]).collect();
                assert_eq!(pos, &want, "{method} l{l} h{h}");
            }
        }
        assert_eq!(
            next, 12,
            "{method}: the next token goes right after the cache"
        );
        // Keep: original positions; the newest entry is token 40, the next position 41.
        let (positions, _, next) = streamed(method, PositionPolicy::Keep);
        assert_eq!(next, 41, "{method}");
        for layer in &positions {
            for pos in layer {
                assert_eq!(pos.last(), Some(&40), "{method}");
                assert!(pos.len() <= 12 && pos.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}

/// The plan's decode interval (`compress_every`) is read: StreamingLLM at 4 entries per head with
/// `compress_every = 3` grows by one entry per generated token and is cut back to 4 at every
/// third token (4 → 5 → 6 → 4 → 5 → 6 → 4); with 1 it holds 4 at every step. A press that does
/// not compress while generating (SnapKV) refuses an interval other than 1, and 0 is refused.
#[test]
fn decode_compression_interval_is_honoured() {
    use super::streaming::StreamingScorer;
    let model = tiny_model();
    let ids = prompt(20);
    for (every, want) in [(3, [5, 6, 4, 5, 6, 4]), (1, [4; 6])] {
        let mut press = SelectionPress::new(
            Method::Streaming,
            Box::new(StreamingScorer::new(2)),
            Allocation::Uniform(4),
        );
        Press::<B>::set_compress_every(&mut press, every).expect("an interval");
        let mut s = Session::new(&model, &mut press);
        let mut logits = s.prefill(&ids).expect("prefill");
        assert_eq!(s.cache.layers[0].positions(0).len(), 4);
        let mut held = Vec::new();
        for _ in 0..6 {
            let host: Vec<f32> = logits.into_data().iter::<f32>().collect();
            logits = s.step(crate::generate::argmax(&host)).expect("step");
            held.push(s.cache.layers[1].positions(1).len());
        }
        assert_eq!(held, want, "compress_every {every}");
    }
    let mut snap = SelectionPress::new(
        Method::SnapKv,
        Box::new(SnapKvScorer::new(2, 3, Pooling::Maxpool)),
        Allocation::Uniform(8),
    );
    let e = Press::<B>::set_compress_every(&mut snap, 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("compress_every") && e.contains("found 2"), "{e}");
    assert!(Press::<B>::set_compress_every(&mut snap, 1).is_ok());
    let mut streaming = SelectionPress::new(
        Method::Streaming,
        Box::new(StreamingScorer::new(2)),
        Allocation::Uniform(4),
    );
    assert!(Press::<B>::set_compress_every(&mut streaming, 0).is_err());
}

#[test]
fn a_control_has_its_methods_capabilities_and_the_classes_their_own() {
    let parsed = |n: &str| -> kvplan_planner::MethodName { n.parse().expect(n) };
    assert_eq!(
        capabilities(parsed("headkv@perm1")),
        capabilities(parsed("headkv"))
    );
    assert!(capabilities(parsed("vllm:snapkv")).changes_forward);
}
