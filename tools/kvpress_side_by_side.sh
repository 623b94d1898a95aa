#!/usr/bin/env bash
# Runs NVIDIA's kvpress on the prompts kvplan exported (`kvplan eval niah|ruler --export-prompts
# FILE`), so its presses sit beside kvplan's in one table. Never part of CI, never a dependency
# of the project: kvpress lives in its own virtual environment OUTSIDE the repository, with
# pinned versions, and everything runs offline on the GGUF models already in the cache.
#
#   tools/kvpress_side_by_side.sh PROMPTS.json [options of tools/kvpress_side_by_side.py]
#   tools/kvpress_side_by_side.sh --check-exports EXPORTS PROMPTS.json [options of
#     tools/kvpress_exports_check.py]: load `kvplan export --to all` files into kvpress, generate
#
# Environment: KVPRESS_VENV (default ~/.cache/kvplan/venvs/kvpress-0.5.5), PYTHON (the
# interpreter that creates the venv, default python3), KVPLAN_MODELS (where the GGUF files are).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${KVPRESS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kvplan/venvs/kvpress-0.5.5}
case "$(realpath -m "$venv")/" in
  "$repo"/*) echo "KVPRESS_VENV=$venv is inside the repository; put it outside" >&2; exit 2 ;;
esac

# The pins. kvpress 0.5.5 needs transformers < 5.3; 5.2.0 is the newest below that and still
# loads GGUF files (`from_pretrained(dir, gguf_file=...)`, dequantised to float32).
KVPRESS=0.5.5
TRANSFORMERS=5.2.0
TORCH=2.9.1
GGUF=0.19.0
ACCELERATE=1.12.0

pins=("kvpress==$KVPRESS" "transformers==$TRANSFORMERS" "gguf==$GGUF" "accelerate==$ACCELERATE")
if [ ! -x "$venv/bin/python" ]; then
  echo "creating $venv"
  "${PYTHON:-python3}" -m venv "$venv"
fi
py="$venv/bin/python"
if ! "$py" - "$KVPRESS" "$TRANSFORMERS" "$TORCH" "$GGUF" <<'EOF' 2>/dev/null; then
import sys
from importlib.metadata import version
want = dict(zip(["kvpress", "transformers", "torch", "gguf"], sys.argv[1:]))
have = {k: version(k).split("+")[0] for k in want}
sys.exit(0 if have == want else 1)
EOF
  # torch's CPU build when its index answers, else PyPI's build (it runs on the CPU as well).
  echo "installing torch==$TORCH"
  "$py" -m pip install --retries 0 --timeout 20 "torch==$TORCH" \
    --index-url https://download.pytorch.org/whl/cpu \
    || "$py" -m pip install "torch==$TORCH"
  echo "installing ${pins[*]}"
  "$py" -m pip install "${pins[@]}"
fi
"$py" - <<'EOF'
from importlib.metadata import version
print("kvpress venv:", ", ".join(f"{p} {version(p)}" for p in
      ["kvpress", "transformers", "torch", "gguf", "accelerate", "numpy"]))
EOF
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TQDM_DISABLE=1
if [ "${1:-}" = "--check-exports" ]; then
  shift
  exec "$py" "$repo/tools/kvpress_exports_check.py" "$@"
fi
exec "$py" "$repo/tools/kvpress_side_by_side.py" "$@"
