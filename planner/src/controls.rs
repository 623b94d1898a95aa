//! Controls that separate HeadKV's head scores from the shape of its allocation (the evidence
//! issue's item 3): the same method with one thing changed, named `<method>@<control>`.
//!
//! - `headkv@perm<S>` / `headkv-r@perm<S>`: the section's head scores **permuted across KV
//!   heads** with seed `S` — every (global layer, KV head) slot takes the query-head scores of
//!   another slot, whole groups moved together, so the multiset of KV-head scores (and therefore
//!   of budgets) is exactly HeadKV's and only *which head* gets which budget changes. If HeadKV's
//!   advantage comes from its scores, the permuted plans lose it; if it comes from the uneven
//!   shape alone (a few large heads, many at the floor), they keep it.
//! - `headkv@beta<X>` / `headkv-r@beta<X>`: β of eq. 4 (HeadKV §3.2; the authors' scripts use
//!   1.01, the paper sweeps 1.005–1.5 in App. F) set to `X`.
//! - `headkv@layer-uniform` / `headkv-r@layer-uniform`: each layer keeps the total HeadKV gives
//!   its heads and splits it evenly over them — the per-layer shape without the per-head one. If
//!   the method's advantage survives, it rests on how much each layer gets, not on which head.
//!
//! A name is parsed into its method and control by [`crate::MethodName`]. A control is applied
//! to a copy of the plan ([`with_control`]); budgets then come from the
//! plan's own rule, as for any method. Windowed layers (Gemma 3's local layers) take no part: they
//! hold their window under every method.

use kvplan_common::rng::Rng;

use crate::methods::headkv::HeadKvSection;
use crate::{Error, Method, Plan, Result, Section};

/// What a control changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    /// Head scores permuted across (global layer, KV head) slots with this seed.
    Permuted(u64),
    /// β of eq. 4.
    Beta(f64),
    /// Each layer's total split evenly over its heads.
    LayerUniform,
}

/// The methods a control applies to: those with per-head scores.
pub(crate) const CONTROLLED: [Method; 2] = [Method::HeadKv, Method::HeadKvR];

/// `plan` with `control` applied to `method`'s section.
pub fn with_control(plan: &Plan, method: Method, control: Control) -> Result<Plan> {
    let mut out = plan.clone();
    let section = plan
        .sections
        .get::<HeadKvSection>(method)
        .ok_or(Error::MissingSection(method))?;
    let mut changed = section.clone();
    match control {
        Control::Permuted(seed) => {
            changed.scores = permuted(&section.scores, &plan.model.geometry, seed);
        }
        Control::Beta(beta) => changed.beta = beta,
        Control::LayerUniform => changed.layer_uniform = true,
    }
    out.sections.insert(match method {
        Method::HeadKvR => Section::HeadKvR(changed),
        _ => Section::HeadKv(changed),
    });
    Ok(out)
}

/// `scores` (`[layer][q_head]`) with the query-head groups of the global layers' KV heads moved
/// to the slots of a seeded permutation (Fisher–Yates, [`Rng::shuffle`]); windowed layers as
/// they were.
pub fn permuted(scores: &[Vec<f64>], g: &crate::Geometry, seed: u64) -> Vec<Vec<f64>> {
    let slots: Vec<(usize, usize)> = g
        .global_layers()
        .into_iter()
        .flat_map(|l| (0..g.kv_heads).map(move |kv| (l, kv)))
        .collect();
    let mut order: Vec<usize> = (0..slots.len()).collect();
    Rng::derive(seed, &[0x9e37_79b9]).shuffle(&mut order);
    let mut out = scores.to_vec();
    for (to, &from) in slots.iter().zip(&order) {
        let (fl, fkv) = slots[from];
        for (qt, qf) in g.q_heads_of(to.1).zip(g.q_heads_of(fkv)) {
            out[to.0][qt] = scores[fl][qf];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Geometry;

    #[test]
    fn spread_evenly_by_hand() {
        use crate::methods::headkv::spread_evenly;
        let mut row = [10, 3, 0];
        spread_evenly(&mut row);
        assert_eq!(row, [5, 4, 4]);
        let mut one = [7];
        spread_evenly(&mut one);
        assert_eq!(one, [7]);
    }

    #[test]
    fn a_permutation_moves_whole_kv_groups_and_keeps_the_multiset() {
        // 2 layers, 4 query heads on 2 KV heads: groups (q0, q1) → kv0, (q2, q3) → kv1. Each
        // group's pair of scores must arrive intact in some slot, and every pair exactly once.
        let g = Geometry::new(2, 4, 2, 8).unwrap();
        let scores = vec![vec![0.1, 0.2, 0.3, 0.4], vec![0.5, 0.6, 0.7, 0.8]];
        let pairs = |s: &[Vec<f64>]| {
            let mut v: Vec<(u64, u64)> = s
                .iter()
                .flat_map(|r| r.chunks(2).map(|c| (c[0].to_bits(), c[1].to_bits())))
                .collect();
            v.sort_unstable();
            v
        };
        let mut moved = 0;
        for seed in 0..8 {
            let p = permuted(&scores, &g, seed);
            assert_eq!(pairs(&p), pairs(&scores), "seed {seed}");
            moved += usize::from(p != scores);
            assert_eq!(p, permuted(&scores, &g, seed), "seeded");
        }
        // 4 slots: a seeded shuffle leaves them all in place with probability 1/24 per seed.
        assert!(moved >= 6, "only {moved} of 8 seeds moved anything");
    }

    #[test]
    fn windowed_layers_keep_their_scores() {
        let g = Geometry::new(3, 2, 1, 8)
            .unwrap()
            .with_windows(vec![Some(4), None, None])
            .unwrap();
        let scores = vec![vec![9.0, 9.0], vec![0.1, 0.2], vec![0.3, 0.4]];
        for seed in 0..6 {
            let p = permuted(&scores, &g, seed);
            assert_eq!(p[0], scores[0]);
        }
    }
}
