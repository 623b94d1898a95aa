#!/usr/bin/env bash
# kvpress's presses on an NVIDIA GPU machine without network or cargo: the leaderboard's side of
# issue 30 for one model, which would take days on the 2-core CPU (a 4K RULER cell with a
# 128-token answer: 163 s there). Runs `tools/kvpress_side_by_side.py` in SHARDS processes side
# by side on one GPU (float32, TF32 off), each for at most SECONDS, then merges what they
# recorded into `$OUT/<model>.ruler.kvpress.records.json` (resumable: the same command with
# that file in PACK/b/ skips its cells).
#
#   tools/kvpress_gpu.sh pack PACK PROMPTS.json GGUF [RECORDS]  # here, with network: make PACK
#   tools/kvpress_gpu.sh check PACK                     # there: wheels install, kvpress imports, GPU
#   tools/kvpress_gpu.sh run PACK SHARDS SECONDS PRESSES RATIOS   # there
#
# Getting PACK there (the device tool sends the checkout's tracked files with every call, 61 MB
# of its 64 MiB in 2026-11): `git sparse-checkout set --no-cone '/*' '!/results/'
# '!/tests/fixtures/' '!/plans/figures/' '!/plots/assets/'` (about 7 MiB travel), PACK inside the
# checkout in a folder `.git/info/exclude` ignores; one call carrying PACK/a that copies it to
# /tmp/pack on the device (a carried folder not carried again is removed there), then one
# carrying PACK/b that copies it beside and runs `run /tmp/pack …`; `git sparse-checkout
# disable` after. Records come back in $OUT.
#
# PACK (made by `pack`, on a machine with network, in two parts under the device's size limit):
#   a/whl/    wheels for Python 3.12 that the GPU image lacks or holds in versions kvpress 0.5.5
#             refuses: transformers 5.2.0, tokenizers 0.22.2, kvpress 0.5.5, gguf 0.19.0,
#             cachetools 5.5.2 (pip download --no-deps --only-binary=:all: --python-version 3.12)
#   a/part1, b/part2   the GGUF, `xz -9`, split in two (`head -c` / `tail -c`)
#   b/gguf.sha256      its SHA-256 (checked after unpacking)
#   b/prompts.json.xz  `kvplan eval ruler … --export-prompts`, `xz -9`
#   a/stub/   stand-ins for `datasets` and `fire`, which kvpress imports at module level for
#             what these runs do not use (BookSum from the hub, a CLI)
#   b/duo-data/shakespeare/  DuoAttention on the fly's calibration texts (the side-by-side
#             script's stand-in for BookSum), cut to the characters it reads
set -uo pipefail
cmd=${1:?pack, check or run}
pack=${2:?PACK}
if [ "$cmd" = pack ]; then
  prompts=${3:?PROMPTS.json} gguf=${4:?GGUF} records=${5:-}
  [ -e "$pack" ] && { echo "$pack exists; give a new folder" >&2; exit 2; }
  mkdir -p "$pack/a/whl" "$pack/a/stub/datasets" "$pack/a/stub/fire" "$pack/b"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$pack/a/whl" transformers==5.2.0 tokenizers==0.22.2 \
    kvpress==0.5.5 gguf==0.19.0 cachetools==5.5.2 || exit 1
  printf '%s\n' '"""Stand-in: kvpress imports load_dataset at module level; these runs never call it."""' \
    'def load_dataset(*args, **kwargs):' \
    '    raise RuntimeError("datasets is not installed here (offline GPU run)")' \
    > "$pack/a/stub/datasets/__init__.py"
  printf '%s\n' '"""Stand-in: kvpress imports fire (a CLI helper) at module level, unused here."""' \
    'def Fire(*args, **kwargs):' '    raise RuntimeError("fire is not installed here")' \
    > "$pack/a/stub/fire/__init__.py"
  xz -9 -T0 -c "$gguf" > "$pack/model.xz" || exit 1
  half=$(( $(stat -c %s "$pack/model.xz") * 45 / 100 ))
  head -c "$half" "$pack/model.xz" > "$pack/a/part1"
  tail -c +$((half + 1)) "$pack/model.xz" > "$pack/b/part2"
  rm "$pack/model.xz"
  sha256sum "$gguf" | cut -c1-64 > "$pack/b/gguf.sha256"
  xz -9 -c "$prompts" > "$pack/b/prompts.json.xz"
  [ -n "$records" ] && cp "$records" "$pack/b/"
  # DuoAttention on the fly's calibration texts (kvpress_side_by_side.py's stand-in for BookSum),
  # cut to what it reads: b/duo-data/shakespeare/*.txt.
  python3 - "$(dirname "$0")/kvpress_side_by_side.py" "${KVPLAN_DATA:-$HOME/.cache/kvplan/data}" \
    "$pack/b/duo-data" <<'PY' || exit 1
import importlib.util, pathlib, sys
spec = importlib.util.spec_from_file_location("side", sys.argv[1])
side = importlib.util.module_from_spec(spec)
spec.loader.exec_module(side)
src, dst = pathlib.Path(sys.argv[2]) / "shakespeare", pathlib.Path(sys.argv[3]) / "shakespeare"
dst.mkdir(parents=True)
for f in sorted(src.glob("*.txt")):
    (dst / f.name).write_text(side.duo_text(f), encoding="utf-8")
PY
  du -sh "$pack/a" "$pack/b"
  exit 0
fi
out=${OUT:-/tmp/kvpress-gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$pack"/a/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$(realpath "$pack/a/stub" 2>/dev/null || echo /nonexistent)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TQDM_DISABLE=1 PYTHONUNBUFFERED=1
nvidia-smi -L
lscpu | grep -m1 "Model name"
python3 -c "import torch, transformers, kvpress, gguf; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, '| kvpress ok | gguf ok')" || exit 1
[ "$cmd" = check ] && exit 0

shards=${3:?SHARDS} seconds=${4:?SECONDS} presses=${5:?PRESSES} ratios=${6:?RATIOS}
mkdir -p /tmp/m /tmp/shards
python3 - "$pack" <<'EOF' || exit 1
import lzma, sys, json, hashlib
pack = sys.argv[1]
raw = lzma.decompress(open(f"{pack}/a/part1", "rb").read() + open(f"{pack}/b/part2", "rb").read())
want = open(f"{pack}/b/gguf.sha256").read().split()[0]
got = hashlib.sha256(raw).hexdigest()
if got != want:
    sys.exit(f"GGUF SHA-256 {got}, expected {want}")
prompts = json.loads(lzma.decompress(open(f"{pack}/b/prompts.json.xz", "rb").read()))
name = "model.gguf"
open(f"/tmp/m/{name}", "wb").write(raw)
open(f"/tmp/m/{name}.sha256", "w").write(f"{got}  {name}\n")
json.dump(prompts, open("/tmp/prompts.json", "w"))
print(f"GGUF {len(raw)} bytes, SHA-256 ok; {len(prompts['prompts'])} prompts")
EOF
model=$(python3 -c "import json; print(json.load(open('/tmp/prompts.json'))['model'])")
# Cells already recorded (an earlier run's merged file, carried in PACK/b/) are skipped: each
# shard starts from a copy of it.
earlier=$(ls "$pack"/b/*.kvpress.records.json 2>/dev/null | head -n 1)
for i in $(seq 1 "$shards"); do
  [ -n "$earlier" ] && cp "$earlier" "/tmp/shards/$model.ruler.kvpress.shard-$i-of-$shards.records.json"
done
for i in $(seq 1 "$shards"); do
  timeout "$seconds" python3 tools/kvpress_side_by_side.py /tmp/prompts.json --mode agnostic \
    --ratios "$ratios" --presses "$presses" --device cuda --threads 1 --shard "$i/$shards" \
    --models /tmp/m --data "$pack/b/duo-data" --out /tmp/shards > "/tmp/shards/log$i.txt" 2>&1 &
done
wait
ls /tmp/shards/*.records.json >/dev/null 2>&1 || { tail -n 20 /tmp/shards/log*.txt; exit 1; }
python3 tools/kvpress_side_by_side.py --merge /tmp/shards/*.records.json \
  --out "$out/$model.ruler.kvpress.records.json"
for f in /tmp/shards/log*.txt; do echo "== $f"; head -n 2 "$f"; tail -n 2 "$f"; done > "$out/logs.txt"
tail -n 40 "$out/logs.txt"
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv
