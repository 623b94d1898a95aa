#!/usr/bin/env python3
"""Paired comparison of two RULER or NIAH rows, possibly from two records files (standard library
only).

    tools/ruler_paired.py RECORDS_A.json METHOD@BUDGET RECORDS_B.json METHOD@BUDGET

`kvplan eval ruler`'s table pairs each row with SnapKV and FullKV of the same run; this compares
any two rows — two methods of one run, or one method under two modes (question-aware against
question-agnostic records of the same model, length and seed: the same tasks and examples). The
estimate is the difference of the averages of the task means, in points. Only prompts (task,
length, depth, example) present in both rows count; a task missing from either is an error. A
method may hold '@' itself (`headkv-r@beta2@128`: the budget is the last part when a number).

The statistics are eval/src/stats's, so the numbers match the tables':
- 95% interval: the cluster bootstrap (2000 resamples, seed 0): within each task the clusters
  (prompts sharing a needle or an article: a record's `cluster`, else the prompt alone, as
  `Record::cluster` says) are drawn with replacement, each task's statistic
  is the sum over the drawn clusters' pairs over their count, the average of the tasks' is the
  resample's; the interval runs from the floor(0.025·B)-th to the ceil(0.975·B)-th sorted
  resample (1-based), the order statistics of stats.rs.
- p: the cluster sign test on T, the average of the task means of the differences, i.e. the sum
  over clusters of w_t · D_k (w_t = 1/(tasks · pairs of the task), D_k a cluster's summed
  difference): exact over the 2^K sign flips of the K non-zero clusters up to K = 16, else
  z = T/sqrt(V0), V0 = sum of (w_t · D_k)^2 (Durkalski et al. 2003 for pass rates).
- mdd: the smallest difference the sample could have detected, 2.8016 · sqrt(V0) (80% power,
  two-sided 5%).
"""
import argparse
import json
import math
import random
import sys
from statistics import NormalDist


def load(path):
    try:
        return json.load(open(path))["records"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{path}: not a kvplan records file ({e})")


def cluster_of(r):
    """eval/src/records.rs `Record::cluster`: the recorded cluster, else the prompt alone."""
    if r.get("cluster") is not None:
        return r["cluster"]
    return f"{r['task']}/{r['context_len']}/{r['depth']:.4f}/{r['example']}"


def row(path, records, label):
    # METHOD@BUDGET; a method may hold '@' itself (`headkv@beta2@128`, `headkv@perm1`): the
    # budget is the last part when it is a number.
    method, _, budget = label.rpartition("@")
    if not budget.isdigit():
        method, budget = label, ""
    budget = int(budget) if budget else None
    # A prompt: task, length, depth (NIAH's needle placement) and example.
    cells = {
        (r["task"], r.get("context_len"), r.get("depth"), r["example"]): (r["score"], cluster_of(r))
        for r in records
        if r["method"] == method and r.get("budget") == budget
    }
    if not cells:
        sys.exit(f"{path}: no record for {label}")
    return cells


def order_statistic(sorted_values, q, upper):
    """stats.rs `order_statistic`: the floor(q·B)-th (lower) or ceil(q·B)-th (upper), 1-based."""
    b = len(sorted_values)
    k = math.ceil(q * b) if upper else math.floor(q * b)
    return sorted_values[min(max(k, 1), b) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records_a")
    ap.add_argument("a", help="METHOD@BUDGET, or `full`")
    ap.add_argument("records_b")
    ap.add_argument("b", help="METHOD@BUDGET, or `full`")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    # One read per file: both rows often come from the same records file.
    files = {path: load(path) for path in {args.records_a, args.records_b}}
    a = row(args.records_a, files[args.records_a], args.a)
    b = row(args.records_b, files[args.records_b], args.b)
    tasks = sorted({k[0] for k in a} | {k[0] for k in b})
    # Per task: its clusters, each the list of its pairs' differences (clusters of row A).
    clusters = {}
    for t in tasks:
        keys = sorted(k for k in a if k[0] == t and k in b)
        if not keys:
            sys.exit(f"task {t}: no example scored by both rows")
        by = {}
        for k in keys:
            by.setdefault(a[k][1], []).append(a[k][0] - b[k][0])
        clusters[t] = list(by.values())

    def average(per_task):
        means = [sum(sum(c) for c in cs) / sum(len(c) for c in cs) for cs in per_task.values()]
        return 100 * sum(means) / len(means)

    rng = random.Random(0)
    boot = sorted(
        average({t: [rng.choice(cs) for _ in cs] for t, cs in clusters.items()})
        for _ in range(args.resamples)
    )
    lo = order_statistic(boot, 0.025, False)
    hi = order_statistic(boot, 0.975, True)
    sums = []
    for cs in clusters.values():
        w = 1 / (len(clusters) * sum(len(c) for c in cs))
        sums.extend(w * sum(c) for c in cs if sum(c) != 0)
    v0 = sum(x * x for x in sums)
    mean = average(clusters)
    normal = NormalDist()
    observed = abs(sum(sums))
    if not sums:
        p = 1.0
    elif len(sums) <= 16:
        tol = 1e-12 * sum(abs(x) for x in sums)
        flips = [abs(sum(-x if m >> i & 1 else x for i, x in enumerate(sums)))
                 for m in range(1 << len(sums))]
        p = sum(t >= observed - tol for t in flips) / len(flips)
    else:
        p = min(1.0, 2 * (1 - normal.cdf(observed / math.sqrt(v0))))
    mdd = (normal.inv_cdf(0.975) + normal.inv_cdf(0.8)) * math.sqrt(v0)
    pairs = sum(len(c) for cs in clusters.values() for c in cs)
    n_clusters = sum(len(cs) for cs in clusters.values())
    if args.a == args.b:
        args.a, args.b = f"{args.a} (A)", f"{args.b} (B)"
    print(
        f"{args.a} − {args.b}: {mean:+.1f} [{lo:+.1f}, {hi:+.1f}] points, p {p:.3f} "
        f"(cluster sign test), mdd {100 * mdd:.1f} ({len(tasks)} tasks, {pairs} paired examples "
        f"in {n_clusters} clusters)"
    )


if __name__ == "__main__":
    main()
