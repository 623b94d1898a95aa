//! The prompt's end and short prompts, on the tiny random model (`tests.rs`'s model and plan:
//! 2 layers, 2 KV heads, α = 8, `{"tokens": 12}`), each case worked by hand:
//! - `budget_semantics.prompt_end`: the observation window and the prompt's tail after it stay in
//!   every head, also when a head's budget is below that suffix (PyramidKV §4.2, HeadKV §3.2 keep
//!   the last α tokens on top of the selection);
//! - a press that evicts while generating lets a cache below its budget grow to the budget
//!   before it evicts anything (`held_at_budget`);
//! - a 1-token prompt runs under every method, and no method holds more than FullKV there.

use super::from_plan::PressRequest;
use super::registry::{build_press, build_press_with};
use super::tests::{prompt, tiny_model, tiny_plan, B};
use super::*;
use kvplan_planner::Target;

#[test]
fn top_k_keeps_every_forced_entry_even_above_k() {
    // Three entries scored ∞ and k = 2: all three stay (today's ties-to-earlier rule would drop
    // the last one, the prompt's last token), and none of the finite ones.
    let inf = f32::INFINITY;
    assert_eq!(top_k(&[0.9, inf, inf, inf, 0.5], 2), vec![1, 2, 3]);
    // Fewer forced entries than k: the rest by score, as before.
    assert_eq!(top_k(&[0.9, inf, 0.1, inf, 0.5], 4), vec![0, 1, 3, 4]);
}

/// Positions held by each (layer, KV head) of `cache`'s global layers.
fn held(cache: &KvCache<B>) -> Vec<Vec<Vec<usize>>> {
    cache
        .layers
        .iter()
        .map(|l| (0..l.kv_heads()).map(|h| l.positions(h).to_vec()).collect())
        .collect()
}

#[test]
fn a_head_below_window_plus_tail_keeps_the_whole_suffix_and_answers() {
    // 30 tokens; the window ends at the question (rows_end = 24): α = 8 rows are positions
    // 16..24, the tail 24..30 (6 tokens), so the suffix is 16..30 = 14 entries. SnapKV's budget
    // is 12 per head (< 14): each head keeps exactly the 14 suffix entries, the budget raised to
    // the suffix (the floor); HeadKV's per-head budgets keep the suffix plus their top entries.
    let model = tiny_model();
    let plan = tiny_plan();
    let ids = prompt(30);
    for name in [
        "snapkv",
        "pyramid",
        "headkv",
        "headkv-r",
        "tova",
        "knorm",
        "h2o",
        "streaming",
    ] {
        // Window methods keep the α window and the tail; the others (no window of α rows) keep
        // the tail after the window's end, 24..30, whatever their rule says.
        let windowed = matches!(name, "snapkv" | "pyramid" | "headkv" | "headkv-r");
        let suffix: Vec<usize> = (if windowed { 16 } else { 24 }..30).collect();
        let mut spec = build_press::<B>(name, Some(&plan), ids.len(), None, &model.config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let budgets = spec.budgets.clone().expect("a planned method");
        let mut s = Session::new(&model, spec.press.as_mut());
        s.rows_end = Some(24);
        let logits = s.prefill(&ids).expect("prefill");
        for (l, layer) in held(&s.cache).iter().enumerate() {
            for (h, pos) in layer.iter().enumerate() {
                let budget = budgets.per_layer_per_kv_head[l][h];
                assert!(
                    suffix.iter().all(|p| pos.contains(p)),
                    "{name} layer {l} head {h} (budget {budget}) dropped part of the suffix: {pos:?}"
                );
                assert_eq!(
                    pos.len(),
                    budget.max(suffix.len()),
                    "{name} layer {l} head {h}"
                );
            }
        }
        // It still answers: the next tokens decode from the compressed cache.
        let mut next =
            crate::generate::argmax(&logits.into_data().iter::<f32>().collect::<Vec<_>>());
        for _ in 0..3 {
            let l = s.step(next).unwrap_or_else(|e| panic!("{name}: {e}"));
            next = crate::generate::argmax(&l.into_data().iter::<f32>().collect::<Vec<_>>());
        }
    }
}

#[test]
fn a_cache_below_its_budget_grows_to_it_before_evicting() {
    // A 5-token prompt under {"tokens": 12}: the presses that evict while generating keep the
    // prompt, grow by one entry per generated token up to 12 and are held there — after 20
    // steps (25 tokens seen) every head holds exactly 12, not the prompt's 5.
    let model = tiny_model();
    let plan = tiny_plan();
    let ids = prompt(5);
    for name in ["streaming", "h2o", "tova", "treekv"] {
        let mut spec = build_press::<B>(name, Some(&plan), ids.len(), None, &model.config)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(spec.press.evicts_while_decoding(), "{name}");
        let mut s = Session::new(&model, spec.press.as_mut());
        let mut logits = s.prefill(&ids).expect("prefill");
        for step in 1..=20 {
            let row: Vec<f32> = logits.into_data().iter::<f32>().collect();
            logits = s.step(crate::generate::argmax(&row)).expect("step");
            let want = (5 + step).min(12);
            for (l, layer) in held(&s.cache).iter().enumerate() {
                for (h, pos) in layer.iter().enumerate() {
                    assert_eq!(pos.len(), want, "{name} step {step} layer {l} head {h}");
                }
            }
        }
    }
}

#[test]
fn a_ratio_target_stays_a_share_of_the_prompt_while_generating() {
    // {"ratio": 0.5} on 20 tokens: 10 per head after prefill, held at 10 while generating.
    let model = tiny_model();
    let plan = tiny_plan();
    let ids = prompt(20);
    let request = PressRequest {
        plan: Some(&plan),
        context_len: ids.len(),
        target: Some(Target::Ratio(0.5)),
        options: Default::default(),
    };
    let mut spec =
        build_press_with::<B>(Method::Streaming.into(), &request, &model.config).expect("press");
    let mut s = Session::new(&model, spec.press.as_mut());
    let logits = s.prefill(&ids).expect("prefill");
    let row: Vec<f32> = logits.into_data().iter::<f32>().collect();
    s.step(crate::generate::argmax(&row)).expect("step");
    assert!(held(&s.cache).iter().flatten().all(|p| p.len() == 10));
}

#[test]
fn a_one_token_prompt_runs_under_every_method_within_fullkv() {
    // One token: every budget is min(12, 1) = 1 and the prompt fits everywhere. PyramidKV failed
    // here ("budget 1 per head must exceed the observation window α = 8"); SpindleKV held 9.4%
    // more than FullKV on a real model (a codebook where nothing is evicted).
    let model = tiny_model();
    let plan = tiny_plan();
    let ids = prompt(1);
    for &name in PRESS_NAMES {
        let mut spec = build_press::<B>(name, Some(&plan), 1, None, &model.config)
            .unwrap_or_else(|e| panic!("{name} on one token: {e}"));
        let mut s = Session::new(&model, spec.press.as_mut());
        s.prefill(&ids).unwrap_or_else(|e| panic!("{name}: {e}"));
        let m = s.memory();
        assert!(
            m.held_bytes <= m.full_bytes,
            "{name}: holds {} bytes, FullKV {}",
            m.held_bytes,
            m.full_bytes
        );
    }
}
