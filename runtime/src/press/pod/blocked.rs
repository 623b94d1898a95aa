//! PoD's attention for one layer as blocked matrix products (`docs/papers/pod.md`
//! §2.2, eq. 3–4, and §2.3's gate τ): the maths of [`super::pod_row`], a block of query rows at a
//! time, in the manner of the model's fused kernel ([`crate::model::host_attention`]).
//!
//! Per (query head `h`, block of [`ROWS`] query rows at positions `first..=last`):
//! - `S_P = Q_ℓ·K_ℓ[prox]ᵀ` over the layer's own keys that are proximal for some row of the block:
//!   the `n_s` sinks and positions `first − n_r < j ≤ last`, at most `n_s + n_r + ROWS` columns;
//! - `S_D = Q_ℓa·K_ℓa[dist]ᵀ` over the block's lowest layer's keys at `n_s ≤ j ≤ last − n_r`, with
//!   that layer's queries (the layer's own when it is the lowest): the shared distant scores;
//! - per row one pass picks each visible position's proximal or distant score (a position is one
//!   or the other), takes one softmax over the union — eq. 4's gate mixing the two softmax outputs
//!   is exactly that (App. A.1) — and writes it by position into `P`; then `O = P·V_ℓ[..=last]`.
//!
//! While decoding, a row of a layer that is not its head's lowest first evaluates
//! `g = 1 / (1 + exp(lse_D − lse_P))` from its proximal scores and the distant log-partition its
//! lowest layer saved (the scores are shared, so it is the same sum); `g ≥ τ` leaves its distant
//! part out, and the `S_D` product too when every row of the block does. Tasks run in parallel
//! (rayon, on the CPU backend); each product is single-threaded.

use std::ops::Range;

use super::{PodPress, Saved, Shape, Slot};

/// Query rows per task.
pub(super) const ROWS: usize = 64;

/// One layer's queries and the lower layers' saved state.
pub(super) struct Queries<'a> {
    /// The layer ℓ.
    pub layer: usize,
    /// `[t][q_heads][head_dim]`, rotated and scaled by `1/√d`.
    pub q: &'a [f32],
    /// Sizes and positions of the call.
    pub shape: Shape,
    /// `[layer]`: queries and distant log-partitions of lower layers that later layers share.
    pub saved: &'a [Option<Saved>],
}

/// One layer's attention.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attended {
    /// `[t][q_heads][head_dim]`.
    pub out: Vec<f32>,
    /// `[t][q_heads]`: `ln Σ exp(a^D)` where the layer is the head's lowest, else −∞.
    pub lse_d: Vec<f32>,
    /// `[t][q_heads]`: rows whose distant part the gate skipped.
    pub skipped: Vec<bool>,
}

struct Task {
    head: usize,
    start: usize,
    end: usize,
}

struct TaskOut {
    /// `[m][d]`.
    out: Vec<f32>,
    lse_d: Vec<f32>,
    skipped: Vec<bool>,
}

/// Eq. 3–4 for every new row of every query head of layer `qs.layer`.
///
/// # Shapes
/// - `qs.q`: `[t][q_heads][head_dim]` → `out` of the same layout, `lse_d`/`skipped` `[t][q_heads]`
pub(super) fn attend(press: &PodPress, qs: &Queries<'_>) -> Attended {
    let Shape {
        tokens: t,
        q_heads: nh,
        head_dim: d,
        ..
    } = qs.shape;
    let tasks: Vec<Task> = (0..nh)
        .flat_map(|head| {
            (0..t).step_by(ROWS).map(move |start| Task {
                head,
                start,
                end: (start + ROWS).min(t),
            })
        })
        .collect();
    let results = super::map_rows(tasks.len(), |i| run_task(press, qs, &tasks[i]));
    let mut a = Attended {
        out: vec![0.0; t * nh * d],
        lse_d: vec![f32::NEG_INFINITY; t * nh],
        skipped: vec![false; t * nh],
    };
    for (task, r) in tasks.iter().zip(results) {
        for i in 0..task.end - task.start {
            let at = (task.start + i) * nh + task.head;
            a.out[at * d..(at + 1) * d].copy_from_slice(&r.out[i * d..(i + 1) * d]);
            a.lse_d[at] = r.lse_d[i];
            a.skipped[at] = r.skipped[i];
        }
    }
    a
}

/// Scores of one task's rows.
struct Scores<'a> {
    /// Positions of the proximal columns, ascending: sinks first, then recent ones.
    prox_pos: Vec<usize>,
    /// How many of `prox_pos` are sinks (`< n_s`).
    prox_sinks: usize,
    /// `[m][prox_pos.len()]`.
    prox: Vec<f32>,
    /// Positions of the distant columns, ascending (the source slot's).
    dist_pos: &'a [usize],
    /// `[m][dist_pos.len()]`; empty when every row skipped its distant part.
    dist: Vec<f32>,
}

/// One task: a block of rows of one query head.
fn run_task(press: &PodPress, qs: &Queries<'_>, task: &Task) -> TaskOut {
    let s = &qs.shape;
    let (d, l, h) = (s.head_dim, qs.layer, task.head);
    let g = press.kv_of[h];
    let lo = press.lowest(l, h);
    let shared = qs.saved[lo].as_ref().filter(|_| lo != l);
    let own = &press.slots[l][g];
    let m = task.end - task.start;
    let first = s.first_position + task.start;
    let last = first + m - 1;
    let q_own = gather_rows(qs.q, task, s);
    let (prox_pos, prox_keys) = proximal_keys(press, own, first, last, d);
    let mut prox = vec![0f32; m * prox_pos.len()];
    scores(m, prox_pos.len(), d, &mut prox, &q_own, &prox_keys);
    let prox_sinks = prox_pos.partition_point(|&j| j < press.sinks);
    let mut sc = Scores {
        prox_pos,
        prox_sinks,
        prox,
        dist_pos: &[],
        dist: Vec::new(),
    };
    let skipped: Vec<bool> = (0..m)
        .map(|i| {
            shared.is_some_and(|sv| {
                s.decode
                    && gate(
                        press,
                        &sc,
                        i,
                        first + i,
                        sv.lse_d[(task.start + i) * s.q_heads + h],
                    )
            })
        })
        .collect();
    let src = if shared.is_some() {
        &press.slots[lo][g]
    } else {
        own
    };
    let range = distant_range(press, src, last);
    sc.dist_pos = &src.key_pos[range.clone()];
    if !range.is_empty() && skipped.iter().any(|&k| !k) {
        let q_d = shared.map(|sv| gather_rows(&sv.q, task, s));
        sc.dist = vec![0f32; m * range.len()];
        let keys = &src.keys[range.start * d..range.end * d];
        scores(
            m,
            range.len(),
            d,
            &mut sc.dist,
            q_d.as_deref().unwrap_or(&q_own),
            keys,
        );
    }
    let (out, lse_d) = mix(press, &sc, &own.values, first, m, d, &skipped);
    let lse_d = if lo == l {
        lse_d
    } else {
        vec![f32::NEG_INFINITY; m]
    };
    TaskOut {
        out,
        lse_d,
        skipped,
    }
}

/// `[m][d]` rows `start..end` of head `task.head` from `[t][q_heads][d]`.
fn gather_rows(q: &[f32], task: &Task, s: &Shape) -> Vec<f32> {
    let (nh, d) = (s.q_heads, s.head_dim);
    let mut out = Vec::with_capacity((task.end - task.start) * d);
    for r in task.start..task.end {
        let at = (r * nh + task.head) * d;
        out.extend_from_slice(&q[at..at + d]);
    }
    out
}

/// The own slot's keys proximal to some row at `first..=last`: positions (ascending) and
/// `[n][d]` keys — the sinks `j < n_s` up to `last`, then `first − n_r < j ≤ last`.
fn proximal_keys(
    press: &PodPress,
    own: &Slot,
    first: usize,
    last: usize,
    d: usize,
) -> (Vec<usize>, Vec<f32>) {
    let kp = &own.key_pos;
    let end = kp.partition_point(|&j| j <= last);
    let sinks = kp[..end].partition_point(|&j| j < press.sinks);
    let recent = kp[..end]
        .partition_point(|&j| j + press.recent <= first)
        .max(sinks);
    let mut pos = kp[..sinks].to_vec();
    pos.extend_from_slice(&kp[recent..end]);
    let mut keys = own.keys[..sinks * d].to_vec();
    keys.extend_from_slice(&own.keys[recent * d..end * d]);
    (pos, keys)
}

/// Indices into `src` of the keys distant for the row at `last` (`n_s ≤ j`, `j + n_r ≤ last`):
/// every earlier row's distant keys are a prefix of these.
fn distant_range(press: &PodPress, src: &Slot, last: usize) -> Range<usize> {
    let kp = &src.key_pos;
    let from = kp.partition_point(|&j| j < press.sinks);
    let to = kp.partition_point(|&j| j <= last && j + press.recent <= last);
    from..to.max(from)
}

/// Columns of row `i` (at position `p`) in the proximal scores: its sinks and its recent keys.
fn proximal_columns(press: &PodPress, sc: &Scores<'_>, p: usize) -> [Range<usize>; 2] {
    let ns = sc.prox_sinks;
    let sinks = sc.prox_pos[..ns].partition_point(|&j| j <= p);
    let tail = &sc.prox_pos[ns..];
    let from = ns + tail.partition_point(|&j| j + press.recent <= p);
    let to = ns + tail.partition_point(|&j| j <= p);
    [0..sinks, from..to.max(from)]
}

/// How many of the distant columns row position `p` sees.
fn distant_columns(press: &PodPress, sc: &Scores<'_>, p: usize) -> usize {
    sc.dist_pos
        .partition_point(|&j| j <= p && j + press.recent <= p)
}

/// The τ gate of row `i` at position `p`: `g = 1 / (1 + exp(lse_D − lse_P)) ≥ τ`.
fn gate(press: &PodPress, sc: &Scores<'_>, i: usize, p: usize, lse_d: f32) -> bool {
    let n = sc.prox_pos.len();
    let row = &sc.prox[i * n..(i + 1) * n];
    let cols = proximal_columns(press, sc, p);
    let lse_p = log_sum_exp(cols.into_iter().flatten().map(|c| row[c]));
    1.0 / (1.0 + (lse_d - lse_p).exp()) >= press.tau
}

/// `ln Σ exp(a)` (−∞ for no term).
pub(super) fn log_sum_exp(a: impl Iterator<Item = f32> + Clone) -> f32 {
    let m = a.clone().fold(f32::NEG_INFINITY, f32::max);
    if m == f32::NEG_INFINITY {
        return m;
    }
    m + a.map(|x| (x - m).exp()).sum::<f32>().ln()
}

/// The softmax of every row over its proximal and (unless skipped) distant scores, by position,
/// times the own values: returns `[m][d]` outputs and each row's `ln Σ exp(a^D)`.
fn mix(
    press: &PodPress,
    sc: &Scores<'_>,
    values: &[f32],
    first: usize,
    m: usize,
    d: usize,
    skipped: &[bool],
) -> (Vec<f32>, Vec<f32>) {
    let cols = first + m; // positions 0..=last
    let mut probs = vec![0f32; m * cols];
    let (np, nd) = (sc.prox_pos.len(), sc.dist_pos.len());
    let mut z = vec![0f32; m];
    let mut lse_d = vec![f32::NEG_INFINITY; m];
    for (i, row) in probs.chunks_exact_mut(cols).enumerate() {
        let p = first + i;
        let prox = &sc.prox[i * np..(i + 1) * np];
        let seen = if skipped[i] || sc.dist.is_empty() {
            0
        } else {
            distant_columns(press, sc, p)
        };
        let dist = if seen == 0 {
            &[][..]
        } else {
            &sc.dist[i * nd..i * nd + seen]
        };
        let cols = proximal_columns(press, sc, p);
        let (z_all, z_d, max) = exp_row(row, prox, &sc.prox_pos, &cols, dist, sc.dist_pos);
        z[i] = z_all;
        lse_d[i] = max + z_d.ln();
    }
    let mut out = vec![0f32; m * d];
    product(m, d, cols, &mut out, &probs, &values[..cols * d]);
    for (o, z) in out.chunks_exact_mut(d).zip(&z) {
        let inv = 1.0 / z;
        o.iter_mut().for_each(|x| *x *= inv);
    }
    (out, lse_d)
}

/// Writes `exp(a − max)` of one row's proximal columns `cols` and distant scores `dist` at their
/// positions in `row`; returns `(Σ, Σ distant, max)`. The sums run in the columns' order, one
/// term at a time (the records of a run do not depend on how the exponentials are computed).
fn exp_row(
    row: &mut [f32],
    prox: &[f32],
    prox_pos: &[usize],
    cols: &[Range<usize>; 2],
    dist: &[f32],
    dist_pos: &[usize],
) -> (f32, f32, f32) {
    let max = cols
        .iter()
        .map(|r| max_of(&prox[r.clone()]))
        .chain([max_of(dist)])
        .fold(f32::NEG_INFINITY, f32::max);
    let mut z_p = 0f32;
    for r in cols {
        exp_at(row, &prox[r.clone()], &prox_pos[r.clone()], max, &mut z_p);
    }
    let mut z_d = 0f32;
    exp_at(row, dist, &dist_pos[..dist.len()], max, &mut z_d);
    (z_p + z_d, z_d, max)
}

/// `row[pos[i]] = exp(a[i] − max)`, each added to `sum` in order: where the positions run
/// consecutively (a prefill's columns always do), one vectorised pass over that stretch of `row`.
fn exp_at(row: &mut [f32], a: &[f32], pos: &[usize], max: f32, sum: &mut f32) {
    let (Some(&first), Some(&last)) = (pos.first(), pos.last()) else {
        return;
    };
    if last - first + 1 == pos.len() {
        let dst = &mut row[first..=last];
        exp_shifted(dst, a, max);
        for &e in dst.iter() {
            *sum += e;
        }
        return;
    }
    for (&x, &j) in a.iter().zip(pos) {
        let e = exp_nonpositive(x - max);
        row[j] = e;
        *sum += e;
    }
}

/// The largest of `x` (−∞ for none).
fn max_of(x: &[f32]) -> f32 {
    #[cfg(feature = "flex")]
    {
        crate::model::host_attention::max_of(x)
    }
    #[cfg(not(feature = "flex"))]
    {
        x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
    }
}

/// `dst[i] = exp(src[i] − max)`: the fused kernel's vectorised pass on the CPU backend.
fn exp_shifted(dst: &mut [f32], src: &[f32], max: f32) {
    #[cfg(feature = "flex")]
    {
        crate::model::host_attention::exp_shifted_into(dst, src, max)
    }
    #[cfg(not(feature = "flex"))]
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = exp_nonpositive(x - max);
    }
}

/// `eˣ` for `x ≤ 0`: the fused kernel's vectorisable one on the CPU backend.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    #[cfg(feature = "flex")]
    {
        crate::model::host_attention::exp_nonpositive(x)
    }
    #[cfg(not(feature = "flex"))]
    {
        x.exp()
    }
}

/// `dst[m×n] = lhs[m×k] · rhs[n×k]ᵀ`, all row-major (`rhs` holds one key a row).
fn scores(m: usize, n: usize, k: usize, dst: &mut [f32], lhs: &[f32], rhs: &[f32]) {
    if m * n * k == 0 {
        return;
    }
    #[cfg(feature = "flex")]
    {
        use crate::model::gemm::{gemm_row_major, Gemm};
        gemm_row_major(Gemm { m, n, k }, dst, lhs, rhs, (k as isize, 1));
    }
    #[cfg(not(feature = "flex"))]
    for (i, out) in dst.chunks_exact_mut(n).take(m).enumerate() {
        let a = &lhs[i * k..(i + 1) * k];
        for (o, b) in out.iter_mut().zip(rhs.chunks_exact(k)) {
            *o = a.iter().zip(b).map(|(x, y)| x * y).sum();
        }
    }
}

/// `dst[m×n] = lhs[m×k] · rhs[k×n]`, all row-major.
fn product(m: usize, n: usize, k: usize, dst: &mut [f32], lhs: &[f32], rhs: &[f32]) {
    if m * n * k == 0 {
        return;
    }
    #[cfg(feature = "flex")]
    {
        use crate::model::gemm::{gemm_row_major, Gemm};
        gemm_row_major(Gemm { m, n, k }, dst, lhs, rhs, (1, n as isize));
    }
    #[cfg(not(feature = "flex"))]
    for (i, out) in dst.chunks_exact_mut(n).take(m).enumerate() {
        for (a, b) in lhs[i * k..(i + 1) * k].iter().zip(rhs.chunks_exact(n)) {
            out.iter_mut().zip(b).for_each(|(o, y)| *o += a * y);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row's exponentials by position, consecutive (the vectorised pass) or not (one by
    /// one): each `exp(a − max)` at its position, summed in order, as written out term by term.
    #[test]
    fn exponentials_land_at_their_positions_and_sum_in_order() {
        let a = [-0.5f32, 1.25, 0.0, 2.0, -3.0];
        let max = 2.0;
        let by_hand: Vec<f32> = a.iter().map(|&x| exp_nonpositive(x - max)).collect();
        let in_order = by_hand.iter().fold(0f32, |s, &e| s + e);
        for pos in [[3usize, 4, 5, 6, 7], [0, 2, 3, 6, 9]] {
            let mut row = vec![0f32; 10];
            let mut sum = 0f32;
            exp_at(&mut row, &a, &pos, max, &mut sum);
            assert_eq!(sum.to_bits(), in_order.to_bits(), "{pos:?}");
            for (i, &j) in pos.iter().enumerate() {
                assert_eq!(row[j].to_bits(), by_hand[i].to_bits(), "{pos:?}");
            }
            let untouched = (0..10).filter(|j| !pos.contains(j));
            assert!(untouched.into_iter().all(|j| row[j] == 0.0), "{row:?}");
            // exp(2 − 2) = 1 at the score that is the maximum.
            assert_eq!(row[pos[3]], 1.0);
        }
    }
}
