#!/usr/bin/env python3
"""Copies a `kvplan eval` records file without the cells of some methods, so that a re-run into
the copy measures them again (a run skips every cell its records already hold, by method name)
while the table still pairs them with the plans' cells kept in the copy.

    python3 tools/records_without.py IN OUT METHOD[@BUDGET|@RATIO] ...

`trtllm:headkv-r` drops that method at every budget, `vllm:pyramid@512` at budget 512 only,
`headkv@0.25` its cells at the target ratio 0.25 only (a RULER ratio run's cells);
`headkv@perm1` is the control's name, all its cells.
OUT must not exist (no silent overwrite); it is written whole or not at all.
"""

import json
import os
import sys


def rule(drop):
    """`(method, which of its cells)` of a METHOD[@BUDGET|@RATIO] argument. The part after the
    last `@` selects cells only when it is a number, so a control (`headkv@perm1`) is a method."""
    name, _, at = drop.rpartition("@")
    try:
        if "." in at:  # a target ratio
            target = float(at)
            return name, lambda r: (r.get("ratio") or {}).get("target") == target
        budget = int(at)
        return name, lambda r: r.get("budget") == budget
    except ValueError:
        return drop, lambda r: True


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    src, dst, drops = sys.argv[1], sys.argv[2], sys.argv[3:]
    if os.path.exists(dst):
        sys.exit(f"{dst}: exists; remove it first")
    with open(src) as f:
        records = json.load(f)
    rules = [rule(d) for d in drops]

    def dropped(r):
        return any(r["method"] == m and at_cell(r) for m, at_cell in rules)

    idle = [d for d, (m, at_cell) in zip(drops, rules)
            if not any(r["method"] == m and at_cell(r) for r in records["records"])]
    if idle:
        sys.exit(f"{src}: no cells of {', '.join(idle)}; nothing written")
    kept = [r for r in records["records"] if not dropped(r)]
    print(f"{src}: {len(records['records']) - len(kept)} cells dropped, {len(kept)} kept")
    records["records"] = kept
    tmp = dst + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(tmp, "w") as f:
        json.dump(records, f, indent=2)
        f.write("\n")
    os.replace(tmp, dst)


if __name__ == "__main__":
    main()
