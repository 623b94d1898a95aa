//! SpindleKV's GQA repeat variant (§3.3): a hand-worked layer (per-query-head choices, shared
//! codebook, bytes), then the tiny GQA model of `press::tests` (4 query heads on 2 KV heads):
//! budgets per query head, no extra codes, FullKV output at θ = 1; and the RoPE round trip.

use burn::tensor::{Tensor, TensorData};

use super::*;
use crate::cache::KvCache;
use crate::model::rope::Frequencies;
use crate::observe::{AttentionRows, LayerObservation};
use crate::press::tests::{
    allocations, assert_fullkv_output_above_the_context, prompt, scores_before_a_tail, spindle,
    tiny_model, B, D, L, NH, NKV, THETA,
};
use crate::press::Session;

/// `[heads][tokens][2]` from degrees (magnitude 1) as a `[heads, tokens, 2]` tensor, each row
/// rotated by RoPE at its token's position when `rope`.
fn at_degrees(deg: &[[f32; 4]; 2], rope: bool) -> Tensor<B, 3> {
    let mut rows: Vec<f32> = Vec::new();
    for head in deg {
        let mut h: Vec<f32> = head
            .iter()
            .flat_map(|d| [d.to_radians().cos(), d.to_radians().sin()])
            .collect();
        if rope {
            Frequencies::new(2, THETA).rotate_rows(&mut h, &[0, 1, 2, 3], 1.0);
        }
        rows.extend(h);
    }
    Tensor::from_data(TensorData::new(rows, [2, 4, 2]), &Default::default())
}

/// One layer, 2 KV heads × 2 query heads, d = 2, four tokens; the last row's attention per query
/// head (window 1). Eq. 2 scores p/(4 − a) for keys 0–2 (key 3 is the window):
/// q0 [.6 .1 .1 .2] → .15 .033 .05: keeps 0; q1 [.1 .1 .6 .2] → .025 .033 .3: keeps 2;
/// q2 = q3 [.1 .5 .2 .2] → .025 .167 .1: keep 1. The group means (eq. 3) keep 2 (KV head 0) and
/// 1 (KV head 1).
fn hand_layer() -> (KvCache<B>, Observer) {
    let mut cache = KvCache::<B>::new(1, 2, 2);
    // Pre-RoPE keys 45° apart (cos 45° = .71 < θ_K = .9): every kept key is its own code.
    let keys = at_degrees(&[[0., 45., 90., 135.], [180., 225., 270., 315.]], true);
    // Values: KV head 0's tokens 0 and 2 share a direction, and token 3 of both heads too.
    let values = at_degrees(&[[0., 90., 0., 45.], [30., 90., 60., 45.]], false);
    cache.layers[0].append(keys, values, &[0, 1, 2, 3]);
    cache.next_position = 4;
    let mut obs = Observer::new(observe(1, false), 1);
    let rows = |p: [f32; 4]| vec![p.to_vec()];
    obs.layers[0].attention.push(AttentionRows {
        query_positions: vec![3],
        probs: vec![
            rows([0.6, 0.1, 0.1, 0.2]),
            rows([0.1, 0.1, 0.6, 0.2]),
            rows([0.1, 0.5, 0.2, 0.2]),
            rows([0.1, 0.5, 0.2, 0.2]),
        ],
        key_positions: vec![vec![0, 1, 2, 3]; 2],
        kv_of: vec![0, 0, 1, 1],
    });
    (cache, obs)
}

fn hand_press() -> SpindlePress {
    let books = Codebooks {
        layers: vec![true],
        theta_k: 0.9,
        theta_v: 1.0,
    };
    // Eq. 2 as printed: the hand-worked scores above divide by l − a.
    let scorer = SpindleScorer::new(1, Denominator::Printed, GqaAggregation::PoolThenMean);
    SpindlePress::new(
        Allocation::Uniform(2),
        1,
        books,
        RopeSet::uniform(2, THETA, 1),
    )
    .with_scorer(scorer)
}

/// One KV head, one query head, six keys, window 2 (keys 4, 5); window rows
/// r4 = [.3 0 .1 .2 .4 0] and r5 = [.1 .1 .2 .1 .2 .3] sum to [.4 .1 .3 .3] over keys 0–3.
fn recency_layer() -> LayerObservation {
    LayerObservation {
        attention: vec![AttentionRows {
            query_positions: vec![4, 5],
            probs: vec![vec![
                vec![0.3, 0.0, 0.1, 0.2, 0.4, 0.0],
                vec![0.1, 0.1, 0.2, 0.1, 0.2, 0.3],
            ]],
            key_positions: vec![(0..6).collect()],
            kv_of: vec![0],
        }],
        ..Default::default()
    }
}

#[test]
fn eq2_denominators_weigh_recency_as_worked_by_hand() {
    let obs = recency_layer();
    let positions = [(0..6).collect::<Vec<usize>>()];
    let score = |d: Denominator| {
        let mut s = SpindleScorer::new(2, d, GqaAggregation::PoolThenMean);
        s.prefill_scores(LayerView::new(0, &positions, Some(&obs), &[4]))
            .remove(0)
    };
    // l − a: .4/6, .1/5, .3/4, .3/3 = .0667 .02 .075 .1 → keys 3, 2 (and the window).
    let printed = score(Denominator::Printed);
    let want = [0.4 / 6.0, 0.02, 0.075, 0.1];
    for (a, b) in printed.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{printed:?}");
    }
    assert_eq!(crate::press::top_k(&printed, 4), [2, 3, 4, 5]);
    // Window rows (2 see every key before the window): .2 .05 .15 .15 → key 0, then 2 (tie
    // with 3, the earlier kept).
    let rows = score(Denominator::WindowRows);
    let want = [0.2, 0.05, 0.15, 0.15];
    for (a, b) in rows.iter().zip(want) {
        assert!((a - b).abs() < 1e-6, "{rows:?}");
    }
    assert_eq!(crate::press::top_k(&rows, 4), [0, 2, 4, 5]);
    assert!(printed[4..]
        .iter()
        .chain(&rows[4..])
        .all(|s| s.is_infinite()));
    // Names as the command line gives them.
    assert_eq!("l-a".parse::<Denominator>(), Ok(Denominator::Printed));
    assert_eq!("group".parse::<SpindleGqa>(), Ok(SpindleGqa::Group));
    assert!("mean".parse::<SpindleGqa>().is_err());
}

#[test]
fn repeat_evicts_per_query_head_and_shares_one_codebook_per_layer() {
    let (mut cache, obs) = hand_layer();
    let mut press = hand_press().with_repeat(2);
    Press::<B>::after_prefill(&mut press, &mut cache, Some(&obs)).expect("press");
    let kept: Vec<&[usize]> = (0..4)
        .map(|q| press.positions(0, q).expect("codebook"))
        .collect();
    // Query heads 0 and 1 share KV head 0 yet keep different tokens.
    assert_eq!(kept, vec![&[0, 3][..], &[2, 3], &[1, 3], &[1, 3]]);
    // Keys: the union of kept (KV head, token) pairs, {0, 2, 3} and {1, 3}: 5 codes — the
    // copies of KV head 1's tokens held by query heads 2 and 3 are identical and share codes.
    // Values at θ_V = 1: directions 0° (tokens 0 and 2 of head 0), 45° (token 3 of both heads),
    // 90° (token 1 of head 1): 3 codes.
    for q in 0..4 {
        assert_eq!(press.codes(0, q), Some((5, 3)));
    }
    // (5 + 3) codes × 2 dims × 4 bytes + 4 heads × 2 tokens × (K, V) × (reference + magnitude).
    assert_eq!(press.held_bytes(&cache), 64 + 4 * 2 * 2 * 8);
    assert_eq!(cache.layers[0].kv_heads(), 4, "the layer stays unfolded");
    assert_eq!(cache.bytes(), 0, "the codebook layer holds no tensor");

    // Without the repeat: group means, one codebook per KV head, two entries each.
    let (mut cache, obs) = hand_layer();
    let mut press = hand_press();
    Press::<B>::after_prefill(&mut press, &mut cache, Some(&obs)).expect("press");
    assert_eq!(press.positions(0, 0), Some(&[2, 3][..]));
    assert_eq!(press.positions(0, 1), Some(&[1, 3][..]));
    assert_eq!(
        (press.codes(0, 0), press.codes(0, 1)),
        (Some((2, 2)), Some((2, 2)))
    );
    assert_eq!(press.held_bytes(&cache), 8 * 2 * 4 + 2 * 2 * 2 * 8);
}

#[test]
fn repeat_keeps_the_budget_per_query_head_and_merges_new_copies_into_one_code() {
    let model = tiny_model();
    let ids = prompt(30);
    let h_n = NH / NKV;
    let mut apart = false;
    for alloc in allocations(12) {
        let mut press = spindle(&alloc, 0.5).with_repeat(h_n);
        let mut cache = model.new_cache();
        let mut obs = Observer::new(observe(4, false), L);
        Press::<B>::forward(&mut press, &model, &ids, &mut cache, Some(&mut obs)).expect("prefill");
        Press::<B>::after_prefill(&mut press, &mut cache, Some(&obs)).expect("press");
        let before: Vec<(usize, usize)> =
            (0..L).map(|l| press.codes(l, 0).expect("codes")).collect();
        for l in 0..L {
            for q in 0..NH {
                let pos = press.positions(l, q).expect("positions");
                assert_eq!(pos.len(), alloc.budget(l, q / h_n), "{alloc:?} l{l} q{q}");
                assert!(pos.ends_with(&[26, 27, 28, 29]), "window kept");
            }
            for g in 0..NKV {
                apart |= press.positions(l, g * h_n) != press.positions(l, g * h_n + 1);
            }
        }
        // One decode step: each query head gets one entry; the h_n copies of a KV head's new
        // entry are identical and reference one code, so at most one code per KV head is added.
        Press::<B>::forward(&mut press, &model, &[3], &mut cache, None).expect("step");
        let held = Press::<B>::held_bytes(&press, &cache);
        let mut bytes = 0;
        for (l, &(ck0, cv0)) in before.iter().enumerate() {
            let (ck, cv) = press.codes(l, 0).expect("codes");
            assert!(ck <= ck0 + NKV && cv <= cv0 + NKV, "{alloc:?} l{l}");
            let book = &press.books[l].as_ref().expect("book")[0];
            for g in 0..NKV {
                let last = |q: usize| *book.heads[q].keys.refs.last().expect("entry");
                assert_eq!(last(g * h_n), last(g * h_n + 1));
            }
            bytes += (ck + cv) * D * 4;
            for q in 0..NH {
                assert_eq!(press.entries(l, q), Some(alloc.budget(l, q / h_n) + 1));
                bytes += (alloc.budget(l, q / h_n) + 1) * 16;
            }
        }
        assert_eq!(
            held, bytes,
            "codes plus a reference and a magnitude per (head, token)"
        );
    }
    assert!(
        apart,
        "query heads of one group keep different positions somewhere"
    );
}

#[test]
fn repeat_adds_no_codes_when_theta_one_merges_only_identical_vectors() {
    // Budget above the context: both variants keep every token. The repeat holds h_n times the
    // entries but, its copies being identical, exactly the codes of the per-KV-head books.
    let model = tiny_model();
    let ids = prompt(20);
    let alloc = Allocation::Uniform(40);
    let mut plain = spindle(&alloc, 1.0);
    let mut repeat = spindle(&alloc, 1.0).with_repeat(NH / NKV);
    let mut held = Vec::new();
    for press in [&mut plain, &mut repeat] {
        let mut s = Session::new(&model, press);
        s.prefill(&ids).expect("prefill");
        for t in [3, 9, 4] {
            s.step(t).expect("step");
        }
        held.push(s.memory().held_bytes as usize);
    }
    let mut entries = 0;
    for l in 0..L {
        let (mut ck, mut cv) = (0, 0);
        for h in 0..NKV {
            let (k, v) = plain.codes(l, h).expect("codes");
            ck += k;
            cv += v;
            entries += plain.entries(l, h).expect("entries");
        }
        assert_eq!(repeat.codes(l, 0), Some((ck, cv)), "layer {l}");
        assert_eq!(repeat.entries(l, NH - 1), Some(23));
    }
    // The repeat's only cost: (h_n − 1) more references and magnitudes per entry, K and V.
    assert_eq!(held[1] - held[0], (NH / NKV - 1) * entries * 16);
}

#[test]
fn repeat_with_budget_above_the_context_and_theta_one_gives_fullkv_output() {
    assert_fullkv_output_above_the_context(&tiny_model(), 1e-4, |alloc, _| {
        vec![(
            "spindle repeat",
            Box::new(spindle(alloc, 1.0).with_repeat(NH / NKV)),
        )]
    });
}

#[test]
fn a_question_end_window_keeps_the_tail_and_scores_keys_before_it_over_l_minus_a() {
    // 5 entries, window 1 = the row at position 2, tail 3, 4. Eq. 2 with l = 5: key 0
    // .5/5 = .1, key 1 .2/4 = .05; the window (2) and the tail are kept.
    let mut s = SpindleScorer::new(1, Denominator::Printed, GqaAggregation::PoolThenMean);
    let scores = scores_before_a_tail(&mut s, [0.5, 0.2, 0.3, 0.0, 0.0]);
    assert!((scores[0][0] - 0.1).abs() < 1e-6 && (scores[0][1] - 0.05).abs() < 1e-6);
    assert!(
        scores[0][2..].iter().all(|x| x.is_infinite()),
        "{:?}",
        scores[0]
    );
}
