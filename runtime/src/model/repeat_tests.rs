//! A layer cache unfolded to one head per query head (each KV head repeated `h_n` times, as
//! SpindleKV's repeat variant holds it) attends exactly as the folded cache: the same logits on
//! both attention paths, from an empty cache, after unfolding a filled one, and in per-head
//! storage.

use burn::backend::Flex;
use burn::tensor::Tensor;

use super::*;
use crate::cache::{KvStore, LayerCache};
use crate::observe::{ObserveConfig, Observer};
use crate::test_model::{D, NH, NKV};

type B = Flex;

fn model() -> Model<B> {
    let g = crate::test_model::tiny_gguf(&crate::test_model::TinySpec {
        random_norms: true,
        ..crate::test_model::TinySpec::small(31, 2, 64)
    });
    Model::from_gguf(&g, &Default::default()).expect("tiny model")
}

fn flat(t: Tensor<B, 2>) -> Vec<f32> {
    t.into_data().iter::<f32>().collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len());
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    assert!(diff <= 1e-5, "{what}: {diff}");
}

fn observer() -> Observer {
    let config = ObserveConfig {
        attn_rows: 2,
        ..Default::default()
    };
    Observer::new(config, 2)
}

#[test]
fn unfolded_layer_cache_gives_the_folded_logits_on_both_paths() {
    let ids: Vec<u32> = vec![3, 17, 8, 41, 8, 22, 5, 30, 12, 9];
    for generic in [false, true] {
        let mut model = model();
        model.set_generic_attention(generic);
        let path = if generic { "generic" } else { "host" };
        let mut folded = model.new_cache();
        // Layer 1 unfolded from the start: the prompt's K/V are repeated on append.
        let mut unfolded = model.new_cache();
        unfolded.layers[1] = LayerCache::new(NH, D);
        let (mut obs_f, mut obs_u) = (observer(), observer());
        let a = model.forward(&ids, &mut folded, Some(&mut obs_f), Logits::All);
        let b = model.forward(&ids, &mut unfolded, Some(&mut obs_u), Logits::All);
        assert_close(&flat(a.expect("folded")), &flat(b.expect("unfolded")), path);
        assert_eq!(unfolded.layers[1].kv_heads(), NH);
        assert_eq!(unfolded.layers[1].bytes(), 2 * folded.layers[1].bytes());
        // Each query head's attention is the same; its keys are its own copy's.
        let (rf, ru) = (&obs_f.layers[1].attention[0], &obs_u.layers[1].attention[0]);
        for (pf, pu) in rf.probs.iter().zip(&ru.probs) {
            assert_close(&pf.concat(), &pu.concat(), "observed rows");
        }
        assert_eq!(ru.key_positions.len(), NH);
        // Layer 0 unfolded after the prompt, then decode steps.
        unfolded.layers[0].repeat_heads(NH / NKV);
        for t in [4u32, 11, 29] {
            let a = model.forward(&[t], &mut folded, None, Logits::Last);
            let b = model.forward(&[t], &mut unfolded, None, Logits::Last);
            assert_close(&flat(a.expect("folded")), &flat(b.expect("unfolded")), path);
        }
        // Per-head storage: KV heads keep different entries; the unfolded copies keep the same.
        let keep = [vec![0, 2, 5, 7, 9, 12], vec![1, 2, 3, 11, 12]];
        let mut folded_ph = folded.clone();
        let mut unfolded_ph = folded.clone();
        for l in 0..2 {
            folded_ph.layers[l].retain(&keep);
            unfolded_ph.layers[l].retain(&keep);
            unfolded_ph.layers[l].repeat_heads(NH / NKV);
            assert!(matches!(
                unfolded_ph.layers[l].store(),
                Some(KvStore::PerHead { keys, .. }) if keys.len() == NH
            ));
            assert_eq!(unfolded_ph.layers[l].positions(3), &[1, 2, 3, 11, 12]);
        }
        for t in [7u32, 2] {
            let a = model.forward(&[t], &mut folded_ph, None, Logits::Last);
            let b = model.forward(&[t], &mut unfolded_ph, None, Logits::Last);
            assert_close(&flat(a.expect("folded")), &flat(b.expect("unfolded")), path);
        }
    }
}
