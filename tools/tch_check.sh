#!/usr/bin/env bash
# The `tch` backend (LibTorch 2.9.0 on the CPU) checked: the parity tests of SmolLM2, Qwen2.5-Coder
# 0.5B and Gemma 3 270M against the transformers fixtures and the real-model press test, built
# with `--no-default-features --features tch`; then `kvplan bench` on tch. Not part of CI (CI
# builds `flex` only). Models are fetched into the usual cache on first use.
#
#   LIBTORCH=/path/to/libtorch bash tools/tch_check.sh [BENCH_JSON]
#
# LIBTORCH: a LibTorch 2.9.0 folder (tools/libtorch_from_wheel.sh makes one from PyPI), or
# LIBTORCH_USE_PYTORCH=1 inside a Python environment with torch==2.9.0 installed (torch-sys's own
# options). Its lib/ folder is put on LD_LIBRARY_PATH. CARGO_TARGET_DIR is honoured.
set -euo pipefail
if [ -n "${LIBTORCH:-}" ]; then
  export LD_LIBRARY_PATH=$LIBTORCH/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
elif [ -n "${LIBTORCH_USE_PYTORCH:-}" ]; then
  TORCH_LIB=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH=$TORCH_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  echo "set LIBTORCH (tools/libtorch_from_wheel.sh) or LIBTORCH_USE_PYTORCH=1 (torch==2.9.0 installed)" >&2
  exit 2
fi
FEATURES=(--release --no-default-features --features tch)
# The real-model tests load one model each; one test thread keeps memory in bounds.
cargo test "${FEATURES[@]}" --test parity_smollm2 --test parity_qwen2_5_coder_0_5b \
  --test parity_gemma_3_270m --test press_smollm2 -- --test-threads=1
cargo build "${FEATURES[@]}"
TARGET=${CARGO_TARGET_DIR:-target}
"$TARGET/release/kvplan" bench --prefill 2048,8192 --decode-context 2048 --decode-tokens 32 \
  ${1:+--json "$1"}
