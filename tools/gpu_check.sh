#!/usr/bin/env bash
# The `cuda` build's checks, in one run on a machine with an NVIDIA GPU and no
# cargo or network: what tools/gpu_pack.sh packed (the cuda `kvplan` binary, the SmolLM2 parity
# test binary, the SmolLM2 GGUF, the profile's text) is unpacked and run; results go to $OUT.
#
#   bash tools/gpu_check.sh PACK_DIR     # PACK_DIR holds {base,bin}.tar.xz.* (tools/gpu_pack.sh)
#
# $OUT gets 8 files at most (the device tool's limit): summary.txt (every step's numbers),
# gen.txt, parity_exact.txt, parity_fast.txt, bench_gpu.json, profile_gpu.{txt,json}, plan_gpu.json.
#
# Steps, most important first, each under its own time limit (a step that runs out is reported
# and the next one runs):
#   (c) warm start: `kvplan generate` twice in two processes with an empty kernel/autotune cache
#       folder ($KVPLAN_CUBECL_CACHE): wall time of each to its answer, and its prefill time;
#   (b) GPU memory: peak `nvidia-smi` memory.used during the first generate (f16 weights, the
#       default) and during the exact parity run (f32 weights), beside kvplan's own weight bytes;
#   (a) the SmolLM2 parity test in exact mode (the default of the tests on the GPU: f32 weights,
#       f64 products, no TF32) and on the fast path (KVPLAN_EXACT=0: f16 weights, TF32), each
#       printing every measured difference against the fixtures;
#   (d) `kvplan bench`: prefill 2K and 8K, decode 32 tokens at a 2K context;
#   (e) `kvplan profile --quick` (profile and plan JSON back in $OUT, compared on the CPU side
#       with tools/compare_profiles.py).
set -u
PACK=${1:?usage: gpu_check.sh PACK_DIR}
OUT=${OUT:-/tmp/kvplan-gpu-out}
K=/tmp/kvplan-gpu
mkdir -p "$OUT" "$K"
export KVPLAN_MODELS=$K/models KVPLAN_DATA=$K/data KVPLAN_CUBECL_CACHE=$K/cubecl
export RUST_BACKTRACE=0
S=$OUT/summary.txt
log() { echo "== $(date +%T) $*" | tee -a "$S"; }
now() { date +%s.%N; }
secs() { python3 -c "print(f'{$2 - $1:.1f}')"; }

# Peak GPU memory (MiB) while a command runs, polled every 0.1 s.
POLL=$K/poll.txt
poll_start() { : >"$POLL"; (while :; do nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >>"$POLL" 2>/dev/null; sleep 0.1; done) & POLLER=$!; }
poll_stop() { kill "$POLLER" 2>/dev/null; wait "$POLLER" 2>/dev/null; sort -n "$POLL" | tail -1; }

log "unpack"
for name in base bin; do
  cat "$PACK/$name".tar.xz.* | python3 -c "import lzma,sys,shutil; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)" | tar xf - -C "$K" || { log "unpack $name failed"; exit 1; }
done
ls -la "$K" "$K/bin" "$K/models" | tee -a "$S"
# The parity test reads its fixtures from the path it was built in.
BUILT_IN=$(cat "$K/bin/built_in")
if [ ! -e "$BUILT_IN/tests/fixtures/smollm2" ]; then mkdir -p "$(dirname "$BUILT_IN")"; ln -sfn "$PWD" "$BUILT_IN"; fi
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee -a "$S"
nvidia-smi | head -4 | tail -2 | tee -a "$S"
nproc | sed 's/^/cpus: /' | tee -a "$S"
BASE=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits)
echo "gpu memory used before: $BASE MiB" | tee -a "$S"
KV=$K/bin/kvplan
PROMPT="Name three rivers of Europe and the seas they flow into."

# (c) + (b): two processes, cold then warm caches.
rm -rf "$KVPLAN_CUBECL_CACHE"
for run in 1 2; do
  log "(c) generate, process $run ($( [ $run = 1 ] && echo empty || echo warm ) cubecl cache)"
  poll_start; t0=$(now)
  timeout 240 "$KV" generate --prompt "$PROMPT" --chat --greedy --max-new-tokens 8 >"$K/gen$run.out" 2>"$K/gen$run.err"
  rc=$?; t1=$(now); peak=$(poll_stop)
  echo "generate $run: rc $rc, wall $(secs "$t0" "$t1") s, peak gpu memory $peak MiB (before: $BASE)" | tee -a "$S"
  grep -h "kvplan:" "$K/gen$run.err" | tee -a "$S"
  echo "answer: $(cat "$K/gen$run.out")" | tee -a "$S"
  { echo "== generate $run"; cat "$K/gen$run.err"; } >>"$OUT/gen.txt"
done
du -sh "$KVPLAN_CUBECL_CACHE" 2>&1 | tee -a "$S"; find "$KVPLAN_CUBECL_CACHE" -maxdepth 3 | head -20 | tee -a "$S"

# (a) + (b): parity, exact mode (f32 weights), memory polled.
log "(a) parity, exact mode"
poll_start; t0=$(now)
timeout 200 "$K/bin/parity_smollm2" --test-threads=1 --nocapture >"$OUT/parity_exact.txt" 2>&1
rc=$?; t1=$(now); peak=$(poll_stop)
echo "parity exact: rc $rc, wall $(secs "$t0" "$t1") s, peak gpu memory $peak MiB" | tee -a "$S"
grep -h "^parity \|test result\|^test " "$OUT/parity_exact.txt" | tee -a "$S"

log "(a) parity, fast path (KVPLAN_EXACT=0: f16 weights, TF32)"
t0=$(now)
KVPLAN_EXACT=0 timeout 150 "$K/bin/parity_smollm2" --test-threads=1 --nocapture >"$OUT/parity_fast.txt" 2>&1
rc=$?; t1=$(now)
echo "parity fast: rc $rc, wall $(secs "$t0" "$t1") s" | tee -a "$S"
grep -h "^parity \|test result\|^test " "$OUT/parity_fast.txt" | tee -a "$S"

# (d) bench.
log "(d) bench"
t0=$(now)
timeout 150 "$KV" bench --prefill 2048,8192 --decode-context 2048 --decode-tokens 32 --repeats 3 --json "$OUT/bench_gpu.json" >"$K/bench_gpu.txt" 2>&1
rc=$?; t1=$(now)
echo "bench: rc $rc, wall $(secs "$t0" "$t1") s" | tee -a "$S"
grep -v "^\s*$" "$K/bench_gpu.txt" | tail -12 | tee -a "$S"

# (e) profile --quick.
log "(e) profile --quick"
t0=$(now)
timeout "${PROFILE_LIMIT:-200}" "$KV" profile --quick --no-figures --date 2026-11-26 --out "$OUT/profile_gpu.json" --plan-out "$OUT/plan_gpu.json" >"$OUT/profile_gpu.txt" 2>&1
rc=$?; t1=$(now)
echo "profile --quick: rc $rc, wall $(secs "$t0" "$t1") s" | tee -a "$S"
tail -5 "$OUT/profile_gpu.txt" | tee -a "$S"
du -sh "$KVPLAN_CUBECL_CACHE" | tee -a "$S"
log "done"
