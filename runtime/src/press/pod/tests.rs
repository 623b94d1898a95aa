//! Eq. 3–4 worked by hand, and the blocked kernel against the row-by-row attention the press ran
//! before it (kept here as the reference), on random inputs.

use std::cell::Cell;

use super::blocked::{self, log_sum_exp};
use super::*;

#[test]
fn gate_mixes_proximal_and_distant_outputs_by_their_partition_functions() {
    // a^P = [0, ln 3] → Σexp = 4; a^D = [ln 4] → Σexp = 4; g = 4/8 = 0.5.
    // o^P = (1·[1,0] + 3·[0,1])/4 = [.25, .75]; o^D = [2, 2];
    // o = .5·[.25, .75] + .5·[2, 2] = [1.125, 1.375].
    let (v1, v2, v3) = ([1.0, 0.0], [0.0, 1.0], [2.0, 2.0]);
    let (o, g) = pod_row(&[0.0, 3f32.ln()], &[&v1, &v2], &[4f32.ln()], &[&v3], 2);
    assert!((g - 0.5).abs() < 1e-6);
    assert!(
        (o[0] - 1.125).abs() < 1e-6 && (o[1] - 1.375).abs() < 1e-6,
        "{o:?}"
    );
    // No distant tokens: g = 1 and the proximal softmax alone.
    let (o, g) = pod_row(&[0.0, 3f32.ln()], &[&v1, &v2], &[], &[], 2);
    assert!((g - 1.0).abs() < 1e-6 && (o[1] - 0.75).abs() < 1e-6);
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The reference: eq. 3–4 one query row at a time with dot products ([`pod_row`]), as the
/// press computed it before the blocked kernel.
fn reference(press: &PodPress, qs: &Queries<'_>) -> Attended {
    let (t, nh) = (qs.shape.tokens, qs.shape.q_heads);
    let mut a = Attended {
        out: Vec::new(),
        lse_d: Vec::new(),
        skipped: Vec::new(),
    };
    for at in 0..t * nh {
        let (out, lse_d, skipped) = reference_row(press, qs, at / nh, at % nh);
        a.out.extend(out);
        a.lse_d.push(lse_d.unwrap_or(f32::NEG_INFINITY));
        a.skipped.push(skipped);
    }
    a
}

/// Row `r` of query head `h`: output, distant log-partition (lowest layers), skipped by τ.
fn reference_row(
    press: &PodPress,
    qs: &Queries<'_>,
    r: usize,
    h: usize,
) -> (Vec<f32>, Option<f32>, bool) {
    let (s, l) = (&qs.shape, qs.layer);
    let (d, nh) = (s.head_dim, s.q_heads);
    let qh = &qs.q[(r * nh + h) * d..(r * nh + h + 1) * d];
    let g = press.kv_of[h];
    let lo = press.lowest(l, h);
    let p = s.first_position + r;
    let own = &press.slots[l][g];
    let value = |pos: usize| &own.values[pos * d..(pos + 1) * d];
    let (mut a_p, mut v_p) = (Vec::new(), Vec::new());
    for (i, &kp) in own.key_pos.iter().enumerate() {
        if kp <= p && press.proximal(kp, p) {
            a_p.push(dot(qh, &own.keys[i * d..(i + 1) * d]));
            v_p.push(value(kp));
        }
    }
    let shared = qs.saved[lo].as_ref().filter(|_| lo != l);
    let (q_d, src) = match shared {
        Some(sv) => (
            &sv.q[(r * nh + h) * d..(r * nh + h + 1) * d],
            &press.slots[lo][g],
        ),
        None => (qh, own),
    };
    let skipped = s.decode
        && shared.is_some_and(|sv| {
            let lse_p = log_sum_exp(a_p.iter().copied());
            1.0 / (1.0 + (sv.lse_d[r * nh + h] - lse_p).exp()) >= press.tau
        });
    let (mut a_d, mut v_d) = (Vec::new(), Vec::new());
    if !skipped {
        for (i, &kp) in src.key_pos.iter().enumerate() {
            if kp <= p && !press.proximal(kp, p) {
                a_d.push(dot(q_d, &src.keys[i * d..(i + 1) * d]));
                v_d.push(value(kp));
            }
        }
    }
    let lse_d = (lo == l).then(|| log_sum_exp(a_d.iter().copied()));
    (pod_row(&a_p, &v_p, &a_d, &v_d, d).0, lse_d, skipped)
}

const L: usize = 3;
const NH: usize = 4;
const NKV: usize = 2;
const D: usize = 8;

/// Heads 0–1 share one block over all layers, head 2 has `[0] [1, 2]`, head 3 `[0, 1] [2]`: with
/// heads 2–3 on KV head 1, layers 1–2 keep only proximal keys for KV head 0.
fn press(sinks: usize, recent: usize, tau: f64) -> PodPress {
    let blocks = vec![
        vec![[0, 2]],
        vec![[0, 2]],
        vec![[0, 0], [1, 2]],
        vec![[0, 1], [2, 2]],
    ];
    let geometry = Geometry::new(L, NH, NKV, D).expect("geometry");
    let proximal = Proximal { sinks, recent };
    let rope = RopeSet::uniform(D, 10_000.0, L);
    let mut press = PodPress::new(blocks, &geometry, proximal, tau, rope);
    press.slots = vec![vec![Slot::default(); NKV]; L];
    press
}

/// Uniform values in `[−2, 2)` from a 64-bit LCG.
fn random(n: usize, state: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((*state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

/// Runs calls of `lens` new tokens (a prefill, then decode calls) through every layer, checking
/// the blocked kernel against the reference at each; returns (rows skipped, rows gated and kept).
fn blocked_matches_reference(press: &mut PodPress, lens: &[usize]) -> (usize, usize) {
    let mut state = 7u64;
    let (skipped, kept) = (Cell::new(0), Cell::new(0));
    for (call, &t) in lens.iter().enumerate() {
        let shape = Shape {
            tokens: t,
            first_position: press.len,
            q_heads: NH,
            kv_heads: NKV,
            head_dim: D,
            query_scale: 1.0 / (D as f32).sqrt(),
            decode: call > 0,
        };
        let mut saved: Vec<Option<Saved>> = (0..L).map(|_| None).collect();
        for l in 0..L {
            let qkv = random(t * (NH + 2 * NKV) * D, &mut state);
            press.layer_with(l, &qkv, shape, &mut saved, |p, qs| {
                let (want, got) = (reference(p, qs), blocked::attend(p, qs));
                assert_eq!(got.skipped, want.skipped, "call {call}, layer {l}");
                for (i, (a, b)) in got.out.iter().zip(&want.out).enumerate() {
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "call {call}, layer {l}, [{i}]: {a} vs {b}"
                    );
                }
                for (a, b) in got.lse_d.iter().zip(&want.lse_d) {
                    let same = a == b || (a - b).abs() <= 1e-5 * b.abs().max(1.0);
                    assert!(same, "call {call}, layer {l}: lse_D {a} vs {b}");
                }
                let gated = (0..NH).filter(|&h| p.lowest(l, h) != l).count() * t;
                let n = got.skipped.iter().filter(|&&s| s).count();
                skipped.set(skipped.get() + n);
                kept.set(kept.get() + if call > 0 { gated - n } else { 0 });
                got
            });
        }
        press.len += t;
    }
    (skipped.get(), kept.get())
}

#[test]
fn blocked_attention_equals_the_row_by_row_reference() {
    // 150-token prefill: three row blocks, the second and third past the proximal window; then
    // single-token steps and a 3-token continuation, over pruned and full key slots.
    let lens = [150, 1, 1, 3, 1, 2];
    let mut p = press(2, 5, 0.03);
    let (skipped, kept) = blocked_matches_reference(&mut p, &lens);
    assert!(
        skipped > 0 && kept > 0,
        "τ both skips and keeps: {skipped}, {kept}"
    );
    assert_eq!(p.skipped, skipped);
    // No sinks, only the query itself recent; τ = 1 never skips while distant keys exist.
    let mut p = press(0, 1, 1.0);
    assert_eq!(blocked_matches_reference(&mut p, &lens).0, 0);
    // No recent window: the query itself is distant; τ = 0 skips every gated row.
    let mut p = press(3, 0, 0.0);
    let (skipped, kept) = blocked_matches_reference(&mut p, &lens);
    assert!(skipped > 0 && kept == 0);
    // A proximal window wider than the context: nothing is distant.
    let mut p = press(4, 400, 0.5);
    blocked_matches_reference(&mut p, &lens);
}
