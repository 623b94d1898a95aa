//! PoD training on a tiny random model built as GGUF bytes in memory: the differentiable PoD
//! attention equals the inference press token by token, FullKV layout equals the model's own
//! forward, and a few training steps lower the loss, stop, resume to the same result and leave
//! weights that load back.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;

use super::*;
use crate::generate::SplitMix64;
use crate::gguf::GgufFile;
use crate::model::rope::Rope;
use crate::model::{Logits, Model, WeightStorage};
use crate::press::pod::{PodPress, Proximal};
use crate::press::Session;
use crate::test_model::{max_abs, rows, D, NH, NKV, THETA, V};

type B = Flex;
type AB = Autodiff<Flex>;

const L: usize = 3;
const CTX: usize = 128;

fn spec() -> crate::test_model::TinySpec {
    crate::test_model::TinySpec {
        qk_scale: 0.5,
        ..crate::test_model::TinySpec::small(77, L, CTX)
    }
}

fn tiny_gguf() -> GgufFile {
    crate::test_model::tiny_gguf(&spec())
}

fn tiny<Bk: burn::tensor::backend::Backend>() -> (Model<Bk>, Rope<Bk>) {
    tiny_from(&tiny_gguf())
}

/// The tiny model as a Qwen2 file: Q/K/V biases in every layer.
fn tiny_qwen2<Bk: burn::tensor::backend::Backend>() -> (Model<Bk>, Rope<Bk>) {
    tiny_from(&crate::test_model::as_qwen2(&tiny_gguf(), &spec()))
}

fn tiny_from<Bk: burn::tensor::backend::Backend>(g: &GgufFile) -> (Model<Bk>, Rope<Bk>) {
    let device = Default::default();
    // f32 weights, as training and `load_weights` need on every backend.
    let model = Model::from_gguf_with(g, &device, WeightStorage::Dense).expect("tiny model");
    (model, Rope::new(D, THETA, CTX, &device))
}

/// Heads with different blocks: one block of all layers, two blocks, blocks of one layer.
fn blocks() -> Vec<Vec<[usize; 2]>> {
    vec![
        vec![[0, 2]],
        vec![[0, 0], [1, 2]],
        vec![[0, 1], [2, 2]],
        vec![[0, 0], [1, 1], [2, 2]],
    ]
}

fn ids(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| (rng.next_u64() % V as u64) as u32).collect()
}

/// Runs `check` on the tiny model as a Llama file and as a Qwen2 file (Q/K/V biases), naming
/// the architecture.
fn on_both_architectures(check: fn(&str, &Model<B>, &Rope<B>)) {
    for (arch, (model, rope)) in [("llama", tiny::<B>()), ("qwen2", tiny_qwen2::<B>())] {
        check(arch, &model, &rope);
    }
}

#[test]
fn full_kv_layout_equals_the_models_own_forward() {
    on_both_architectures(full_kv_layout_equals_the_forward_of);
}

fn full_kv_layout_equals_the_forward_of(arch: &str, model: &Model<B>, rope: &Rope<B>) {
    let ids = ids(24, 1);
    let mut cache = model.new_cache();
    let want = rows(
        model
            .forward(&ids, &mut cache, None, Logits::All)
            .expect("forward"),
    );
    let layout = PodLayout::full_kv(L, NH);
    let got = rows(forward(&model.transformer, rope, &layout, &ids).expect("pod forward"));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(max_abs(a, b) < 1e-4, "{arch} row {i}: {}", max_abs(a, b));
    }
}

#[test]
fn pod_forward_equals_the_inference_press_token_by_token() {
    on_both_architectures(pod_forward_equals_the_press_on);
}

fn pod_forward_equals_the_press_on(arch: &str, model: &Model<B>, rope: &Rope<B>) {
    let ids = ids(30, 2);
    let (sinks, recent) = (2, 5);
    let layout = PodLayout::new(&blocks(), L, sinks, recent).expect("layout");
    let got = rows(forward(&model.transformer, rope, &layout, &ids).expect("pod forward"));
    // τ = 2 > g: the gate never skips, so decoding computes eq. 3–4 exactly, one token a step.
    let geometry = kvplan_planner::Geometry::new(L, NH, NKV, D).expect("geometry");
    let proximal = Proximal { sinks, recent };
    let freqs = model.rope_set().clone();
    let mut press = PodPress::new(blocks(), &geometry, proximal, 2.0, freqs);
    let mut session = Session::new(model, &mut press);
    let mut want = vec![rows(session.prefill(&ids[..1]).expect("prefill")).remove(0)];
    for &id in &ids[1..] {
        want.push(rows(session.step(id).expect("step")).remove(0));
    }
    drop(session);
    assert_eq!(press.skipped, 0);
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert!(max_abs(a, b) < 1e-4, "{arch} token {i}: {}", max_abs(a, b));
    }
    // Tokens far enough back to be distant change the output: PoD is not FullKV here.
    let full =
        rows(forward(&model.transformer, rope, &PodLayout::full_kv(L, NH), &ids).expect("full"));
    assert!(max_abs(&got[29], &full[29]) > 1e-3);
    assert!(
        max_abs(&got[5], &full[5]) < 1e-4,
        "no distant token before n_s + n_r"
    );
}

#[test]
fn blocks_that_do_not_tile_the_layers_are_rejected() {
    assert!(PodLayout::new(&[vec![[0, 1]]], L, 2, 4).is_err());
    assert!(PodLayout::new(&[vec![[0, 0], [2, 2]]], L, 2, 4).is_err());
    assert!(PodLayout::new(&[vec![[0, 2]]], L, 2, 0).is_err());
    assert!(PodLayout::new(&[vec![[0, 2]]], L, 2, 4).is_ok());
}

#[test]
fn learning_rate_warms_up_then_follows_a_cosine_to_the_floor() {
    let cfg = config(10, 0);
    let lr: Vec<f64> = (0..10).map(|s| learning_rate(&cfg, s)).collect();
    assert!((lr[0] - 0.01).abs() < 1e-12 && (lr[1] - 0.02).abs() < 1e-12);
    assert!((lr[1] - cfg.lr).abs() < 1e-12);
    assert!(lr.windows(2).skip(1).all(|w| w[1] <= w[0] + 1e-12));
    // The cosine reaches lr · min_lr_ratio at the last step (progress 8/8).
    assert!((learning_rate(&cfg, 10) - cfg.lr * cfg.min_lr_ratio).abs() < 1e-12);
}

fn config(steps: usize, checkpoint_every: usize) -> TrainConfig {
    TrainConfig {
        seq_len: 16,
        steps,
        accum: 2,
        lr: 0.02,
        warmup: 2,
        min_lr_ratio: 0.1,
        weight_decay: 0.0,
        clip_norm: 1.0,
        trainable: Trainable::Attention,
        seed: 3,
        checkpoint_every,
    }
}

/// A text with structure to learn: a repeated random phrase.
fn corpus() -> Vec<u32> {
    ids(7, 9).into_iter().cycle().take(400).collect()
}

fn train_tiny(
    cfg: &TrainConfig,
    dir: Option<&std::path::Path>,
    stop_at: usize,
) -> TrainOutcome<AB> {
    let (model, rope) = tiny::<AB>();
    let layout = PodLayout::new(&blocks(), L, 2, 4).expect("layout");
    train(
        model.transformer,
        &rope,
        &layout,
        &corpus(),
        cfg,
        dir,
        &mut |r| r.step != stop_at,
    )
    .expect("train")
}

#[test]
fn training_lowers_the_loss_and_resumes_to_the_same_result() {
    let cfg = config(6, 0);
    let straight = train_tiny(&cfg, None, 0);
    let first = straight.losses[0];
    let last = *straight.losses.last().expect("losses");
    assert_eq!(straight.losses.len(), 6);
    assert!(last < first * 0.9, "loss {first} → {last}");

    let dir = std::env::temp_dir().join(format!("kvplan-train-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let stopped = train_tiny(&cfg, Some(&dir), 3);
    assert_eq!(stopped.losses.len(), 3);
    let resumed = train_tiny(&cfg, Some(&dir), 0);
    assert_eq!(resumed.resumed_from, 3);
    assert_eq!(resumed.losses.len(), 6);
    for (a, b) in resumed.losses.iter().zip(&straight.losses) {
        assert!(
            (a - b).abs() < 1e-4,
            "{:?} vs {:?}",
            resumed.losses,
            straight.losses
        );
    }

    // The checkpoint's weights load into a fresh model and give the trained model's logits.
    let state: checkpoint::TrainState = serde_json::from_str(
        &std::fs::read_to_string(dir.join(checkpoint::STATE_FILE)).expect("state"),
    )
    .expect("state json");
    assert_eq!(state.step, 6);
    let (fresh, rope) = tiny::<B>();
    let loaded = load_weights(fresh.transformer, &dir.join(&state.weights)).expect("load");
    let trained = resumed.transformer.valid();
    let layout = PodLayout::new(&blocks(), L, 2, 4).expect("layout");
    let x = ids(20, 4);
    let a = rows(forward(&loaded, &rope, &layout, &x).expect("loaded"));
    let b = rows(forward(&trained, &rope, &layout, &x).expect("trained"));
    assert!(max_abs(&a[19], &b[19]) < 1e-5);
    let _ = std::fs::remove_dir_all(&dir);
}
