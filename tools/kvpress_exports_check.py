#!/usr/bin/env python3
"""Loads kvplan's kvpress, LU-KV and DuoAttention exports into kvpress and generates with them.

Run as `tools/kvpress_side_by_side.sh --check-exports EXPORTS PROMPTS [options]` (the pinned
kvpress venv, outside the repository; never CI; offline). Inputs: an export
folder written by `kvplan export PLAN --to all --context-len L --out DIR` and a prompts file
written by `kvplan eval niah ... --export-prompts FILE` for the same model. For each export:

- kvpress: `PerLayerCompressionPress(SnapKVPress(), compression_ratios)` from
  `kvpress/compression_ratios.json` (one ratio per layer, checked against the model's layers).
- lukv: `LUKVPress(ExpectedAttentionPress(), compression_ratio=R)` with its budget curves set
  from `lukv/lukv_curve.npy` (kvpress would download them: `_load_budget_curves` is replaced by
  a loader of the file, which keeps kvpress's own shape check, [99, layers, KV heads]).
- duo: `DuoAttentionPress(head_compression_ratio=R)` with `load_attention_pattern` replaced by a
  reader of `duo/config.json` and `duo/full_attention_heads.tsv` (clipped to [0, 1] as
  DuoAttention's `load_attn_pattern` does), instead of the hub download.

Each press prefills the first prompts of the prompts file (question-aware: the whole prompt),
greedy-decodes, and is scored with RULER's metric as kvplan scores it; the report gives the
answers, the score and the KV share the press held (masked keys taken out: kvpress's LU-KV and
DuoAttention only mask). A press that fails to load or generate fails the check (exit 1).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kvpress_side_by_side as side  # noqa: E402  (the model loader, the shim, the scoring)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def kvpress_press(exports, model, ratio):
    import kvpress as kp

    ratios = read_json(exports / "kvpress" / "compression_ratios.json")["compression_ratios"]
    if len(ratios) != model.config.num_hidden_layers:
        raise SystemExit(f"kvpress export: {len(ratios)} ratios for "
                         f"{model.config.num_hidden_layers} layers")
    return kp.PerLayerCompressionPress(kp.SnapKVPress(), ratios), sum(ratios) / len(ratios)


def lukv_press(exports, model, ratio):
    import numpy as np
    import kvpress as kp
    from kvpress.presses.lukv_press import LUKVPress

    curve = np.load(exports / "lukv" / "lukv_curve.npy", allow_pickle=False)

    def load_from_file(self, model):
        layers, kv_heads = self._model_curve_shape(model)
        if curve.shape != (99, layers, kv_heads):
            raise ValueError(f"LU-KV budget curve must have shape {(99, layers, kv_heads)}, "
                             f"got {curve.shape}.")
        return curve

    LUKVPress._load_budget_curves = load_from_file
    return kp.LUKVPress(kp.ExpectedAttentionPress(), compression_ratio=ratio), ratio


def duo_press(exports, model, ratio):
    import numpy as np
    import kvpress as kp
    from kvpress.presses.duo_attention_press import DuoAttentionPress

    config = read_json(exports / "duo" / "config.json")
    scores = np.clip(np.loadtxt(exports / "duo" / "full_attention_heads.tsv", dtype=float,
                                delimiter="\t", ndmin=2), 0, 1)
    if scores.shape != (model.config.num_hidden_layers, model.config.num_key_value_heads):
        raise SystemExit(f"duo export: gates of shape {scores.shape}")

    def load_from_files(model):
        return config["sink_size"], config["recent_size"], scores

    DuoAttentionPress.load_attention_pattern = staticmethod(load_from_files)
    return kp.DuoAttentionPress(head_compression_ratio=ratio), None


PRESSES = {"kvpress": kvpress_press, "lukv": lukv_press, "duo": duo_press}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("exports", type=Path, help="folder of `kvplan export --to all`")
    ap.add_argument("prompts", type=Path, help="prompts file (kvplan eval niah --export-prompts)")
    ap.add_argument("--models", type=Path, default=Path(os.environ.get(
        "KVPLAN_MODELS", str(Path.home() / ".cache/kvplan/models"))),
                    help="folder searched for the GGUF whose SHA-256 the prompts file names")
    ap.add_argument("--gguf", type=Path, help="the GGUF file itself (its hash is not checked)")
    ap.add_argument("--ratio", type=float, default=0.5,
                    help="compression ratio for LU-KV, share of streaming heads for DuoAttention")
    ap.add_argument("--limit", type=int, default=5, help="prompts per press (5)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, help="write the report (JSON) here as well")
    args = ap.parse_args(argv)

    prompts = side.load_prompts(args.prompts)
    chosen = prompts["prompts"][: args.limit]
    gguf = args.gguf or side.find_gguf(args.models, prompts["model_sha256"])
    model, tok = side.load_model(gguf, args.threads)
    stops = side.stop_ids(model, tok)
    report = {"exports": str(args.exports), "prompts": str(args.prompts),
              "versions": side.versions(), "presses": {}}
    failed = False
    for name, make in PRESSES.items():
        try:
            press, nominal = make(args.exports, model, args.ratio)
            cells = []
            for p in chosen:
                new, fraction, _effective, seconds = side.run_cell(model, p, press, "aware", stops)
                response = tok.decode(new, skip_special_tokens=False)
                cells.append({"response": response, "expected": p["expected"],
                              "score": side.score(p["metric"], response, p["expected"]),
                              "kv_fraction": fraction, "seconds": round(seconds, 3)})
            mean = sum(c["score"] for c in cells) / len(cells)
            held = sum(c["kv_fraction"] for c in cells) / len(cells)
            report["presses"][name] = {"press": repr(press)[:200], "nominal_ratio": nominal,
                                       "mean_score": mean, "kv_fraction": held, "cells": cells}
            print(f"{name}: {type(press).__name__} generated on {len(cells)} prompts: "
                  f"score {100 * mean:.0f}, KV held {100 * held:.1f}%")
        except Exception as e:  # noqa: BLE001 - every failure is reported, then exit 1
            failed = True
            report["presses"][name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
    if args.out:
        side.save_atomic(args.out, report)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
