#!/usr/bin/env bash
# Makes a LibTorch folder for the `tch` build out of PyPI wheels, when the CPU-only wheel index
# (download.pytorch.org/whl/cpu) cannot be reached: torch 2.9.0 (what burn 0.21's burn-tch pins
# through tch 0.22 / torch-sys 0.22: `TORCH_VERSION` in torch-sys's build.rs) with only its CPU
# libraries, plus the two small NVIDIA libraries that libtorch_cpu.so of PyPI's CUDA wheel names
# as NEEDED (libcudart.so.12 and libcupti.so.12; neither needs a GPU or a driver to load).
# libtorch_cuda.so (1 GB) is left out, so torch-sys links no CUDA library.
#
#   bash tools/libtorch_from_wheel.sh DEST [WHEEL_DIR]   # then: export LIBTORCH=DEST
#
# WHEEL_DIR (default: a temporary folder) keeps the downloaded wheels (about 910 MB) for reuse.
# Uses pip (`pip download --no-deps`: nothing is installed) and unzip.
set -euo pipefail
DEST=${1:?usage: libtorch_from_wheel.sh DEST [WHEEL_DIR]}
WHEELS=${2:-$(mktemp -d)}
PIP=${PIP:-python3 -m pip}
mkdir -p "$WHEELS"
$PIP download --no-deps -d "$WHEELS" torch==2.9.0 nvidia-cuda-runtime-cu12==12.8.90 \
  nvidia-cuda-cupti-cu12==12.8.90
TORCH_WHL=$(ls "$WHEELS"/torch-2.9.0-*.whl | head -1)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
unzip -q "$TORCH_WHL" 'torch/include/*' 'torch/share/*' 'torch/lib/libtorch.so' \
  'torch/lib/libtorch_cpu.so' 'torch/lib/libc10.so' 'torch/lib/libgomp.so.1' \
  'torch/lib/libtorch_global_deps.so' -d "$STAGE"
unzip -q -j "$WHEELS"/nvidia_cuda_runtime_cu12-12.8.90-*.whl 'nvidia/cuda_runtime/lib/libcudart.so.12' -d "$STAGE/torch/lib"
unzip -q -j "$WHEELS"/nvidia_cuda_cupti_cu12-12.8.90-*.whl 'nvidia/cuda_cupti/lib/libcupti.so.12' -d "$STAGE/torch/lib"
echo "2.9.0" >"$STAGE/torch/build-version"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$STAGE/torch" "$DEST"
echo "LibTorch 2.9.0 (CPU libraries of the PyPI wheel) in $DEST:"
echo "  export LIBTORCH=$DEST LD_LIBRARY_PATH=$DEST/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
