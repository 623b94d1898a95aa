#!/usr/bin/env python3
"""Paired comparison of two rows of a `kvplan eval ppl` records file (standard library only).

    tools/ppl_paired.py RECORDS.json METHOD@BUDGET METHOD@BUDGET [--text NAME] [--block 32]

Both rows streamed the same text, so their per-token negative log-likelihoods pair up. Prints the
perplexity ratio exp(mean(nll_a) - mean(nll_b)) with a 95% paired block-bootstrap interval:
2000 resamples (seed 0) of 32-token blocks, each resample taking the same blocks for both rows
(the interval `kvplan eval ppl` gives each row on its own, made paired). Neighbouring tokens are
not independent: the blocks are the clusters, resampled whole, and a resample's statistic is the
summed difference of its blocks over their tokens (eval/src/stats's `bootstrap_ratio`). The
interval runs from the floor(0.025·B)-th to the ceil(0.975·B)-th sorted resample (1-based), the
order statistics of stats.rs.
"""
import argparse
import json
import math
import random


def order_statistic(sorted_values, q, upper):
    """stats.rs `order_statistic`: the floor(q·B)-th (lower) or ceil(q·B)-th (upper), 1-based."""
    b = len(sorted_values)
    k = math.ceil(q * b) if upper else math.floor(q * b)
    return sorted_values[min(max(k, 1), b) - 1]


def row(records, label, text):
    method, _, budget = label.partition("@")
    budget = int(budget) if budget else None
    for r in records:
        if r["method"] == method and r["budget"] == budget and (text is None or r["text"] == text):
            return r["nll"]
    raise SystemExit(f"no record for {label}" + (f" on {text}" if text else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--text")
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args()
    records = json.load(open(args.records))["records"]
    a, b = row(records, args.a, args.text), row(records, args.b, args.text)
    if len(a) != len(b):
        raise SystemExit(f"{args.a} has {len(a)} tokens, {args.b} {len(b)}: not the same stream")
    diff = [x - y for x, y in zip(a, b)]
    blocks = [diff[i:i + args.block] for i in range(0, len(diff), args.block)]
    point = sum(diff) / len(diff)
    rng = random.Random(0)
    stats = []
    for _ in range(args.resamples):
        pick = [blocks[rng.randrange(len(blocks))] for _ in blocks]
        n = sum(len(p) for p in pick)
        stats.append(sum(sum(p) for p in pick) / n)
    stats.sort()
    lo, hi = order_statistic(stats, 0.025, False), order_statistic(stats, 0.975, True)
    print(f"ppl({args.a}) / ppl({args.b}) = {math.exp(point):.3f} "
          f"[{math.exp(lo):.3f}, {math.exp(hi):.3f}] over {len(diff)} tokens "
          f"({len(blocks)} blocks of {args.block})")


if __name__ == "__main__":
    main()
