#!/usr/bin/env bash
# Runs the fuzz targets one after another, each on one core (niced), until RUNS executions or
# SECS seconds, whichever comes first, then prints one line per target: executions, seconds,
# edges covered (libFuzzer's `cov`), features (`ft`), corpus size, and the outcome. A crash
# stops that target (its input is in <package>/artifacts/<target>/) and the next one starts.
# Packages: model/ (kvplan-runtime's parsers, builds burn) and files/ (the rest, no burn).
#
# Usage (from anywhere): fuzz/run_all.sh [TARGET ...]
# env: RUNS (1000000), SECS (1800), JOBS (1: one process; N: N processes sharing RUNS and the
# corpus, for a machine with N cores to spare — executions are then the sum over the N).
set -uo pipefail
cd "$(dirname "$0")"
RUNS=${RUNS:-1000000}
SECS=${SECS:-1800}
JOBS=${JOBS:-1}
TARGETS=("$@")
if (( ${#TARGETS[@]} == 0 )); then
  TARGETS=(gguf dequant tokenizer chat_template plan profile migrate records prompts archive)
fi
mkdir -p logs
for t in "${TARGETS[@]}"; do
  case $t in
    gguf|dequant|tokenizer|chat_template) pkg=model ;;
    *) pkg=files ;;
  esac
  mkdir -p "corpus/$t" "seeds/$t" "$pkg/artifacts/$t"
  # Built once per package (skipped with NO_BUILD=1), then the binary run directly, so a build
  # of the other package can hold cargo's lock meanwhile.
  if [[ -z ${NO_BUILD:-} ]]; then
    cargo +nightly fuzz build --fuzz-dir "$pkg" -O --debug-assertions "$t" || exit 1
  fi
  bin=${CARGO_TARGET_DIR:-$pkg/target}/x86_64-unknown-linux-gnu/release/$t
  [[ $bin = /* ]] || bin=$PWD/$bin
  if (( JOBS > 1 )); then
    # JOBS processes at once (libFuzzer's -jobs/-workers), RUNS shared between them, one
    # corpus; each writes logs/<target>.jobs/fuzz-<n>.log, and the line below sums them.
    rm -rf "logs/$t.jobs" && mkdir -p "logs/$t.jobs"
    (cd "logs/$t.jobs" && ASAN_OPTIONS=detect_odr_violation=0 nice -n 10 "$bin" \
      -jobs="$JOBS" -workers="$JOBS" -artifact_prefix="$PWD/../../$pkg/artifacts/$t/" \
      -runs=$(( (RUNS + JOBS - 1) / JOBS )) -max_total_time="$SECS" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 ../../corpus/$t ../../seeds/$t >/dev/null 2>&1)
    status=$?
    cat "logs/$t.jobs"/fuzz-*.log >"logs/$t.log"
  else
    ASAN_OPTIONS=detect_odr_violation=0 nice -n 10 "$bin" -artifact_prefix="$pkg/artifacts/$t/" \
      -runs="$RUNS" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "corpus/$t" "seeds/$t" >"logs/$t.log" 2>&1
    status=$?
  fi
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "logs/$t.log" | grep -o '[0-9]*$' |
    awk '{ s += $1 } END { if (NR) print s }')
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "logs/$t.log" | grep -o 'in [0-9]*' |
    grep -o '[0-9]*' | sort -n | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "logs/$t.log" | sort -t: -k2 -n | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  outcome=ok
  (( status != 0 )) && outcome="FAILED (exit $status): $(grep -m1 -E 'panicked|ERROR: ' "logs/$t.log")"
  echo "$t execs=${execs:-?} secs=${secs:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?} $outcome"
done
