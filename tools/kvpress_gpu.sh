#!/usr/bin/env bash
# kvpress's presses on an NVIDIA GPU machine without network or cargo: the kvpress leaderboard protocol's
# presses for one model, which would take days on the 2-core CPU (a 4K RULER cell with a
# 128-token answer: 163 s there). Runs `tools/kvpress_side_by_side.py` in SHARDS processes side
# by side on one GPU (float32, TF32 off), each for at most SECONDS, then merges what they
# recorded into `$OUT/<model>.ruler.kvpress.records.json` (resumable: the same command with
# that file in PACK skips its cells).
#
#   tools/kvpress_gpu.sh pack PACK PROMPTS.json GGUF [RECORDS]  # here, with network: make PACK
#   tools/kvpress_gpu.sh check PACK                     # there: wheels install, kvpress imports, GPU
#   tools/kvpress_gpu.sh run PACK SHARDS SECONDS PRESSES RATIOS   # there
#   (SHARED=1 before `run`: each shard prefills a prompt's context once for all its presses,
#   `--shared-prefill`; its records' settings say so, so such a file resumes only under SHARED=1;
#   CHECK_SHARED=N has shard 1 first compare the replayed caches with live prefills on N prompts)
#
# Getting PACK there: the device tool sends the checkout's tracked files with every call (85 MB in
# 2026-11, over its 64 MiB) plus the carried folders, so (1) stop anything writing tracked files
# (the evidence queue writes results/), (2) `git sparse-checkout set --no-cone '/tools/'` (the
# device needs tools/ alone; `git sparse-checkout disable` after), (3) `pack` writes PACK/c1,
# PACK/c2, ... each under PART_MIB (default 56) MiB, PACK inside the checkout in a folder
# `.git/info/exclude` ignores, and (4) one call per folder, back to back (the machine goes back
# after 30 s idle): each carries its folder and copies it into /tmp/pack on the device (a carried
# folder not carried again is removed there); the first also runs `check /tmp/pack`, the last
# `run /tmp/pack …`. PACK/calls.txt lists the commands. Records come back in $OUT.
#
# PACK, flat once copied together on the device:
#   whl/       wheels for Python 3.12 that the GPU image lacks or holds in versions kvpress 0.5.5
#              refuses: transformers 5.2.0, tokenizers 0.22.2, kvpress 0.5.5, gguf 0.19.0,
#              cachetools 5.5.2 (pip download --no-deps --only-binary=:all: --python-version 3.12)
#   part00, part01, ...   the GGUF cut in pieces (raw: xz saves ~3% on quantised weights)
#   gguf.sha256            its SHA-256 (checked after joining)
#   prompts.json.xz        `kvplan eval ruler … --export-prompts`, `xz -9`
#   stub/      stand-ins for `datasets` and `fire`, which kvpress imports at module level for
#              what these runs do not use (BookSum from the hub, a CLI)
#   duo-data/shakespeare/  DuoAttention on the fly's calibration texts (the side-by-side
#              script's stand-in for BookSum), cut to the characters it reads
#   *.kvpress.records.json an earlier run's merged records, if given (its cells are skipped;
#              only on the GPU it was made on — its settings name the card — so name that kind
#              in the device calls: SmolLM2's file is an H100's, Qwen's an H200's)
set -uo pipefail
cmd=${1:?pack, check or run}
pack=${2:?PACK}
if [ "$cmd" = pack ]; then
  prompts=${3:?PROMPTS.json} gguf=${4:?GGUF} records=${5:-}
  [ -e "$pack" ] && { echo "$pack exists; give a new folder" >&2; exit 2; }
  flat="$pack/flat"
  mkdir -p "$flat/whl" "$flat/stub/datasets" "$flat/stub/fire"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$flat/whl" transformers==5.2.0 tokenizers==0.22.2 \
    kvpress==0.5.5 gguf==0.19.0 cachetools==5.5.2 || exit 1
  printf '%s\n' '"""Stand-in: kvpress imports load_dataset at module level; these runs never call it."""' \
    'def load_dataset(*args, **kwargs):' \
    '    raise RuntimeError("datasets is not installed here (offline GPU run)")' \
    > "$flat/stub/datasets/__init__.py"
  printf '%s\n' '"""Stand-in: kvpress imports fire (a CLI helper) at module level, unused here."""' \
    'def Fire(*args, **kwargs):' '    raise RuntimeError("fire is not installed here")' \
    > "$flat/stub/fire/__init__.py"
  sha256sum "$gguf" | cut -c1-64 > "$flat/gguf.sha256"
  xz -9 -c "$prompts" > "$flat/prompts.json.xz"
  [ -n "$records" ] && cp "$records" "$flat/"
  # DuoAttention on the fly's calibration texts (kvpress_side_by_side.py's stand-in for BookSum),
  # cut to what it reads: duo-data/shakespeare/*.txt.
  python3 - "$(dirname "$0")/kvpress_side_by_side.py" "${KVPLAN_DATA:-$HOME/.cache/kvplan/data}" \
    "$flat/duo-data" <<'PY' || exit 1
import importlib.util, pathlib, sys
spec = importlib.util.spec_from_file_location("side", sys.argv[1])
side = importlib.util.module_from_spec(spec)
spec.loader.exec_module(side)
src, dst = pathlib.Path(sys.argv[2]) / "shakespeare", pathlib.Path(sys.argv[3]) / "shakespeare"
dst.mkdir(parents=True)
for f in sorted(src.glob("*.txt")):
    (dst / f.name).write_text(side.duo_text(f), encoding="utf-8")
PY
  # Calls: the first takes everything but the model and the model's first piece, so that it
  # stays under PART_MIB; the rest take one PART_MIB piece each.
  limit=$(( ${PART_MIB:-56} * 1024 * 1024 ))
  small=$(du -sb "$flat" | cut -f1)
  first=$(( limit - small ))
  [ "$first" -gt 0 ] || { echo "the pack's small files ($small bytes) leave no room under PART_MIB" >&2; exit 2; }
  size=$(stat -c %s "$gguf")
  mkdir -p "$pack/c1"
  mv "$flat"/* "$pack/c1/" && rmdir "$flat"
  head -c "$first" "$gguf" > "$pack/c1/part00"
  n=1 off=$first
  while [ "$off" -lt "$size" ]; do
    n=$((n + 1))
    mkdir -p "$pack/c$n"
    tail -c +$((off + 1)) "$gguf" | head -c "$limit" > "$pack/c$n/$(printf 'part%02d' $((n - 1)))"
    off=$((off + limit))
  done
  rel=${pack#"$(git rev-parse --show-toplevel)/"}
  {
    for i in $(seq 1 "$n"); do
      line="carry [\"$rel/c$i\"]: mkdir -p /tmp/pack && cp -r $rel/c$i/. /tmp/pack/ && ls /tmp/pack | wc -l"
      [ "$i" = 1 ] && line="$line && bash tools/kvpress_gpu.sh check /tmp/pack"
      [ "$i" = "$n" ] && line="$line && bash tools/kvpress_gpu.sh run /tmp/pack SHARDS SECONDS PRESSES RATIOS"
      echo "$line"
    done
  } > "$pack/calls.txt"
  du -sh "$pack"/c*
  cat "$pack/calls.txt"
  exit 0
fi
out=${OUT:-/tmp/kvpress-gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$pack"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$(realpath "$pack/stub" 2>/dev/null || echo /nonexistent)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TQDM_DISABLE=1 PYTHONUNBUFFERED=1
nvidia-smi -L
lscpu | grep -m1 "Model name"
python3 -c "import torch, transformers, kvpress, gguf; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, '| kvpress ok | gguf ok')" || exit 1
# An earlier records file resumes only on the GPU it was made on (its settings name the card,
# and a shard refuses records made under other settings): say so before any shard starts.
earlier=$(ls "$pack"/*.kvpress.records.json 2>/dev/null | head -n 1)
if [ -n "$earlier" ]; then
  python3 - "$earlier" <<'PY' || exit 1
import json, sys, torch
made = json.load(open(sys.argv[1]))["settings"].get("kvpress_attention", "")
here = torch.cuda.get_device_name(0)
if here not in made:
    sys.exit(f"{sys.argv[1]} was made on another GPU ({made}); this one is {here}: run on the "
             "same kind (name it in the device call), or leave the file out and start a new one")
print(f"earlier records: {sys.argv[1]} (made on {here}, resumable here)")
PY
fi
[ "$cmd" = check ] && exit 0

shards=${3:?SHARDS} seconds=${4:?SECONDS} presses=${5:?PRESSES} ratios=${6:?RATIOS}
mkdir -p /tmp/m /tmp/shards
python3 - "$pack" <<'EOF' || exit 1
import glob, hashlib, json, lzma, sys
pack = sys.argv[1]
parts = sorted(glob.glob(f"{pack}/part[0-9][0-9]"))
h = hashlib.sha256()
with open("/tmp/m/model.gguf", "wb") as out:
    for p in parts:
        data = open(p, "rb").read()
        h.update(data)
        out.write(data)
want = open(f"{pack}/gguf.sha256").read().split()[0]
got = h.hexdigest()
if got != want:
    sys.exit(f"GGUF from {len(parts)} pieces: SHA-256 {got}, expected {want} (a piece missing?)")
prompts = json.loads(lzma.decompress(open(f"{pack}/prompts.json.xz", "rb").read()))
open("/tmp/m/model.gguf.sha256", "w").write(f"{got}  model.gguf\n")
json.dump(prompts, open("/tmp/prompts.json", "w"))
print(f"GGUF from {len(parts)} pieces, SHA-256 ok; {len(prompts['prompts'])} prompts")
EOF
model=$(python3 -c "import json; print(json.load(open('/tmp/prompts.json'))['model'])")
# Cells already recorded (an earlier run's merged file, in PACK) are skipped: each
# shard starts from a copy of it.
for i in $(seq 1 "$shards"); do
  [ -n "$earlier" ] && cp "$earlier" "/tmp/shards/$model.ruler.kvpress.shard-$i-of-$shards.records.json"
done
for i in $(seq 1 "$shards"); do
  check=()
  [ -n "${SHARED:-}" ] && [ -n "${CHECK_SHARED:-}" ] && [ "$i" = 1 ] && check=(--check-shared "$CHECK_SHARED")
  timeout "$seconds" python3 tools/kvpress_side_by_side.py /tmp/prompts.json --mode agnostic \
    --ratios "$ratios" --presses "$presses" --device cuda --threads 1 --shard "$i/$shards" \
    --models /tmp/m --data "$pack/duo-data" ${SHARED:+--shared-prefill} "${check[@]}" --out /tmp/shards \
    > "/tmp/shards/log$i.txt" 2>&1 &
done
wait
ls /tmp/shards/*.records.json >/dev/null 2>&1 || { tail -n 20 /tmp/shards/log*.txt; exit 1; }
python3 tools/kvpress_side_by_side.py --merge /tmp/shards/*.records.json \
  --out "$out/$model.ruler.kvpress.records.json"
for f in /tmp/shards/log*.txt; do echo "== $f"; head -n 2 "$f"; tail -n 2 "$f"; done > "$out/logs.txt"
tail -n 40 "$out/logs.txt"
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
