//! The HeadKV controls through the registry (`kvplan_planner::controls`), on the tiny model's
//! plan: a permuted plan holds HeadKV's budgets in other heads, a β control changes the shape.

use super::registry::build_press;
use super::tests::{tiny_model, tiny_plan, B};

fn budgets(name: &str, n: usize) -> Vec<Vec<usize>> {
    let model = tiny_model();
    let plan = tiny_plan();
    let spec = build_press::<B>(name, Some(&plan), n, None, &model.config)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    spec.budgets.expect("planned").per_layer_per_kv_head
}

fn sorted(grid: &[Vec<usize>]) -> Vec<usize> {
    let mut v: Vec<usize> = grid.iter().flatten().copied().collect();
    v.sort_unstable();
    v
}

#[test]
fn permuted_scores_keep_headkvs_budgets_in_other_heads() {
    let base = budgets("headkv", 64);
    let mut moved = 0;
    for seed in 1..=6 {
        let p = budgets(&format!("headkv@perm{seed}"), 64);
        assert_eq!(
            sorted(&p),
            sorted(&base),
            "seed {seed}: the multiset of budgets"
        );
        moved += usize::from(p != base);
    }
    assert!(moved > 0, "no permutation moved a budget: {base:?}");
}

#[test]
fn a_beta_control_reshapes_headkv_and_keeps_the_total() {
    // β = 1.01 leaves ~1% of each head's selection as its own floor, the rest pooled by score;
    // β = 100 leaves ~99%: budgets close to uniform, same total.
    let base = budgets("headkv", 64);
    let flat = budgets("headkv@beta100", 64);
    let total = |g: &[Vec<usize>]| g.iter().flatten().sum::<usize>();
    assert_eq!(total(&flat), total(&base));
    let spread = |g: &[Vec<usize>]| {
        let v = sorted(g);
        v[v.len() - 1] - v[0]
    };
    assert!(spread(&flat) <= spread(&base), "{flat:?} vs {base:?}");
    assert!(spread(&flat) <= 1, "{flat:?}");
}

#[test]
fn a_malformed_control_is_one_error_naming_it() {
    let model = tiny_model();
    let plan = tiny_plan();
    for bad in ["headkv@perm", "snapkv@perm1", "headkv@beta0.5"] {
        let e = build_press::<B>(bad, Some(&plan), 64, None, &model.config)
            .err()
            .unwrap_or_else(|| panic!("{bad} was accepted"));
        assert!(e.to_string().contains(bad), "{bad}: {e}");
    }
}
