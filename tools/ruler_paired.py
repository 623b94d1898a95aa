#!/usr/bin/env python3
"""Paired comparison of two RULER rows, possibly from two records files (standard library only).

    tools/ruler_paired.py RECORDS_A.json METHOD@BUDGET RECORDS_B.json METHOD@BUDGET

`kvplan eval ruler`'s table pairs each row with SnapKV and FullKV of the same run; this compares
any two rows — two methods of one run, or one method under two modes (question-aware against
question-agnostic records of the same model, length and seed: the same tasks and examples). The
estimate is the difference of the averages of the task means, in points; the 95% interval is a
percentile bootstrap (2000 resamples, seed 0) that resamples each task's examples within the task
and takes the same examples for both rows — the table's average interval, made paired. Only
(task, example) pairs present in both rows count; a task missing from either is an error.
"""
import argparse
import json
import random
import sys


def load(path):
    try:
        return json.load(open(path))["records"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{path}: not a kvplan records file ({e})")


def row(path, records, label):
    method, _, budget = label.partition("@")
    budget = int(budget) if budget else None
    cells = {
        (r["task"], r["example"]): r["score"]
        for r in records
        if r["method"] == method and r.get("budget") == budget
    }
    if not cells:
        sys.exit(f"{path}: no record for {label}")
    return cells


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
    tasks = sorted({t for t, _ in a} | {t for t, _ in b})
    diffs = {}
    for t in tasks:
        keys = sorted(k for k in a if k[0] == t and k in b)
        if not keys:
            sys.exit(f"task {t}: no example scored by both rows")
        diffs[t] = [a[k] - b[k] for k in keys]

    def average(d):
        return 100 * sum(sum(v) / len(v) for v in d.values()) / len(d)

    rng = random.Random(0)
    boot = sorted(
        average({t: [rng.choice(v) for _ in v] for t, v in diffs.items()})
        for _ in range(args.resamples)
    )
    lo, hi = boot[int(0.025 * len(boot))], boot[int(0.975 * len(boot)) - 1]
    pairs = sum(len(v) for v in diffs.values())
    if args.a == args.b:
        args.a, args.b = f"{args.a} (A)", f"{args.b} (B)"
    print(
        f"{args.a} − {args.b}: {average(diffs):+.1f} [{lo:+.1f}, {hi:+.1f}] points "
        f"({len(tasks)} tasks, {pairs} paired examples)"
    )


if __name__ == "__main__":
    main()
