#!/usr/bin/env bash
# The evaluation protocol v3's runs (results/v3/), by name, one shard after another, each resumable (a killed shard re-run skips
# the records it already holds) and each into its own folder (two shards never share a records
# file, so two queues can run side by side on separate cores):
#
#   KVPLAN=/path/to/kvplan MODEL=smollm2-135m-instruct tools/protocol_v3.sh SHARD...
#
# Shards (SmolLM2 defaults; every shard 50 distinct needles per (length), seed 0 unless named):
#   beta-select-L   β of eq. 4 swept over the HeadKV paper's values (§4.1) on the held-out seed 1
#   main-MODE-L     every method at 128 and 512, plus the permuted-score controls, seed 0
#   beta-report-L   the β sweep on seed 0 (reported; chosen on beta-select only), into main-qe-L
#                   so that its rows pair with SnapKV's and FullKV's on the same prompts
#   reductions-L    the engines' reductions of HeadKV-R and PyramidKV (docs/exports.md), into main-qe-L
#   pod-trained-MODE-L  PoD with `kvplan train-pod` weights (WEIGHTS=…/pod-trained.bpk) at the
#                   budget of its trained window (n_s + n_r = 128), FullKV and SnapKV under the same
#                   weights, and SnapKV at PoD's measured bytes (SNAPKV_AT_POD_BYTES entries;
#                   SmolLM2's at 1,024 tokens by default: 899 question-end, 855 question-agnostic,
#                   where the appended question counts too) under both weights (the shipped
#                   weights' rows, with FullKV, into pod-bytes-MODE-L: a row added to main-MODE-L
#                   would change the Holm family of its table)
#   leaderboard-L   the kvpress leaderboard's protocol — RULER's 13 tasks at L tokens,
#                   question-agnostic, every method at compression ratios 0.25, 0.5 and 0.75
#                   (EXAMPLES per task, default 20; examples are seeded by index, so EXAMPLES=4
#                   first and 20 later resumes them); POD_RATIOS=0.75 runs PoD at those ratios
#                   only (after the other methods), for a model whose PoD saves almost nothing at
#                   any budget (Qwen: 0.5–1.6%); SHARD=i/n as for ruler-qe
#   ruler-qe-L      RULER's tasks at L tokens, 20 examples each, every method at 128 and 512; a task
#                   that cannot fit L is left out by `eval ruler` (qa_2 at 2,048: one prompt needs 2,167);
#                   SHARD=i/n runs one shard of its prompts (one queue per core, then
#                   `kvplan eval merge` the shard files — and the unsharded file when a run was
#                   split part way: each shard file then starts as a copy of it)
# MODE: qe (question-end, question-aware) | qa (question-agnostic); L: 1024 | 2048.
# Output: results/v3/<model>/<shard>/ (beta-report, reductions: main-qe-L/) ; merge tables with `kvplan eval table RECORDS…`.
#
# The whole script is one function, read before anything runs, and the line that calls it exits
# too, so editing this file while a queue runs cannot change what the running queue does next
# (with the call and `exit` on two lines, bash read the line after the call from the edited file
# at the old offset once the queue was done). Edit it by writing a new file and renaming it over
# this one, as editors and git do: a running queue keeps reading the file it opened.
main() {
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
kvplan=${KVPLAN:-$repo/target/release/kvplan}
model=${MODEL:-smollm2-135m-instruct}
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-1}
source "$repo/tools/methods.sh"
methods=$KVPLAN_METHODS
# The 50 needles of every NIAH shard: ten per depth.
needles=(--depths 0,0.25,0.5,0.75,1 --examples 10)
perms="headkv@perm1,headkv@perm2,headkv@perm3,headkv@perm4,headkv@perm5"
betas=""
for b in 1.005 1.01 1.1 1.2 1.5 2 5 10; do betas+="headkv@beta$b,headkv-r@beta$b,"; done
betas=${betas%,}
reductions=""
for e in vllm trtllm trtllm-engine; do reductions+="$e:headkv-r,$e:pyramid,"; done
reductions=${reductions%,}
pod_trained() { # pod-trained-MODE-L
  local shard=$1 len=$2 mode=${1#pod-trained-}
  mode=${mode%-*}
  local weights=${WEIGHTS:?pod-trained needs WEIGHTS=path/to/pod-trained.bpk (kvplan train-pod)}
  local bytes how
  case "$mode" in
    qe) how=(--window question-end); bytes=${SNAPKV_AT_POD_BYTES:-899} ;;
    qa) how=(--mode question-agnostic); bytes=${SNAPKV_AT_POD_BYTES:-855} ;;
    *) echo "unknown mode in $shard" >&2; exit 2 ;;
  esac
  local out="$repo/results/v3/$model/$shard" main="$repo/results/v3/$model/pod-bytes-$mode-$len"
  local grid=(--model "$model" --lengths "$len" "${needles[@]}" --seed 0 --no-figures "${how[@]}")
  mkdir -p "$out" "$main"
  echo "== $(date -u +%FT%TZ) $shard → $out"
  "$kvplan" eval niah "${grid[@]}" --weights "$weights" --methods full,snapkv,pod --budgets 128 --out "$out"
  "$kvplan" eval niah "${grid[@]}" --weights "$weights" --methods snapkv --budgets "$bytes" --out "$out"
  "$kvplan" eval niah "${grid[@]}" --methods full,snapkv --budgets "$bytes" --out "$main"
  echo "== $(date -u +%FT%TZ) $shard done"
}
for shard in "$@"; do
  len=${shard##*-}
  case "$shard" in
    beta-select-*) args=(--methods "full,snapkv,$betas" --budgets 128 --seed 1 --window question-end) ;;
    beta-report-*) args=(--methods "$betas" --budgets 128 --seed 0 --window question-end) ;;
    main-qe-*) args=(--methods "$methods,$perms" --budgets 128,512 --seed 0 --window question-end) ;;
    main-qa-*) args=(--methods "$methods,$perms" --budgets 128,512 --seed 0 --mode question-agnostic) ;;
    reductions-*) args=(--methods "$reductions" --budgets 128,512 --seed 0 --window question-end) ;;
    pod-trained-*) pod_trained "$shard" "$len"; continue ;;
    leaderboard-*)
      out="$repo/results/v3/$model/$shard"
      mkdir -p "$out"
      echo "== $(date -u +%FT%TZ) $shard → $out"
      lb=(--model "$model" --length "$len" --examples "${EXAMPLES:-20}" --mode question-agnostic
        --no-figures --out "$out" ${SHARD:+--shard "$SHARD"})
      if [ -n "${POD_RATIOS:-}" ]; then
        "$kvplan" eval ruler "${lb[@]}" --ratios 0.25,0.5,0.75 --methods "${methods/,pod,/,}"
        "$kvplan" eval ruler "${lb[@]}" --ratios "$POD_RATIOS" --methods full,pod
      else
        "$kvplan" eval ruler "${lb[@]}" --ratios 0.25,0.5,0.75 --methods "$methods"
      fi
      echo "== $(date -u +%FT%TZ) $shard done"
      continue ;;
    ruler-qe-*)
      out="$repo/results/v3/$model/$shard"
      mkdir -p "$out"
      echo "== $(date -u +%FT%TZ) $shard → $out"
      # Every task; one that cannot fit the length is left out by `eval ruler`, which says so
      # (qa_2 at 2,048 tokens: one of its 20 HotpotQA questions needs 2,167).
      "$kvplan" eval ruler --model "$model" --length "$len" --examples 20 --budgets 128,512 \
        --window question-end --methods "$methods" --no-figures --out "$out" \
        ${SHARD:+--shard "$SHARD"}
      echo "== $(date -u +%FT%TZ) $shard done"
      continue ;;
    *) echo "unknown shard $shard" >&2; exit 2 ;;
  esac
  out="$repo/results/v3/$model/$shard"
  case "$shard" in reductions-* | beta-report-*) out="$repo/results/v3/$model/main-qe-$len" ;; esac
  mkdir -p "$out"
  echo "== $(date -u +%FT%TZ) $shard → $out"
  "$kvplan" eval niah --model "$model" --lengths "$len" "${needles[@]}" --no-figures --out "$out" \
    "${args[@]}"
  echo "== $(date -u +%FT%TZ) $shard done"
done
}
main "$@"; exit
