#!/usr/bin/env bash
# Kill -9 at random moments of `kvplan profile`, `kvplan eval niah` and `kvplan train-pod` (small
# settings), rerun each until it finishes, and compare what it wrote with an uninterrupted run's
# files, byte for byte after dropping the fields that record wall-clock time, the run's history or
# its folder (`seconds`, `train_wall_s`, `train_tokens_per_s`, `resumed_from`, `weights`), and
# what burn draws at random for every run (parameter ids: `param_ids`, the header of a .bpk
# file, whose tensor data is compared; the optimizer's .mpk state is keyed by them and skipped).
#
# Each command first runs once uninterrupted (its time T). Then rounds: start it, wait a random
# 0..0.8·T seconds (a resumed run is shorter: later moments would mostly miss), kill -9 if it is still running ("a kill landed") and start it again, until one
# run finishes; compare; start the next round from an empty folder, until KILLS kills have landed
# for that command.
#
# Runs from the repository root (the eval and train-pod cases use the committed SmolLM2 plan).
# Usage: tools/kill_resume.sh [KILLS_PER_COMMAND (default 7)] [KVPLAN_BIN]
#   env CASES: which commands (default "profile eval train-pod").
#   KVPLAN_BIN defaults to $CARGO_TARGET_DIR/debug/kvplan, else target/debug/kvplan. The model
#   and data come from the per-user cache (fetched by the first run when missing).
# Prints one line per kill and per comparison, and a summary; exits 1 on any difference.
set -euo pipefail
cd "$(dirname "$0")/.."
KILLS=${1:-7}
BIN=${2:-${CARGO_TARGET_DIR:-target}/debug/kvplan}
BIN=$(realpath "$BIN")
WORK=$(mktemp -d /tmp/kvplan-kill-resume.XXXXXX)
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-1}
echo "binary $BIN, work $WORK, $KILLS kills per command, CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"

# The JSON files below $1, each with the time and history fields dropped, one line per file.
normalise() {
  python3 - "$1" <<'EOF'
import json, os, sys, hashlib
root = sys.argv[1]
DROP = {"seconds", "train_wall_s", "train_tokens_per_s", "resumed_from", "param_ids", "weights"}
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
for dirpath, _, names in sorted(os.walk(root)):
    for n in sorted(names):
        p = os.path.join(dirpath, n)
        rel = os.path.relpath(p, root)
        if n.endswith(".mpk"):
            continue  # optimizer state: entries keyed by burn's random parameter ids
        data = open(p, "rb").read()
        if n.endswith(".bpk"):
            # burnpack: "NRUB", u16 version, u32 header length, header (with the random
            # parameter ids), then the tensor data, compared byte for byte.
            data = data[10 + int.from_bytes(data[6:10], "little"):]
        if n.endswith(".json"):
            data = json.dumps(strip(json.loads(data)), sort_keys=True).encode()
        print(rel, hashlib.sha256(data).hexdigest())
EOF
}

# run_case NAME OUTPUT_DIR_ARG... : the command's arguments, with @OUT@ for its output folder.
run_case() {
  local name=$1; shift
  local ref="$WORK/$name/ref" dir="$WORK/$name/killed"
  mkdir -p "$ref"
  local args=("${@//@OUT@/$ref}")
  local t0=$SECONDS
  "$BIN" "${args[@]}" >"$WORK/$name/ref.log" 2>&1 || {
    echo "$name: the uninterrupted run failed:"; tail -5 "$WORK/$name/ref.log"; exit 1; }
  local t=$(( SECONDS - t0 )); (( t < 2 )) && t=2
  normalise "$ref" >"$WORK/$name/ref.sums"
  echo "$name: uninterrupted run ${t}s, $(wc -l <"$WORK/$name/ref.sums") files"
  local landed=0 rounds=0
  while (( landed < KILLS )); do
    rm -rf "$dir"; mkdir -p "$dir"
    args=("${@//@OUT@/$dir}")
    while true; do
      "$BIN" "${args[@]}" >>"$WORK/$name/killed.log" 2>&1 &
      local pid=$!
      local wait_ms=$(( RANDOM * 800 * t / 32768 ))
      sleep "$(printf '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000)))"
      if kill -9 "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null || true
        landed=$((landed + 1))
        echo "$name: kill $landed at ${wait_ms} ms"
      else
        if ! wait "$pid"; then
          echo "$name: a resumed run failed:"; tail -5 "$WORK/$name/killed.log"; exit 1
        fi
        break
      fi
    done
    rounds=$((rounds + 1))
    normalise "$dir" >"$WORK/$name/killed.sums"
    if ! diff "$WORK/$name/ref.sums" "$WORK/$name/killed.sums"; then
      echo "$name: round $rounds differs from the uninterrupted run ($WORK)"; exit 1
    fi
    echo "$name: round $rounds finished, same files as the uninterrupted run"
  done
  echo "SUMMARY $name: $landed kills in $rounds rounds, every round the same final files"
}

for case in ${CASES:-profile eval train-pod}; do
  case $case in
    profile) run_case profile profile --quick --date 2026-11-20 --no-figures \
      --out @OUT@/p.profile.json --plan-out @OUT@/p.plan.json ;;
    eval) run_case eval eval niah --quick --methods full,snapkv,pyramid --out @OUT@ ;;
    train-pod) run_case train-pod train-pod --plan plans/smollm2-135m-instruct.plan.json \
      --out @OUT@ --seq-len 192 --recent 32 --steps 6 --accum 1 --warmup 1 \
      --checkpoint-every 1 --held-out-tokens 768 --eval-windows 2 ;;
    *) echo "unknown case $case"; exit 2 ;;
  esac
done
echo "all rounds matched; logs in $WORK"
