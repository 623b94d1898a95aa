#!/usr/bin/env bash
# Runs `kvplan bench` and the transformers baseline back to back, twice, alternating, so the
# ratio is measured in one session on the same machine state. Needs the /tmp/ref venv
# (see tools/bench_transformers.py) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-${KVPLAN_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/kvplan/models}/SmolLM2-135M-Instruct.Q4_1.gguf}
py=${PYTHON:-/tmp/ref/bin/python}
for round in 1 2; do
  echo "== round $round: kvplan"
  ./target/release/kvplan bench --model "$model"
  echo "== round $round: transformers"
  "$py" tools/bench_transformers.py "$model"
done
