//! The Markdown tables of a run.
//!
//! A score table (NIAH's and RULER's, [`score_markdown`]) has one row per (method, budget),
//! sorted by the KV bytes it measured (most first: FullKV on top, then PoD, which shares keys
//! but holds most of the cache, …) — each prompt's peak over the generation where the records
//! carry it — never by its nominal budget:
//! `| method @ budget | KV % | <overall> [95% CI] | Δ vs snapkv [95% CI] | Δ vs full [95% CI] | n | clusters |`.
//! Scores and differences are in percent (points); the intervals and paired differences are
//! [`crate::stats`]'s (Wilson 1927 for pass rates of independent prompts, the cluster bootstrap
//! otherwise). Every Δ carries its p-value and Holm's adjustment within its row's family
//! ([`Family`], [`crate::stats::holm`]): the main comparison (each method against SnapKV and
//! FullKV) apart from each diagnostic (engine reductions, β sweeps, permutation and placement
//! controls, kvpress's versions of kvplan's methods), so diagnostics do not dilute the main
//! question; a Δ that cannot be told from 0 carries the smallest
//! difference the sample could have detected ([`crate::stats::detectable`]).
//! With several columns (context lengths, RULER tasks) a second table gives each column's score
//! with its interval; a legend closes the file. The rows and what they say are
//! [`crate::aggregate`]'s ([`rows`]); this module only writes them out.

use kvplan_planner::controls::Control;
use kvplan_planner::MethodName;

use crate::aggregate::{rows, Overall, RecordRow, Scope};
use crate::records::Record;
use crate::row_method::RowMethod;
use crate::stats::{holm, Estimate, Paired, RESAMPLES};

/// `rows` by measured KV fraction, most bytes first; ties keep the order first met.
pub fn by_kv<'r, 'a>(rows: &'r [RecordRow<'a>]) -> Vec<&'r RecordRow<'a>> {
    let mut out: Vec<&RecordRow<'a>> = rows.iter().collect();
    out.sort_by(|a, b| b.kv_fraction().total_cmp(&a.kv_fraction()));
    out
}

/// `x` (in [0, 1] or a difference of such) in percent with one decimal, never `-0.0`.
pub(crate) fn pct(x: f64) -> String {
    let r = (1000.0 * x).round() / 10.0 + 0.0;
    format!("{r:.1}")
}

/// `70.0 [39.7, 89.2]`, or `–` without records; `70.0 [–]` where there is no interval (a
/// task of one example, prompts of one needle: [`crate::stats::resamplable`]).
pub(crate) fn cell(e: Option<Estimate>) -> String {
    match e {
        Some(e) => format!("{} {}", pct(e.mean), interval_text(e.interval)),
        None => "–".to_string(),
    }
}

/// `[39.7, 89.2]`, or `[–]` without an interval.
fn interval_text(i: Option<crate::stats::Interval>) -> String {
    match i {
        Some(i) => format!("[{}, {}]", pct(i.lo), pct(i.hi)),
        None => "[–]".to_string(),
    }
}

/// `-30.0 [-60.0, 0.0] p 0.031 Holm 0.620 ≈ mdd 25.3 (n 8)`: the mean difference with its
/// interval, its p-value and Holm-adjusted p-value (`holm`), `≈` where the two cannot be told
/// apart ([`cannot_tell_apart`]) followed by the smallest detectable difference (or `(no pair
/// differs)` where there is none to give because every pair scored alike), and the pairs when
/// fewer than the row's `n` prompts; `–` without a reference.
pub(crate) fn delta(p: Option<Paired>, holm: Option<f64>, n: usize) -> String {
    let Some(p) = p else {
        return "–".to_string();
    };
    let sign = if (1000.0 * p.mean).round() > 0.0 {
        "+"
    } else {
        ""
    };
    let mut s = format!("{sign}{} {}", pct(p.mean), interval_text(p.interval));
    if let Some(v) = p.p_value {
        s.push_str(&format!(" p{}", p_text(v)));
    }
    if let Some(v) = holm {
        s.push_str(&format!(" Holm{}", p_text(v)));
    }
    if cannot_tell_apart(&p, holm) {
        s.push_str(" ≈");
        // A difference of more than 100 points cannot exist: nothing was detectable.
        match p.detectable {
            Some(d) if d > 1.0 => s.push_str(" mdd >100"),
            Some(d) => s.push_str(&format!(" mdd {}", pct(d))),
            // No pair differs and the scores are not 0/1: nothing to size a detectable
            // difference by, and the reader should know the rows are alike, not merely close.
            None if p.differing == 0 => s.push_str(" (no pair differs)"),
            None => {}
        }
    }
    if p.n != n {
        s.push_str(&format!(" (n {})", p.n));
    }
    s
}

/// ` 0.031` or `<0.001`.
fn p_text(v: f64) -> String {
    if v < 0.001 {
        "<0.001".to_string()
    } else {
        format!(" {v:.3}")
    }
}

/// Whether a paired difference cannot be told from 0: it has no interval, its interval includes
/// 0, or its test (Holm-adjusted when `holm` is given) does not reject at 5% — with few pairs the
/// percentile interval can exclude 0 where the test does not.
pub fn cannot_tell_apart(p: &Paired, holm: Option<f64>) -> bool {
    p.interval.is_none_or(|i| i.contains(0.0)) || holm.or(p.p_value).is_some_and(|v| v >= 0.05)
}

/// The question a row's differences answer, within which Holm adjusts them (module header).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// A method against SnapKV and FullKV (kvpress's own presses too).
    Main,
    /// An engine's layer classes (`vllm:m`, `trtllm:m`, `trtllm-engine:m`).
    Engine,
    /// HeadKV's β sweep (`headkv@beta1.2`).
    Beta,
    /// Scores permuted across heads (`headkv@perm3`).
    Permutation,
    /// Other placement controls (`m@…`).
    Placement,
    /// kvpress's version of a kvplan method (`kvpress-snapkv`).
    KvpressCheck,
}

impl Family {
    /// The family of `method`'s row.
    pub fn of(method: &str) -> Family {
        match RowMethod::of(method) {
            RowMethod::Kvplan(MethodName::Classes(..)) => Family::Engine,
            RowMethod::Kvplan(MethodName::Control(_, Control::Beta(_))) => Family::Beta,
            RowMethod::Kvplan(MethodName::Control(_, Control::Permuted(_))) => Family::Permutation,
            RowMethod::Kvplan(MethodName::Control(..)) => Family::Placement,
            row @ RowMethod::Kvpress(_) if row.method().is_some() => Family::KvpressCheck,
            _ => Family::Main,
        }
    }

    /// The family's name in a legend.
    pub fn name(self) -> &'static str {
        match self {
            Family::Main => "the main comparison",
            Family::Engine => "engine reductions",
            Family::Beta => "the β sweep",
            Family::Permutation => "permutation controls",
            Family::Placement => "placement controls",
            Family::KvpressCheck => "kvpress's versions of kvplan's methods",
        }
    }
}

/// Holm within each family: `deltas[i]` of family `families[i]`.
fn holm_by_family(deltas: &[Option<Paired>], families: &[Family]) -> Vec<Option<f64>> {
    let mut out = vec![None; deltas.len()];
    let mut seen: Vec<Family> = families.to_vec();
    seen.sort_unstable();
    seen.dedup();
    for f in seen {
        let idx: Vec<usize> = (0..deltas.len()).filter(|&i| families[i] == f).collect();
        let subset: Vec<Option<Paired>> = idx.iter().map(|&i| deltas[i]).collect();
        for (&i, h) in idx.iter().zip(holm_of(&subset)) {
            out[i] = h;
        }
    }
    out
}

/// Holm's adjustment of the p-values among `deltas` (one family), `None` where there is none.
fn holm_of(deltas: &[Option<Paired>]) -> Vec<Option<f64>> {
    let present: Vec<f64> = deltas.iter().flatten().filter_map(|p| p.p_value).collect();
    let mut adjusted = holm(&present).into_iter();
    deltas
        .iter()
        .map(|d| d.and_then(|p| p.p_value).and_then(|_| adjusted.next()))
        .collect()
}

/// The header and alignment lines of a table with these column titles.
pub(crate) fn header(titles: &[&str]) -> String {
    let mut out = String::from("|");
    for t in titles {
        out.push_str(&format!(" {t} |"));
    }
    out.push_str("\n|---|");
    out.push_str(&"---:|".repeat(titles.len() - 1));
    out.push('\n');
    out
}

/// Each row's two Δ cells (its pair of differences, its prompts `n` and its method), rendered
/// with [`delta`] and Holm-adjusted within the method's [`Family`] over the rows together.
pub(crate) fn delta_cells(rows: &[([Option<Paired>; 2], usize, &str)]) -> Vec<[String; 2]> {
    let deltas: Vec<Option<Paired>> = rows.iter().flat_map(|(d, _, _)| *d).collect();
    let families: Vec<Family> = rows
        .iter()
        .flat_map(|(_, _, m)| [Family::of(m); 2])
        .collect();
    let adjusted = holm_by_family(&deltas, &families);
    rows.iter()
        .zip(adjusted.chunks_exact(2))
        .map(|(&([a, b], n, _), h)| [delta(a, h[0], n), delta(b, h[1], n)])
        .collect()
}

/// The main table: a row per (method, budget) by KV bytes, its overall score and differences.
fn overall_table(overall: &str, how: Overall, rows: &[RecordRow<'_>]) -> String {
    let score = format!("{overall} [95% CI]");
    let mut out = header(&[
        "method @ budget",
        "KV %",
        &score,
        "Δ vs snapkv [95% CI]",
        "Δ vs full [95% CI]",
        "n",
        "clusters",
    ]);
    let ordered = by_kv(rows);
    let summaries: Vec<_> = ordered
        .iter()
        .map(|row| row.summary(rows, Scope::Overall(how)))
        .collect();
    let pairs: Vec<_> = summaries
        .iter()
        .zip(&ordered)
        .map(|(s, row)| {
            let n = s.score.map_or(0, |e| e.n);
            ([s.vs_snapkv, s.vs_full], n, row.method.as_str())
        })
        .collect();
    for ((row, s), [vs_snapkv, vs_full]) in ordered.iter().zip(&summaries).zip(delta_cells(&pairs))
    {
        let n = s.score.map_or(0, |e| e.n);
        let clusters = s.score.map_or(0, |e| e.clusters);
        out.push_str(&format!(
            "| {} | {} | {} | {vs_snapkv} | {vs_full} | {n} | {clusters} |\n",
            row.label(),
            pct(s.kv_fraction),
            cell(s.score),
        ));
    }
    out
}

/// The row a reduction or a peer's press is judged against: `vllm:pyramid` (an engine's layer
/// classes, `press::classes`) against `pyramid`, the plan it comes from; `kvpress-snapkv` against
/// kvplan's `snapkv`; a control (`headkv@perm3`, `kvplan_planner::controls`) against its method;
/// `None` for everything else.
pub fn counterpart(method: &str) -> Option<&str> {
    match RowMethod::of(method) {
        RowMethod::Kvplan(MethodName::Method(_)) | RowMethod::Other(_) => None,
        RowMethod::Kvplan(m) => Some(m.method().name()),
        RowMethod::Kvpress(press) => Some(press),
    }
}

/// Each row with a [`counterpart`] in the table at the same budget, against it, paired over the
/// prompts both scored; empty when there is none.
fn counterpart_table(how: Overall, rows: &[RecordRow<'_>]) -> String {
    let scope = Scope::Overall(how);
    let pairs: Vec<_> = by_kv(rows)
        .into_iter()
        .filter_map(|row| {
            let m = counterpart(&row.method)?;
            let other = rows.iter().find(|r| r.method == m && r.same_target(row))?;
            Some((row, other, row.paired(other, scope)))
        })
        .collect();
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = header(&[
        "reduction or peer @ budget",
        "KV %",
        "against",
        "KV %",
        "Δ [95% CI]",
        "n",
    ]);
    let deltas: Vec<Option<Paired>> = pairs.iter().map(|(_, _, d)| *d).collect();
    let families: Vec<Family> = pairs
        .iter()
        .map(|(r, _, _)| Family::of(&r.method))
        .collect();
    for ((row, other, d), h) in pairs.iter().zip(holm_by_family(&deltas, &families)) {
        let n = row.estimate(scope).map_or(0, |e| e.n);
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {n} |\n",
            row.label(),
            pct(row.kv_fraction()),
            other.label(),
            pct(other.kv_fraction()),
            delta(*d, h, n),
        ));
    }
    out
}

/// Each column's score with its interval, rows as in the main table.
fn column_table(columns: &[String], rows: &[RecordRow<'_>]) -> String {
    let mut titles = vec!["method @ budget", "KV %"];
    titles.extend(columns.iter().map(String::as_str));
    let mut out = header(&titles);
    for row in by_kv(rows) {
        out.push_str(&format!("| {} | {} |", row.label(), pct(row.kv_fraction())));
        for i in 0..row.columns.len() {
            out.push_str(&format!(" {} |", cell(row.estimate(Scope::Column(i)))));
        }
        out.push('\n');
    }
    out
}

/// What the tables' numbers are.
fn legend(how: Overall) -> String {
    let average = match how {
        Overall::Records => "",
        Overall::Columns => {
            " The average is the mean of the column means; its bootstrap resamples each column \
             within itself."
        }
    };
    format!(
        "KV %: KV bytes held over FullKV's, mean over the row's prompts of each prompt's peak over \
         the generation (after the prompt and after every decode step; records made before the \
         peak was recorded give the share right after the prompt); rows are sorted by it, so \
         rows at equal bytes sit together. Scores in percent with a 95% interval: Wilson's for \
         pass rates (0/1 scores) of independent prompts (every prompt its own cluster), else a \
         percentile bootstrap ({RESAMPLES} resamples, fixed seed; equal scores give it no width) \
         that resamples clusters — prompts sharing a needle or an article, counted in the \
         clusters column — not prompts; [–]: no interval, where a task holds one cluster (one \
         example, or prompts of one needle), which a resample would draw every time.{average} \
         Δ: the row's score minus snapkv's at the same budget / full's, in points, over the prompts both scored (paired cluster bootstrap \
         interval; p: exact McNemar test for pass rates of independent prompts, else the \
         cluster sign test; Holm: p adjusted within the row's family — the main comparison \
         (each method against snapkv and full, kvpress's own presses too) apart from each \
         diagnostic: engine reductions (`vllm:m`, `trtllm:m`), the β sweep (`m@beta…`), \
         permutation controls (`m@perm…`), other placement controls, kvpress's versions of \
         kvplan's methods (`kvpress-snapkv`); the table below pairs each with its counterpart, \
         families alike); ≈: the interval \
         includes 0 or Holm's p ≥ 0.05 — the two cannot be told apart on these prompts; mdd: \
         the smallest difference these prompts could have detected (80% power, two-sided 5%, \
         from the pairs' discordance by cluster); (n N): pairs, when fewer than the row's n \
         prompts.\n"
    )
}

/// A score table (see the module header): the overall table, the per-column table when there
/// are several `columns`, and the legend.
pub fn score_markdown(
    columns: &[String],
    overall: &str,
    how: Overall,
    rows: &[RecordRow<'_>],
) -> String {
    let mut out = overall_table(overall, how, rows);
    let against = counterpart_table(how, rows);
    if !against.is_empty() {
        out.push('\n');
        out.push_str(&against);
    }
    if columns.len() > 1 {
        out.push('\n');
        out.push_str(&column_table(columns, rows));
    }
    out.push('\n');
    out.push_str(&legend(how));
    if !against.is_empty() {
        out.push_str(
            "Against: an engine's layer classes (`vllm:m`, `trtllm:m`) against the plan m they \
             reduce, a kvpress press against kvplan's method of the same name, at the same \
             budget; Δ paired as above.\n",
        );
    }
    out
}

/// The tables of `task`'s records ([`score_markdown`]): the mean over all the row's records,
/// then (with several lengths) a column per context length (mean over depths and examples).
pub fn markdown(task: &str, records: &[Record]) -> String {
    let mut lengths: Vec<usize> = records
        .iter()
        .filter(|r| r.task == task)
        .map(|r| r.context_len)
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    let column_of = |r: &Record| {
        let at = lengths.binary_search(&r.context_len).ok();
        at.filter(|_| r.task == task)
    };
    let rows = rows(records, lengths.len(), column_of);
    let columns: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
    score_markdown(&columns, "mean", Overall::Records, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_by_hand_and_holm_within_each() {
        assert_eq!(Family::of("headkv-r"), Family::Main);
        assert_eq!(Family::of("kvpress-keydiff"), Family::Main);
        assert_eq!(Family::of("kvpress-snapkv"), Family::KvpressCheck);
        assert_eq!(Family::of("trtllm:headkv-r"), Family::Engine);
        assert_eq!(Family::of("headkv@beta1.2"), Family::Beta);
        assert_eq!(Family::of("headkv@perm3"), Family::Permutation);
        assert_eq!(Family::of("headkv@layer-uniform"), Family::Placement);
        let p = |v: f64| {
            Some(Paired {
                n: 50,
                clusters: 50,
                mean: 0.1,
                interval: None,
                p_value: Some(v),
                test: crate::stats::Test::McNemar,
                detectable: None,
                differing: 10,
            })
        };
        // Main 0.01 and 0.02, engine 0.01 and 0.04. One family of four: Holm ×4, ×3, ×2, ×1 of
        // the sorted 0.01, 0.01, 0.02, 0.04 → 0.04, 0.04, 0.04, 0.04. By family: main ×2, ×1 →
        // 0.02, 0.02; engine → 0.02, 0.04.
        let deltas = [p(0.01), p(0.02), p(0.01), p(0.04)];
        let fam = [Family::Main, Family::Main, Family::Engine, Family::Engine];
        let got: Vec<f64> = holm_by_family(&deltas, &fam)
            .into_iter()
            .flatten()
            .collect();
        let want = [0.02, 0.02, 0.02, 0.04];
        assert!(
            got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12),
            "{got:?}"
        );
        let one: Vec<f64> = holm_of(&deltas).into_iter().flatten().collect();
        assert!(one.iter().all(|g| (g - 0.04).abs() < 1e-12), "{one:?}");
    }

    fn rec(method: &str, budget: Option<usize>, example: usize, score: f64, kv: f64) -> Record {
        Record {
            example,
            needle: format!("needle {example}"),
            ..crate::records::test_record("niah", method, budget, 512, score, kv)
        }
    }

    fn records() -> Vec<Record> {
        let mut out = Vec::new();
        let rows: [(&str, Option<usize>, f64, &[f64]); 4] = [
            ("full", None, 1.0, &[1.0, 1.0, 1.0, 1.0, 1.0]),
            ("snapkv", Some(64), 0.125, &[1.0, 1.0, 0.0, 0.0, 0.0]),
            ("spindle", Some(64), 0.05, &[0.0, 0.0, 0.0]),
            ("pod", Some(64), 0.9, &[1.0, 1.0, 1.0, 1.0, 0.0]),
        ];
        for (m, b, kv, scores) in rows {
            out.extend(scores.iter().enumerate().map(|(e, &s)| rec(m, b, e, s, kv)));
        }
        out
    }

    #[test]
    fn rows_sit_by_measured_bytes_with_intervals_and_paired_differences() {
        let t = markdown("niah", &records());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "| method @ budget | KV % | mean [95% CI] | Δ vs snapkv [95% CI] | Δ vs full [95% CI] | n | clusters |"
        );
        assert_eq!(lines[1], "|---|---:|---:|---:|---:|---:|---:|");
        // 5/5: Wilson [1 − (z²/5)/(1 + z²/5), 1] = [0.566, 1]; every prompt its own needle.
        assert_eq!(
            lines[2],
            "| full | 100.0 | 100.0 [56.6, 100.0] | – | – | 5 | 5 |"
        );
        // The table's p-values 0.5, 1, 0.25, 0.5, 0.25 (below): Holm's ×5, ×4, ×3, ×2, ×1 of
        // the sorted 0.25, 0.25, 0.5, 0.5, 1 are all ≥ 1 → 1. With 5 pairs or fewer no
        // difference is detectable: 7.849/5 > 1 (mdd >100).
        // PoD by its 90% of the bytes, above snapkv though at the same budget. 4/5: Wilson
        // [0.376, 0.964]. Against snapkv: +1 on prompts 2 and 3 (McNemar 2/0: p 0.5); against
        // full: −1 on prompt 4 (p 1). Both cannot be told apart.
        assert!(
            lines[3].starts_with("| pod @ 64 | 90.0 | 80.0 [37.6, 96.4] | +40.0 ["),
            "{}",
            lines[3]
        );
        assert!(
            lines[3].contains("] p 0.500 Holm 1.000 ≈ mdd >100 | -20.0 ["),
            "{}",
            lines[3]
        );
        assert!(
            lines[3].ends_with("] p 1.000 Holm 1.000 ≈ mdd >100 | 5 | 5 |"),
            "{}",
            lines[3]
        );
        // 2/5: Wilson [0.118, 0.769]; −1 on three prompts of five: p 0.25, so ≈ although the
        // percentile interval [−100, −20] of five pairs excludes 0.
        assert_eq!(
            lines[4],
            "| snapkv @ 64 | 12.5 | 40.0 [11.8, 76.9] | – | -60.0 [-100.0, -20.0] p 0.250 Holm 1.000 ≈ mdd >100 | 5 | 5 |"
        );
        // 0/3: Wilson [0, (z²/3)/(1 + z²/3)] = [0, 0.5615]; against full −1 on all three (p 0.25).
        assert!(
            lines[5].starts_with("| spindle @ 64 | 5.0 | 0.0 [0.0, 56.1] | -66.7 ["),
            "{}",
            lines[5]
        );
        assert!(
            lines[5].ends_with("| -100.0 [-100.0, -100.0] p 0.250 Holm 1.000 ≈ mdd >100 | 3 | 3 |"),
            "{}",
            lines[5]
        );
        assert_eq!(lines[6], "");
        assert!(
            lines[7].starts_with("KV %: KV bytes held over FullKV's"),
            "{}",
            lines[7]
        );
        assert_eq!(lines.len(), 8, "one length: no per-length table");
    }

    #[test]
    fn repeated_needles_are_clusters_and_rows_sit_by_their_peak_bytes() {
        // 2 needles × 3 depths: snapkv finds needle 0 at every depth, needle 1 at none; full
        // finds all. As clusters, snapkv's 50% rests on 2 observations: the interval is the
        // cluster bootstrap's [0, 100] (draws AA, AB, BB), not Wilson's [18.8, 81.2].
        let mut recs = Vec::new();
        for (method, budget, kv, peak) in
            [("full", None, 1.0, 1.0), ("snapkv", Some(64), 0.25, 0.3)]
        {
            for e in 0..6 {
                let needle = e / 3;
                let score = if method == "full" || needle == 0 {
                    1.0
                } else {
                    0.0
                };
                recs.push(Record {
                    needle: format!("needle {needle}"),
                    kv_peak: Some(peak),
                    ..rec(method, budget, e, score, kv)
                });
            }
        }
        // H2O holds less than snapkv after the prompt (0.2) but more at its peak (0.35).
        recs.extend((0..6).map(|e| Record {
            needle: format!("needle {}", e / 3),
            kv_peak: Some(0.35),
            ..rec("h2o", Some(64), e, 1.0, 0.2)
        }));
        let t = markdown("niah", &recs);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[3].starts_with("| h2o @ 64 | 35.0 |"), "{t}");
        assert!(
            lines[4].starts_with("| snapkv @ 64 | 30.0 | 50.0 [0.0, 100.0] |"),
            "{t}"
        );
        assert!(lines[4].ends_with(" | 6 | 2 |"), "{t}");
        // Against full: −3 in needle 1, 0 in needle 0: one needle differs, p 1 — two needles
        // cannot separate anything.
        assert!(lines[4].contains("p 1.000 Holm 1.000 ≈"), "{t}");
        assert!(t.contains("resamples clusters"), "{t}");
    }

    #[test]
    fn reductions_and_peers_are_paired_with_the_method_they_stand_for() {
        assert_eq!(counterpart("vllm:headkv-r"), Some("headkv-r"));
        assert_eq!(counterpart("trtllm:pyramid"), Some("pyramid"));
        assert_eq!(counterpart("kvpress-snapkv"), Some("snapkv"));
        assert_eq!(counterpart("kvpress-expected"), Some("expected"));
        assert_eq!((counterpart("snapkv"), counterpart("full")), (None, None));
        let mut recs = records();
        // The engine's reduction of snapkv: right on prompts 0, 2, 3 (snapkv on 0, 1): +1 on 2
        // and 3, −1 on 1, mean +1/5 = +20 points; McNemar 2/1: p = 1.
        for (e, s) in [1.0, 0.0, 1.0, 1.0, 0.0].into_iter().enumerate() {
            recs.push(rec("vllm:snapkv", Some(64), e, s, 0.125));
        }
        // A peer without its counterpart in the table has no line.
        recs.push(rec("kvpress-expected", Some(64), 0, 1.0, 0.125));
        let t = markdown("niah", &recs);
        let at = t
            .lines()
            .position(|l| l.starts_with("| reduction or peer @ budget |"))
            .unwrap_or_else(|| panic!("no counterpart table: {t}"));
        let line = t.lines().nth(at + 2).expect("one row");
        assert!(
            line.starts_with("| vllm:snapkv @ 64 | 12.5 | snapkv @ 64 | 12.5 | +20.0 ["),
            "{line}"
        );
        assert!(
            line.ends_with("] p 1.000 Holm 1.000 ≈ mdd >100 | 5 |"),
            "{line}"
        );
        assert_eq!(
            t.lines().nth(at + 3),
            Some(""),
            "kvpress-expected has no counterpart: {t}"
        );
        // Without such rows the table is absent.
        assert!(!markdown("niah", &records()).contains("reduction or peer"));
    }

    #[test]
    fn differences_say_their_pairs_when_fewer_than_the_rows_prompts() {
        let p = Paired {
            n: 3,
            clusters: 3,
            mean: 0.25,
            interval: Some(crate::stats::Interval { lo: 0.1, hi: 0.4 }),
            p_value: None,
            test: crate::stats::Test::ClusterSign,
            detectable: Some(0.3),
            differing: 3,
        };
        assert_eq!(delta(Some(p), None, 5), "+25.0 [10.0, 40.0] (n 3)");
        assert_eq!(delta(Some(p), None, 3), "+25.0 [10.0, 40.0]");
        let tie = Paired {
            mean: -0.0001,
            interval: Some(crate::stats::Interval { lo: -0.2, hi: 0.1 }),
            ..p
        };
        assert_eq!(delta(Some(tie), None, 3), "0.0 [-20.0, 10.0] ≈ mdd 30.0");
        assert_eq!(delta(None, None, 3), "–");
        // No interval (a task of one example): `[–]`, and it cannot be told from 0 whatever p.
        let lone = Paired {
            interval: None,
            p_value: Some(0.001),
            ..p
        };
        assert_eq!(delta(Some(lone), None, 3), "+25.0 [–] p 0.001 ≈ mdd 30.0");
        // p 0.01 alone separates; Holm's 0.2 over the table's comparisons does not.
        let q = Paired {
            p_value: Some(0.01),
            ..p
        };
        assert_eq!(delta(Some(q), None, 3), "+25.0 [10.0, 40.0] p 0.010");
        // Every pair alike (PyramidKV at 25% against SnapKV on RULER, the authors' short-prompt
        // rule): no mdd to give, and the cell says why rather than ending at `≈`.
        let alike = Paired {
            mean: 0.0,
            interval: Some(crate::stats::Interval { lo: 0.0, hi: 0.0 }),
            p_value: Some(1.0),
            detectable: None,
            differing: 0,
            ..p
        };
        assert_eq!(
            delta(Some(alike), None, 3),
            "0.0 [0.0, 0.0] p 1.000 ≈ (no pair differs)"
        );
        let one_differs = Paired {
            differing: 1,
            ..alike
        };
        assert_eq!(
            delta(Some(one_differs), None, 3),
            "0.0 [0.0, 0.0] p 1.000 ≈"
        );
        assert_eq!(
            delta(Some(q), Some(0.2), 3),
            "+25.0 [10.0, 40.0] p 0.010 Holm 0.200 ≈ mdd 30.0"
        );
    }
}
