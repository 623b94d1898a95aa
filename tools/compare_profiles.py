#!/usr/bin/env python3
"""Compares two kvplan profiles of the same model and settings (e.g. `kvplan profile --quick` on
the CPU and on the GPU), and optionally the budgets of their plans.

    python3 tools/compare_profiles.py CPU.profile.json GPU.profile.json \
        [--summaries CPU_SUMMARY.txt GPU_SUMMARY.txt] [--tol 0.02]

Reports, and exits 1 when any fails:
- kept trials: every needle trial (retrieval, retrieval-reasoning) kept by one is kept by the other;
- head scores and every other number of the profile (layer similarity, wavelet magnitudes, funnel,
  KV redundancy): the largest absolute difference per section, against --tol;
- the ten strongest retrieval heads: the same set;
- plan budgets (with --summaries: the output of `kvplan plan --summary PLAN` for each plan): the
  per-(layer, KV head) budget rows of every method, total absolute difference in entries.
Standard library only.
"""

import argparse
import json
import re
import sys

SECTIONS = ["retrieval", "retrieval_reasoning", "layer_similarity", "wavelet", "funnel",
            "kv_redundancy"]


def numbers(v):
    """Every number of a JSON value, in document order (booleans left out)."""
    if isinstance(v, bool):
        return []
    if isinstance(v, (int, float)):
        return [float(v)]
    if isinstance(v, list):
        return [x for item in v for x in numbers(item)]
    if isinstance(v, dict):
        return [x for k in sorted(v) for x in numbers(v[k])]
    return []


def trials(p, kind):
    return {(t["example"], t["context_length"], t["depth_percent"]): t
            for t in p["details"][kind]}


def top_heads(p, n=10):
    scores = p["retrieval"]["scores"]
    flat = [(s, l, h) for l, row in enumerate(scores) for h, s in enumerate(row)]
    flat.sort(key=lambda x: (-x[0], x[1], x[2]))
    return {(l, h) for _, l, h in flat[:n]}


def budget_rows(path):
    """The budget tables of a `kvplan plan --summary` output: `== method ==` headers, then rows
    `layer kv0 kv1 … total` of numbers; keyed by (method, layer)."""
    rows = {}
    section = ""
    for line in open(path, encoding="utf-8"):
        m = re.match(r"== (\S+) ==", line)
        if m:
            section = m.group(1)
            continue
        fields = line.split()
        if section and fields and all(re.fullmatch(r"-?\d+(?:\.\d+)?", f) for f in fields):
            rows[(section, fields[0])] = [float(x) for x in fields[1:]]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cpu")
    ap.add_argument("gpu")
    ap.add_argument("--summaries", nargs=2, metavar=("CPU", "GPU"))
    ap.add_argument("--tol", type=float, default=0.02,
                    help="largest absolute difference allowed per number (default 0.02)")
    a = ap.parse_args()
    cpu = json.load(open(a.cpu, encoding="utf-8"))
    gpu = json.load(open(a.gpu, encoding="utf-8"))
    ok = True
    for kind in ["retrieval_trials", "retrieval_reasoning_trials"]:
        tc, tg = trials(cpu, kind), trials(gpu, kind)
        if tc.keys() != tg.keys():
            print(f"{kind}: different trials ({len(tc)} vs {len(tg)})")
            ok = False
            continue
        differ = [k for k in tc if tc[k]["kept"] != tg[k]["kept"]]
        answers = sum(tc[k]["response"] == tg[k]["response"] for k in tc)
        kept = sum(t["kept"] for t in tc.values())
        print(f"{kind}: kept {kept} of {len(tc)} on the CPU, "
              f"{sum(t['kept'] for t in tg.values())} on the GPU; kept differently: {differ}; "
              f"identical answers {answers} of {len(tc)}")
        ok &= not differ
    for s in SECTIONS:
        xc, xg = numbers(cpu[s]), numbers(gpu[s])
        if len(xc) != len(xg):
            print(f"{s}: different shapes ({len(xc)} vs {len(xg)} numbers)")
            ok = False
            continue
        d = max((abs(x - y) for x, y in zip(xc, xg)), default=0.0)
        print(f"{s}: {len(xc)} numbers, max |Δ| {d:.5f} (tolerance {a.tol})")
        ok &= d <= a.tol
    same = top_heads(cpu) == top_heads(gpu)
    print(f"ten strongest retrieval heads: {'same' if same else 'differ'}")
    ok &= same
    if a.summaries:
        rc, rg = budget_rows(a.summaries[0]), budget_rows(a.summaries[1])
        if rc.keys() != rg.keys():
            print(f"plan summaries: different rows ({len(rc)} vs {len(rg)})")
            ok = False
        per_method = {}
        for key in sorted(rc.keys() & rg.keys()):
            # Each row ends with the layer's total: compare the per-head entries only.
            d = sum(abs(x - y) for x, y in zip(rc[key][:-1], rg[key][:-1]))
            held = sum(rc[key][:-1])
            moved, all_held = per_method.get(key[0], (0.0, 0.0))
            per_method[key[0]] = (moved + d, all_held + held)
        for method, (moved, held) in per_method.items():
            print(f"plan budgets {method}: |Δ| {moved:g} entries in all, of {held:g}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
