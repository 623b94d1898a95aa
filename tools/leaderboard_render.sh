#!/usr/bin/env bash
# Renders one model's kvpress-leaderboard run from its shard files, no model needed:
#   tools/leaderboard_render.sh MODEL [LENGTH]      (MODEL: smollm2-135m-instruct, …; LENGTH 4096)
# In results/v3/MODEL/leaderboard-LENGTH/: merges the shard files (`kvplan eval merge`) into
# <Model>.ruler.records.json, renders its RULER table (`kvplan eval table`, kvpress's records
# beside it join), and the boards (`kvplan eval leaderboard`), each on the prompts every one of
# its rows holds (`--common-prompts`: a prompt the queues are still running is left out until its
# last cell lands): `board/` with kvplan's methods and, where kvpress's records are there,
# `board-with-kvpress/` with its presses too (DuoAttention when the file holds it; KVzip left out
# while it covers fewer prompts than the rest: KVZIP=1 keeps it; VERSUS=METHOD sets its second Δ
# column: DuoAttention where the file holds it, else SnapKV; ALSO_VERSUS=A,B: one more table
# each in board-with-kvpress/, named leaderboard-vs- and the press, AdaKV-ExpectedAttention's
# by default); and `duo-settings/` where kvpress's file holds DuoAttention as evaluate.py sets
# it (`duo-board`); and `kvzip/` (0.25–0.75) and `kvzip-0.875/` wherever KVzip's cells are
# (its own run's shards in kvzip-cpu/, or kvpress's file once they are merged into it). kvpress's FullKV and SnapKV are the checks of the protocol ("a press
# both have runs once in each as a check, then from one side"): the table shows them beside
# kvplan's on the prompts both ran, the board has kvplan's alone (CHECKS=1 puts kvpress's SnapKV
# on the board too, on the prompts it covers). AdaKV-ExpectedAttention is the registry's
# `expected_attention` (epsilon 1e-2, `adakv-expected-e2`); its epsilon-0 run (`adakv-expected`,
# the first prompts only) stays in the table. Safe while the queues run: it reads the shard files
# (each written whole, by rename) and writes only the merged file, tables and boards.
main() {
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
kvplan=${KVPLAN:-$repo/target/release/kvplan}
model=${1:?usage: tools/leaderboard_render.sh MODEL [LENGTH]}
len=${2:-4096}
dir="$repo/results/v3/$model/leaderboard-$len"
source "$repo/tools/methods.sh"
methods=$KVPLAN_METHODS
presses="kvpress-expected,kvpress-adakv-expected-e2,kvpress-keydiff"
# The kvpress board's second Δ column: DuoAttention when the file holds it (kvpress's strongest
# press on both committed boards), else `eval leaderboard`'s own (SnapKV); ALSO_VERSUS: further
# presses, one table each.
versus=${VERSUS:-}
ALSO_VERSUS=${ALSO_VERSUS-kvpress-adakv-expected-e2}
[ -n "${CHECKS:-}" ] && presses="kvpress-snapkv,$presses"
[ -n "${KVZIP:-}" ] && presses+=",kvpress-kvzip"
shopt -s nullglob
shards=("$dir"/*.ruler.shard-*-of-*.records.json)
if [ ${#shards[@]} -eq 0 ]; then
  echo "tools/leaderboard_render.sh: no shard files (*.ruler.shard-i-of-n.records.json) in $dir" >&2
  exit 2
fi
# The merged file is the shards' product: merged afresh beside it, then renamed over it (`eval
# merge` will not overwrite a file it was not given).
tmp=$(mktemp -d "$dir/.merge.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$kvplan" eval merge "${shards[@]}" --out "$tmp"
fresh=("$tmp"/*.ruler.records.json)
mv -f "${fresh[0]}" "$dir/"
merged="$dir/$(basename "${fresh[0]}")"
"$kvplan" eval table "$merged"
rm -f "$dir"/*.shard-*.md "$dir"/*.shard-*.results.json
rm -rf "$dir/board"
"$kvplan" eval leaderboard "$merged" --methods "$methods" --common-prompts --out "$dir/board"
kvpress=("$dir"/*.ruler.kvpress.records.json)
if [ ${#kvpress[@]} -gt 0 ]; then
  # DuoAttention on the fly (the CPU run's, `--shared-prefill`) when the file holds it.
  if grep -q '"method": "kvpress-duo"' "${kvpress[0]}"; then
    presses+=",kvpress-duo"
    versus=${versus:-kvpress-duo}
  fi
  rm -rf "$dir/board-with-kvpress"
  "$kvplan" eval leaderboard "$merged" --methods "$methods,$presses" --common-prompts \
    ${versus:+--versus "$versus"} --out "$dir/board-with-kvpress"
  # The same board's table against each other press of ALSO_VERSUS (its Δ column and Holm
  # family change with the press; folders and figures are the board's own, not rewritten).
  for v in ${ALSO_VERSUS//,/ }; do
    grep -q "\"method\": \"$v\"" "${kvpress[0]}" || continue
    "$kvplan" eval leaderboard "$merged" --methods "$methods,$presses" --common-prompts \
      --versus "$v" --out "$tmp/vs-$v" > /dev/null
    mv -f "$tmp/vs-$v/leaderboard.md" "$dir/board-with-kvpress/leaderboard-vs-$v.md"
  done
  # DuoAttention as the leaderboard's evaluate.py sets it (`duo-board`: head_compression_ratio =
  # the ratio), beside kvplan's per-prompt setting, on the prompts it was run on.
  if grep -q '"method": "kvpress-duo-board"' "${kvpress[0]}"; then
    rm -rf "$dir/duo-settings"
    "$kvplan" eval leaderboard "$merged" --methods full,headkv,kvpress-duo,kvpress-duo-board \
      --common-prompts --versus kvpress-duo --out "$dir/duo-settings"
  fi
  # KVzip, run apart (`--presses kvzip`: its scores shared by a prompt's ratios, a setting of
  # its own) into kvzip-cpu/ shard files: joined with kvpress's file in a scratch folder and
  # drawn on the prompts it covers, beside FullKV, SnapKV, kvplan's per-head plans, TOVA and
  # kvpress's strongest presses (`kvzip/`, the second Δ column against KVzip). Once KVzip covers
  # every prompt its shards are merged into kvpress's file (`kvpress_side_by_side.sh --merge`):
  # `kvzip/` and `kvzip-0.875/` are then drawn from that file, and KVZIP=1 puts it on the board.
  kvzip=("$dir"/kvzip-cpu/*.ruler.kvpress*.records.json)
  merged_kvzip=$(grep -q '"method": "kvpress-kvzip"' "${kvpress[0]}" && echo yes || true)
  if [ ${#kvzip[@]} -gt 0 ] || [ -n "$merged_kvzip" ]; then
    mkdir "$tmp/kvzip"
    ln -s "$merged" "$tmp/kvzip/"
    if [ -n "$merged_kvzip" ]; then
      # Already joined into kvpress's file (`--merge`, once it covered every prompt).
      ln -s "${kvpress[0]}" "$tmp/kvzip/"
      kvzip=("${kvpress[0]}")
    else
      python3 "$repo/tools/kvpress_side_by_side.py" --merge "${kvpress[0]}" "${kvzip[@]}" \
        --out "$tmp/kvzip/$(basename "${kvpress[0]}")" > /dev/null
    fi
    kvzip_presses=kvpress-kvzip
    for p in kvpress-duo kvpress-adakv-expected-e2; do
      if grep -q "\"method\": \"$p\"" "${kvpress[0]}"; then kvzip_presses+=",$p"; fi
    done
    # The board's three ratios on the prompts all of them cover; the fourth (0.875, run later,
    # on fewer prompts while it runs) on its own prompts in kvzip-0.875/.
    rm -rf "$dir/kvzip" "$dir/kvzip-0.875"
    "$kvplan" eval leaderboard "$tmp/kvzip/$(basename "$merged")" \
      --methods "full,snapkv,headkv,headkv-r,tova,$kvzip_presses" --common-prompts \
      --ratios 0.25,0.5,0.75 --versus kvpress-kvzip --out "$dir/kvzip"
    if grep -q '"target": 0.875' "${kvzip[@]}"; then
      "$kvplan" eval leaderboard "$tmp/kvzip/$(basename "$merged")" \
        --methods "full,snapkv,headkv,headkv-r,tova,$kvzip_presses" --common-prompts \
        --ratios 0.875 --versus kvpress-kvzip --out "$dir/kvzip-0.875"
    fi
  fi
fi
}
main "$@"; exit
