#!/usr/bin/env python3
"""How far two records files agree on the cells they share: per method, the cells both hold, how
many have the same answer text, the same score, and the same effective ratio (to 6 digits), and
the first few that differ. For cross-checks such as kvpress on the CPU against kvpress on a GPU,
or kvplan's SnapKV configured as kvpress's against kvpress's SnapKV.

    python3 tools/records_agree.py A.records.json B.records.json [--as A_METHOD=B_METHOD ...]
        [--show N]

A cell is keyed as kvplan keys it (eval/src/records.rs `CellKey`: task, length, depth, example,
method, budget or target ratio). `--as snapkv=kvpress-snapkv` pairs A's `snapkv` cells with B's
`kvpress-snapkv` cells (the methods differ by name only). Reads only; exits 1 when a shared cell
differs in text, 0 otherwise, 2 on bad input.
"""

import argparse
import json
import sys
from collections import defaultdict

from kvpress_side_by_side import record_key  # kvplan's cell key, as the kvpress runner keys cells


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{path}: cannot read a records file ({e})", file=sys.stderr)
        sys.exit(2)
    recs = data.get("records") if isinstance(data, dict) else None
    if not isinstance(recs, list):
        print(f"{path}: not a records file (expected an object with `records`)", file=sys.stderr)
        sys.exit(2)
    return recs


def effective(r):
    ratio = r.get("ratio")
    return None if not ratio else round(ratio["effective"], 6)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--as", dest="pairs", action="append", default=[], metavar="A=B",
                    help="pair A's method A with B's method B")
    ap.add_argument("--show", type=int, default=5, help="differing cells listed per method (5)")
    args = ap.parse_args(argv)
    rename = {}
    for p in args.pairs:
        a, sep, b = p.partition("=")
        if not sep or not a or not b:
            ap.error(f"--as: expected A_METHOD=B_METHOD, found {p!r}")
        rename[b] = a
    a = {record_key(r): r for r in load(args.a)}
    b = {record_key(dict(r, method=rename.get(r["method"], r["method"]))): r for r in load(args.b)}
    shared = sorted(set(a) & set(b))
    if not shared:
        print(f"no cell in both files ({len(a)} and {len(b)} cells)")
        return 0
    by_method = defaultdict(list)
    for k in shared:
        by_method[a[k]["method"]].append(k)
    differ = False
    print(f"{len(shared)} cells in both ({len(a)} in {args.a}, {len(b)} in {args.b})")
    print("| method | shared | same text | same score | same effective ratio |")
    print("|---|---:|---:|---:|---:|")
    shown = []
    for m, keys in sorted(by_method.items()):
        text = sum(a[k]["response"] == b[k]["response"] for k in keys)
        sc = sum(a[k]["score"] == b[k]["score"] for k in keys)
        eff = sum(effective(a[k]) == effective(b[k]) for k in keys)
        print(f"| {m} | {len(keys)} | {text} | {sc} | {eff} |")
        bad = [k for k in keys if a[k]["response"] != b[k]["response"]]
        differ |= bool(bad)
        shown += [(k, a[k], b[k]) for k in bad[: args.show]]
    for k, x, y in shown:
        print(f"{k}: {x['response']!r} (score {x['score']:g}) vs {y['response']!r} "
              f"(score {y['score']:g})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
