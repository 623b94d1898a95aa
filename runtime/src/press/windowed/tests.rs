//! Sliding-window layers under every press, on the tiny model of the press tests with layer 0
//! attending over a window (layer 1 global): the windowed layer holds exactly its last `window`
//! entries whatever the press and its budget, bytes count it at its window, decoding with the
//! trimmed cache gives the logits of the untrimmed one, and re-assignment keeps its spacing.

use burn::tensor::{Tensor, TensorData};
use kvplan_planner::{Method, Pooling};

use super::super::full::FullPress;
use super::super::snapkv::SnapKvScorer;
use super::super::streaming::StreamingScorer;
use super::super::tests::{
    prompt, registry_presses_except, rope, spindle, tiny_model, tiny_plan, B, D, L, NKV, THETA,
};
use super::super::*;
use crate::cache::window_span;
use crate::generate::argmax;
use crate::model::rope::Rope;
use crate::model::Logits;
use kvplan_planner::budgets::full_kv_bytes;
use kvplan_planner::Geometry;

/// Layer 0's window in the tests.
const W: usize = 6;

/// The press tests' tiny model with `windows[l]` on layer `l` (mask and config alike).
fn windowed_model(windows: &[Option<usize>]) -> Model<B> {
    let mut m = tiny_model();
    for (block, &w) in m.transformer.blocks.iter_mut().zip(windows) {
        block.attention.window = w;
    }
    m.config.layer_windows = windows.to_vec();
    m.config.geometry.layer_windows = windows.to_vec();
    m
}

fn host(t: Tensor<B, 2>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Every method of the registry, configured from the tiny plan for a 30-token prompt with
/// budgets `alloc`, except PoD (refused on models with windows: its own attention pass has
/// none, [`crate::press::from_plan::refuse_pod_on_windows`]).
fn presses(model: &Model<B>, alloc: &Allocation) -> Vec<(&'static str, Box<dyn Press<B>>)> {
    registry_presses_except(&tiny_plan(), model, alloc, 30, &["pod"])
}

/// Whether the global layer of `press` holds its budget as K/V tensors (as the budget matrix
/// of the press tests asks): budgets that follow the target and the model's own forward pass.
fn press_keeps_kv_tensors(name: &str, press: &dyn Press<B>) -> bool {
    let method: Method = name.parse().expect("a table name");
    method.follows_target() && !press.changes_forward()
}

/// Values of layer 0's head `h` (values carry no RoPE: equal entries give equal rows).
fn values(layer: &crate::cache::LayerCache<B>, h: usize) -> Vec<f32> {
    host(layer.head(h).expect("entries").1)
}

#[test]
fn decoding_with_the_window_trimmed_gives_the_logits_of_the_whole_sequence() {
    // The model's own forward over 20 tokens in one call holds all of them (its mask alone
    // windows layer 0); FullKV decoding them one by one after a 3-token prefill holds at most W
    // in layer 0. Tolerance: the whole-sequence forward multiplies with a gemm whose kernel
    // (AVX2 or AVX-512, picked at run time) sums in another order than a decode step's dot
    // products — 1.1e-5 apart on an AVX-512 machine; a wrongly trimmed window moves the logits
    // by tenths.
    const TOL: f32 = 1e-4;
    let ids = prompt(20);
    for generic in [false, true] {
        let mut m = windowed_model(&[Some(W), None]);
        m.set_generic_attention(generic);
        let mut whole = m.new_cache();
        let all = host(
            m.forward(&ids, &mut whole, None, Logits::All)
                .expect("forward"),
        );
        assert_eq!(
            whole.layers[0].len(0),
            20,
            "the model's forward trims nothing"
        );
        let vocab = all.len() / ids.len();
        let mut full = FullPress;
        let mut s = Session::new(&m, &mut full);
        let mut got = host(s.prefill(&ids[..3]).expect("prefill"));
        for (i, &id) in ids.iter().enumerate().skip(3) {
            let want = &all[(i - 1) * vocab..i * vocab];
            assert!(
                max_diff(&got, want) < TOL,
                "generic {generic} row {}: {}",
                i - 1,
                max_diff(&got, want)
            );
            got = host(s.step(id).expect("step"));
            let n = i + 1;
            let held: Vec<usize> = (n.saturating_sub(W)..n).collect();
            assert_eq!(s.cache.layers[0].positions(0), held.as_slice());
            assert_eq!(
                s.cache.layers[1].len(0),
                n,
                "the global layer keeps everything"
            );
        }
        assert!(
            max_diff(&got, &all[19 * vocab..]) < TOL,
            "generic {generic}"
        );
        // The window matters: the same model without it gives other logits.
        let plain = windowed_model(&[None, None]);
        let global = host(
            plain
                .forward(&ids, &mut plain.new_cache(), None, Logits::Last)
                .expect("forward"),
        );
        assert!(max_diff(&global, &all[19 * vocab..]) > 1e-3);
    }
}

#[test]
fn every_press_leaves_a_windowed_layer_at_its_last_window_entries() {
    let model = windowed_model(&[Some(W), None]);
    let ids = prompt(30);
    // The budget the plan gives the windowed layer (2, 3 or 12) is ignored.
    let allocs = [
        Allocation::Uniform(12),
        Allocation::PerLayer(vec![3, 12]),
        Allocation::PerHead(vec![vec![2, 12], vec![10, 12]]),
    ];
    // FullKV's layer 0, step by step: the values every press must hold there.
    let mut full = FullPress;
    let mut s = Session::new(&model, &mut full);
    s.prefill(&ids).expect("prefill");
    let mut want = Vec::new();
    for _ in 0..=4 {
        want.push(
            (0..NKV)
                .map(|h| values(&s.cache.layers[0], h))
                .collect::<Vec<_>>(),
        );
        s.step(7).expect("step");
    }
    drop(s);
    for alloc in &allocs {
        for (name, mut press) in presses(&model, alloc) {
            let decoding = press.evicts_while_decoding();
            let mut s = Session::new(&model, press.as_mut());
            s.prefill(&ids).expect("prefill");
            for (step, want) in want.iter().enumerate() {
                let layer = &s.cache.layers[0];
                let next = s.cache.next_position;
                for (h, want) in want.iter().enumerate() {
                    let run: Vec<usize> = (next - W..next).collect();
                    assert_eq!(
                        layer.positions(h),
                        run.as_slice(),
                        "{name} {alloc:?} {step}"
                    );
                    assert_eq!(&values(layer, h), want, "{name} {alloc:?} step {step}");
                }
                if press_keeps_kv_tensors(name, &*s.press) {
                    // The global layer is compressed as before: its budget exactly.
                    for h in 0..NKV {
                        let b = alloc.budget(1, h);
                        let want = if decoding { b } else { b + step };
                        assert_eq!(s.cache.layers[1].len(h), want, "{name} {alloc:?} {step}");
                    }
                }
                s.step(7).expect("step");
            }
        }
    }
}

#[test]
fn spindle_keeps_no_codebook_for_a_windowed_layer() {
    let model = windowed_model(&[Some(W), None]);
    let alloc = Allocation::Uniform(12);
    let mut press = spindle(&alloc, 0.5);
    let mut s = Session::new(&model, &mut press);
    s.prefill(&prompt(30)).expect("prefill");
    s.step(3).expect("step");
    assert_eq!(s.cache.layers[0].len(0), W);
    assert_eq!(
        s.cache.layers[1].len(0),
        0,
        "the global layer lives in its codebook"
    );
    drop(s);
    assert_eq!(press.entries(0, 0), None);
    assert_eq!(press.entries(1, 0), Some(13));
}

#[test]
fn bytes_count_a_windowed_layer_at_its_window() {
    // Gemma 3 270M at a 2,048-token prompt: 15 layers at the 512 window, 3 global at 2,048;
    // one KV head of 256 f32 for K and V: 2·(15·512 + 3·2048)·256·4 = 28,311,552 bytes,
    // against 2·18·2048·256·4 = 75,497,472 without windows.
    let gemma: Vec<Option<usize>> = (0..18).map(|l| ((l + 1) % 6 != 0).then_some(512)).collect();
    let plain = Geometry::new(18, 4, 1, 256).expect("geometry");
    let windowed = plain.clone().with_windows(gemma).expect("windows");
    assert_eq!(full_kv_bytes(&windowed, 2048, 4), 28_311_552);
    assert_eq!(full_kv_bytes(&plain, 2048, 4), 75_497_472);
    assert_eq!(full_kv_bytes(&windowed, 100, 4), 2 * 18 * 100 * 256 * 4);
    assert_eq!((window_span(Some(4), 3), window_span(Some(4), 9)), (3, 4));
    // The tiny model, FullKV: after 30 tokens layer 0 holds 6, layer 1 30 entries per KV head:
    // 2·(6 + 30)·2 heads·8 dims·4 bytes = 4,608, held and FullKV alike; one step later 4,736.
    let model = windowed_model(&[Some(W), None]);
    let mut full = FullPress;
    let mut s = Session::new(&model, &mut full);
    s.prefill(&prompt(30)).expect("prefill");
    assert_eq!(s.cache.bytes(), 4608);
    assert_eq!((s.memory().held_bytes, s.memory().full_bytes), (4608, 4608));
    s.step(1).expect("step");
    assert_eq!((s.memory().held_bytes, s.memory().full_bytes), (4736, 4736));
    // A press: layer 1 at its budget of 12, layer 0 at its window: 2·(6 + 12)·2·8·4 = 2,304.
    let mut snap = SelectionPress::new(
        Method::SnapKv,
        Box::new(SnapKvScorer::new(4, 3, Pooling::Maxpool)),
        Allocation::Uniform(12),
    );
    let mut s = Session::new(&model, &mut snap);
    s.prefill(&prompt(30)).expect("prefill");
    assert_eq!((s.memory().held_bytes, s.memory().full_bytes), (2304, 4608));
}

/// Pre-RoPE keys of layer `l`, head `h`, of prompt tokens `at`, rotated to positions `to`.
fn rotated(obs: &Observer, l: usize, h: usize, at: &[usize], to: &[usize]) -> Vec<f32> {
    let kv = &obs.layers[l].keys_values[0];
    let tokens = kv.positions.len();
    let rows: Vec<f32> = at
        .iter()
        .flat_map(|&t| kv.keys[(h * tokens + t) * D..(h * tokens + t + 1) * D].to_vec())
        .collect();
    let shape = [1, at.len(), D];
    let pre = Tensor::<B, 3>::from_data(TensorData::new(rows, shape), &Default::default());
    let ids: Vec<i64> = to.iter().map(|&p| p as i64).collect();
    let pos = Tensor::from_data(TensorData::new(ids, [to.len()]), &Default::default());
    let rope = Rope::<B>::new(D, THETA, 64, &Default::default());
    rope.apply(l, pre, pos).into_data().iter::<f32>().collect()
}

#[test]
fn reassignment_moves_global_layers_to_zero_and_keeps_the_windows_spacing() {
    // 20 tokens; layer 0 holds positions 14..20 (window 6). Layer 1 keeps 8 entries → 0..8,
    // next 8: layer 0's run moves to 2..8, every key turned by −12. Layer 1 keeping 4 → 0..4,
    // but the run spans 6: next is raised to 6, layer 1 moves up to 2..6 and layer 0 to 0..6.
    let model = windowed_model(&[Some(W), None]);
    let config = crate::observe::ObserveConfig {
        keys_values: true,
        ..Default::default()
    };
    let cases = [
        (vec![0, 1, 2, 15, 16, 17, 18, 19], 8, 0..8),
        (vec![0, 17, 18, 19], 6, 2..6),
    ];
    for (kept, next, global) in cases {
        let mut cache = model.new_cache();
        let mut obs = Observer::new(config.clone(), L);
        model
            .forward(&prompt(20), &mut cache, Some(&mut obs), Logits::Last)
            .expect("forward");
        super::slide(&mut cache, &model.config.layer_windows);
        let before: Vec<Vec<f32>> = (0..NKV).map(|h| values(&cache.layers[0], h)).collect();
        cache.layers[1].retain(&[kept.clone(), kept.clone()]);
        reassign_all(&mut cache, &rope());
        assert_eq!(cache.next_position, next);
        let run: Vec<usize> = (next - W..next).collect();
        let global: Vec<usize> = global.collect();
        for (h, before) in before.iter().enumerate() {
            let layer = &cache.layers[0];
            assert_eq!(layer.positions(h), run.as_slice());
            assert_eq!(&values(layer, h), before, "values never move");
            let want = rotated(&obs, 0, h, &[14, 15, 16, 17, 18, 19], &run);
            let got = host(layer.head(h).expect("keys").0);
            assert!(max_diff(&got, &want) < 1e-5, "{got:?} vs {want:?}");
            let layer = &cache.layers[1];
            assert_eq!(layer.positions(h), global.as_slice());
            let want = rotated(&obs, 1, h, &kept, &global);
            let got = host(layer.head(h).expect("keys").0);
            assert!(max_diff(&got, &want) < 1e-5, "{got:?} vs {want:?}");
        }
    }
}

#[test]
fn a_windowed_stream_past_the_context_keeps_the_logits_of_one_that_never_moves() {
    // Every layer windowed: a stream past a 32-token context re-assigns positions, which may
    // only turn each layer's keys as a whole — the logits stay those of the same weights with a
    // context long enough never to re-assign.
    let short = {
        let g = crate::test_model::tiny_gguf(&crate::test_model::TinySpec::small(99, L, 32));
        let mut m = Model::<B>::from_gguf(&g, &Default::default()).expect("tiny model");
        for block in &mut m.transformer.blocks {
            block.attention.window = Some(W);
        }
        m.config.layer_windows = vec![Some(W); L];
        m
    };
    let long = windowed_model(&[Some(W); L]);
    let streaming = || {
        SelectionPress::new(
            Method::Streaming,
            Box::new(StreamingScorer::new(2)),
            Allocation::Uniform(4),
        )
    };
    let (mut a, mut b) = (streaming(), streaming());
    let mut sa = Session::new(&short, &mut a);
    let mut sb = Session::new(&long, &mut b);
    let ids = prompt(20);
    let mut la = host(sa.prefill(&ids).expect("prefill"));
    let mut lb = host(sb.prefill(&ids).expect("prefill"));
    assert!(max_diff(&la, &lb) < 1e-4, "prefill");
    for step in 0..40 {
        let id = argmax(&lb);
        la = host(sa.step(id).expect("step past the context"));
        lb = host(sb.step(id).expect("step"));
        assert!(
            max_diff(&la, &lb) < 1e-4,
            "step {step}: {}",
            max_diff(&la, &lb)
        );
        assert!(sa.cache.next_position <= 32);
        for layer in &sa.cache.layers {
            let next = sa.cache.next_position;
            assert_eq!(
                layer.positions(0),
                (next - W..next).collect::<Vec<_>>().as_slice()
            );
        }
    }
    assert!(
        sb.cache.next_position > 32,
        "the long model never re-assigned"
    );
}

#[test]
fn an_adopted_prefill_leaves_windowed_layers_alone() {
    // A prefill observed in every layer, then adopted by SnapKV under a budget of 3 for all.
    let model = windowed_model(&[Some(W), None]);
    let mut press = SelectionPress::new(
        Method::SnapKv,
        Box::new(SnapKvScorer::new(2, 3, Pooling::Maxpool)),
        Allocation::Uniform(3),
    );
    let mut cache = model.new_cache();
    let mut obs = Observer::new(observe(4, true), L);
    model
        .forward(&prompt(20), &mut cache, Some(&mut obs), Logits::Last)
        .expect("forward");
    assert!(!obs.layers[0].attention.is_empty());
    let mut s = Session::new(&model, &mut press);
    s.adopt(cache, 20, Some(&obs)).expect("adopt");
    assert_eq!(s.cache.layers[0].positions(1), &[14, 15, 16, 17, 18, 19]);
    assert_eq!(s.cache.layers[1].len(1), 3);
}

/// An engine's layer classes (`press::classes`) run as the model's own windows would: a global
/// layer under the press's window `W` gives the logits, in prefill and in every decode step, of
/// the same layer with a window `W` in its mask (FullKV), and holds the same `W` entries per head.
/// The windows change the output (full attention's logits differ), so the match is not trivial.
#[test]
fn layer_classes_run_as_native_windows() {
    use super::super::classes::LayerClassesPress;
    let plain = tiny_model();
    let ids = prompt(20);
    let mut full = FullPress;
    let unwindowed = host(
        Session::new(&plain, &mut full)
            .prefill(&ids)
            .expect("prefill"),
    );
    for windows in [[Some(W), None], [Some(W), Some(W)]] {
        let native = windowed_model(&windows);
        let mut classes = LayerClassesPress::new("vllm:snapkv", windows.to_vec());
        let mut full = FullPress;
        let mut a = Session::new(&plain, &mut classes);
        let mut b = Session::new(&native, &mut full);
        let mut la = host(a.prefill(&ids).expect("prefill"));
        let mut lb = host(b.prefill(&ids).expect("prefill"));
        assert!(max_diff(&la, &lb) < 1e-5, "{windows:?} prefill");
        assert!(
            max_diff(&la, &unwindowed) > 1e-3,
            "{windows:?}: windows change nothing"
        );
        for step in 0..8 {
            let id = argmax(&lb);
            la = host(a.step(id).expect("step"));
            lb = host(b.step(id).expect("step"));
            assert!(max_diff(&la, &lb) < 1e-5, "{windows:?} step {step}");
        }
        for (l, w) in windows.iter().enumerate() {
            let held = |s: &Session<'_, B>| s.cache.layers[l].positions(0).len();
            assert_eq!(held(&a), held(&b), "{windows:?} layer {l}");
            assert_eq!(held(&a), w.unwrap_or(28), "{windows:?} layer {l}");
        }
        assert_eq!(a.memory().held_bytes, b.memory().held_bytes);
    }
}

/// TensorRT-LLM's PyTorch backend (`trtllm:`, `press::stale`): the kernel reads every position,
/// so while no block has been detached every step is FullKV's, bit for bit; once the block
/// manager detaches (tokens ≥ W + B), the detached positions of the layer at the smallest window
/// read the other request's rows — the logits leave FullKV's, the rows there are that request's
/// own prefill rows, and the bytes held drop by the detached rows.
#[test]
fn trtllm_reads_detached_blocks_as_another_requests() {
    use super::super::stale::StaleBlocksPress;
    let plain = tiny_model();
    let ids = prompt(20);
    let full_run = |steps: usize| {
        let mut full = FullPress;
        let mut f = Session::new(&plain, &mut full);
        let mut out = vec![host(f.prefill(&ids).expect("prefill"))];
        for _ in 0..steps {
            let id = argmax(out.last().expect("logits"));
            out.push(host(f.step(id).expect("step")));
        }
        out
    };
    let reference = full_run(6);
    // W = 20, B = 8: 20 + 8 > 26 tokens, nothing detaches in 6 steps.
    let mut intact = StaleBlocksPress::new("trtllm:snapkv", &[Some(20), None], 8);
    let mut s = Session::new(&plain, &mut intact);
    let mut l = host(s.prefill(&ids).expect("prefill"));
    assert_eq!(l, reference[0]);
    for step in 1..=6 {
        l = host(s.step(argmax(&reference[step - 1])).expect("step"));
        assert_eq!(l, reference[step], "step {step}");
    }
    // W = 6, B = 4: the first step counts 21 tokens, 21 − 4r ≥ 10 while r < 3: 12 positions.
    let mut stale = StaleBlocksPress::new("trtllm:snapkv", &[Some(W), Some(9)], 4);
    let mut s = Session::new(&plain, &mut stale);
    let l0 = host(s.prefill(&ids).expect("prefill"));
    assert_eq!(l0, reference[0], "prefill is FullKV's");
    let full_bytes = s.memory().held_bytes;
    let l1 = host(s.step(argmax(&l0)).expect("step"));
    assert!(
        max_diff(&l1, &reference[1]) > 1e-4,
        "the detached rows change the step"
    );
    // Every position is still read: 21 entries a head in both layers.
    assert_eq!(s.cache.layers[0].positions(0).len(), 21);
    assert_eq!(s.cache.layers[1].positions(0).len(), 21);
    // Only layer 0 (the smallest window) detached: 12 rows a head fewer held.
    let row = D * 4 * 2;
    assert_eq!(
        s.memory().held_bytes as usize,
        full_bytes as usize + 2 * NKV * row - 12 * NKV * row
    );
    let mut other_cache = plain.new_cache();
    plain
        .forward(
            &StaleBlocksPress::other_request(&ids),
            &mut other_cache,
            None,
            Logits::Last,
        )
        .expect("forward");
    let other = other_cache.layers[0].host_copy();
    let mine = s.cache.layers[0].host_copy();
    for h in 0..NKV {
        assert_eq!(mine.keys[h][..12 * D], other.keys[h][..12 * D], "head {h}");
        assert_eq!(
            mine.values[h][..12 * D],
            other.values[h][..12 * D],
            "head {h}"
        );
        assert_ne!(mine.keys[h][12 * D..20 * D], other.keys[h][12 * D..20 * D]);
    }
}
