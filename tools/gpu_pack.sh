#!/usr/bin/env bash
# Packs what tools/gpu_check.sh runs on a GPU machine that has no cargo and no network, as two
# xz-compressed tars split into parts of PART_BYTES (default 18 MB) so that each fits a transfer:
# base.tar.xz.NN (the SmolLM2 GGUF and the profile's text, fetched first with `kvplan fetch` and
# `kvplan data fetch` of a CPU build) and bin.tar.xz.NN (the cuda `kvplan` binary and the SmolLM2
# parity test binary, stripped). WHAT (default: both) packs one of them.
#
#   CUDARC_CUDA_VERSION=13000 bash tools/gpu_pack.sh DEST [PART_BYTES] [base|bin]
#
# Run from the repository root. CARGO_TARGET_DIR is honoured. The parity binary reads its
# fixtures from this checkout's path, recorded in bin/built_in (gpu_check.sh links it).
set -euo pipefail
DEST=${1:?usage: gpu_pack.sh DEST [PART_BYTES] [base|bin]}
PART=${2:-18000000}
WHAT=${3:-both}
TARGET=${CARGO_TARGET_DIR:-target}
MODEL=${KVPLAN_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/kvplan/models}/SmolLM2-135M-Instruct.Q4_1.gguf
DATA=${KVPLAN_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/kvplan/data}
for f in "$MODEL" "$DATA/paul_graham/.sha256" "$DATA/shakespeare/.sha256"; do
  [ "$WHAT" = bin ] && break
  [ -e "$f" ] || { echo "missing $f: run \`kvplan fetch\` and \`kvplan data fetch\` first" >&2; exit 1; }
done

mkdir -p "$DEST"
# pack NAME DIR: DIR's contents as DEST/NAME.tar.xz.NN.
pack() {
  rm -f "$DEST/$1".tar.xz.*
  tar cf - -C "$2" . | xz -T0 -6 | split -b "$PART" -d -a 2 - "$DEST/$1.tar.xz."
}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

if [ "$WHAT" != bin ]; then
  mkdir -p "$STAGE/base/models" "$STAGE/base/data"
  cp "$MODEL" "$STAGE/base/models/"
  cp -r "$DATA/paul_graham" "$DATA/shakespeare" "$STAGE/base/data/"
  pack base "$STAGE/base"
fi
if [ "$WHAT" != base ]; then
  cargo build --release --no-default-features --features cuda
  PARITY=$(cargo test --release --no-default-features --features cuda --test parity_smollm2 \
    --no-run --message-format=json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "parity_smollm2":
        print(m["executable"])')
  [ -x "$PARITY" ] || { echo "no parity_smollm2 test binary" >&2; exit 1; }
  mkdir -p "$STAGE/bin/bin"
  cp "$TARGET/release/kvplan" "$STAGE/bin/bin/kvplan"
  cp "$PARITY" "$STAGE/bin/bin/parity_smollm2"
  strip "$STAGE/bin/bin/kvplan" "$STAGE/bin/bin/parity_smollm2"
  pwd >"$STAGE/bin/bin/built_in"
  pack bin "$STAGE/bin"
fi
ls -l "$DEST"
