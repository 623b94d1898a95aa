#!/usr/bin/env bash
# Reproduces the committed evaluation of the shipped model (results/), in the order it was run.
# Every step is resumable: cells already in results/*.records.json are reused, so an interrupted
# run picks up where it stopped. Wall-clock on the 2-core development machine: see README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
kvplan=target/release/kvplan

# NIAH: 2 lengths × 5 depths × 1 needle, every method at budgets 64, 128, 256, 512.
$kvplan eval niah --examples 1
# RULER subset at 4096 tokens, 2 examples per task, budgets 128 and 512; PoD left out (its
# row-by-row host attention makes a 4K prefill cost ~5 min per budget on this CPU).
$kvplan eval ruler --examples 2 --methods full,streaming,h2o,snapkv,pyramid,headkv,headkv-r,treekv,spindle
# Streaming perplexity (TreeKV §5.2): one Gutenberg text, 2048 tokens, budgets 64 and 256.
$kvplan eval ppl --texts winters_tale_gut.txt --budgets 64,256
# PoD post-training (default CPU run), then PoD again with the trained weights.
$kvplan train-pod --report results/pod-train.json --eval-windows 16
$kvplan eval niah --methods full,pod --lengths 1024 --examples 1 \
  --weights runs/pod-train/pod-trained.bpk --out results/pod-trained
