#!/usr/bin/env bash
# kvplan's CPU speed against two anchors, side by side in one session on the same machine state:
# Hugging Face transformers (float32, sdpa; tools/bench_transformers.py) and llama.cpp through
# llama-cpp-python (its own quantised kernels; tools/bench_llamacpp.py), same GGUF file, same
# text, same thread count. Rounds alternate kvplan → transformers → llama.cpp, and each tool keeps
# its best of --repeats per round; the summary takes each tool's best over the rounds.
#
#   tools/bench_side_by_side.sh [MODEL...]   (catalog names or GGUF paths; default:
#                                             smollm2-135m-instruct qwen2.5-coder-0.5b-instruct)
#
# Environment: ROUNDS (2), REPEATS (best of, per round: 2), PREFILL (512,2048), CONTEXTS (decode contexts, 2048,8160: 8160 + 32
# decode tokens fill SmolLM2's 8K context), THREADS (2), OUT (folder of the JSON files and
# summary, default /tmp/kvplan-bench), BENCH_VENV (default ~/.cache/kvplan/venvs/bench),
# KERNELS (kvplan's prefill kernels, each run in turn: int8,f32), TOOLS (which anchors run:
# "transformers llamacpp"; an 8B model's float32 weights, 32 GB, do not fit a 24 GB machine —
# leave transformers out there), and the pinned versions TORCH, TRANSFORMERS, GGUF,
# LLAMA_CPP_PYTHON (a venv with other versions is reinstalled to these).
#
# Never part of CI, never a dependency: the anchors live in a virtual environment OUTSIDE the
# repository with pinned versions. llama-cpp-python has no wheel for this machine on the
# registry, so pip builds its sdist (a C++ toolchain is needed; cmake comes from pip; 10–25 min
# on 2 cores, once).
#
# llama.cpp's build flags: -DGGML_NATIVE=ON (tuned to this CPU), except on a CPU with AMX
# (`amx` in /proc/cpuinfo's flags, e.g. Intel Sapphire Rapids): there a native build segfaults in
# ggml_backend_amx_mul_mat on its first matmul (llama-cpp-python 0.3.36), so the script builds
# with -DGGML_NATIVE=OFF, the AVX2/FMA/F16C flags and the AVX-512 ones the CPU has on, and
# every GGML_AMX_* flag off — llama.cpp then runs its AVX-512 kernels, without AMX. It says which
# on its first lines. CMAKE_ARGS, when set, replaces either choice. The flags a build used are
# kept in the venv; a change rebuilds llama-cpp-python.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=${BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kvplan/venvs/bench}
case "$(realpath -m "$venv")/" in
  "$repo"/*) echo "BENCH_VENV=$venv is inside the repository; put it outside" >&2; exit 2 ;;
esac
TORCH=${TORCH:-2.9.1}
TRANSFORMERS=${TRANSFORMERS:-5.2.0}
GGUF=${GGUF:-0.19.0}
ACCELERATE=${ACCELERATE:-1.12.0}
LLAMA_CPP_PYTHON=${LLAMA_CPP_PYTHON:-0.3.36}
kernels=${KERNELS:-int8,f32}
tools=${TOOLS:-transformers llamacpp}
rounds=${ROUNDS:-2}
prefill=${PREFILL:-512,2048}
contexts=${CONTEXTS:-2048,8160}
threads=${THREADS:-2}
out=${OUT:-/tmp/kvplan-bench}
models=("$@")
[ ${#models[@]} -eq 0 ] && models=(smollm2-135m-instruct qwen2.5-coder-0.5b-instruct)

[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
py="$venv/bin/python"
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $cpu_flags " == *" $1 "* ]]; }
if [[ $cpu_flags == *amx* ]]; then
  on=(AVX AVX2 BMI2 FMA F16C)
  for f in avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    has "${f%%:*}" && on+=("${f#*:}")
  done
  llama_args="-DGGML_NATIVE=OFF $(printf -- '-DGGML_%s=ON ' "${on[@]}")-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAMA_CURL=OFF"
  echo "llama.cpp: this CPU has AMX; a native build segfaults in ggml_backend_amx_mul_mat, so: $llama_args"
else
  llama_args="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF"
  echo "llama.cpp: native build ($llama_args)"
fi
llama_args=${CMAKE_ARGS:-$llama_args}
if ! "$py" - "$TORCH" "$TRANSFORMERS" "$GGUF" "$LLAMA_CPP_PYTHON" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
want = dict(zip(["torch", "transformers", "gguf", "llama_cpp_python"], sys.argv[1:]))
have = {k: version(k).split("+")[0] for k in want}
sys.exit(0 if have == want else 1)
PY
  "$py" -m pip install --retries 0 --timeout 20 "torch==$TORCH" \
    --index-url https://download.pytorch.org/whl/cpu || "$py" -m pip install "torch==$TORCH"
  "$py" -m pip install "transformers==$TRANSFORMERS" "gguf==$GGUF" "accelerate==$ACCELERATE"
  CMAKE_ARGS="$llama_args" "$py" -m pip install "llama-cpp-python==$LLAMA_CPP_PYTHON"
  echo "$llama_args" > "$venv/llama-cmake-args"
fi
# A venv from before the flags were kept was built with the native default.
[ -f "$venv/llama-cmake-args" ] || echo "-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" > "$venv/llama-cmake-args"
if [ "$(cat "$venv/llama-cmake-args")" != "$llama_args" ]; then
  CMAKE_ARGS="$llama_args" "$py" -m pip install --force-reinstall --no-deps --no-cache-dir \
    "llama-cpp-python==$LLAMA_CPP_PYTHON"
  echo "$llama_args" > "$venv/llama-cmake-args"
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TQDM_DISABLE=1 OMP_NUM_THREADS=$threads
export RAYON_NUM_THREADS=$threads

cargo build --release --quiet
kvplan=target/release/kvplan
mkdir -p "$out"
repeats=${REPEATS:-2}
args=(--prefill "$prefill" --decode-tokens 32 --repeats "$repeats")
names=()
for model in "${models[@]}"; do
  if [ -f "$model" ]; then
    # A GGUF path: named by its folder and file (…/llama31-8b/model-Q4_K_M.gguf → llama31-8b-model-Q4_K_M).
    gguf=$(realpath "$model"); name=$(basename "$(dirname "$gguf")")-$(basename "$gguf" .gguf)
  else
    name=$model
    gguf=$($kvplan models | awk -v m="$model" '$1 == m { print $NF }')
    [ -f "$gguf" ] || { $kvplan fetch --model "$model"; gguf=$($kvplan models | awk -v m="$model" '$1 == m { print $NF }'); }
  fi
  names+=("$name")
  for round in $(seq 1 "$rounds"); do
    for k in ${kernels//,/ }; do
      echo "== $name, round $round: kvplan ($k kernels)"
      first=1
      for ctx in ${contexts//,/ }; do
        # Prefill lengths once per round (with the first context).
        pre=$prefill; [ $first = 1 ] || pre=16
        $kvplan bench --model "$gguf" --kernels "$k" --prefill "$pre" --decode-context "$ctx" \
          --decode-tokens 32 --repeats "$repeats" --json "$out/$name.kvplan-$k.$round.$ctx.json"
        first=0
      done
    done
    if [[ " $tools " == *" transformers "* ]]; then
      echo "== $name, round $round: transformers"
      "$py" tools/bench_transformers.py "$gguf" "${args[@]}" --contexts "$contexts" \
        --threads "$threads" --json "$out/$name.transformers.$round.json"
    fi
    if [[ " $tools " == *" llamacpp "* ]]; then
      echo "== $name, round $round: llama.cpp"
      (cd tools && "$py" bench_llamacpp.py "$gguf" "${args[@]}" --contexts "$contexts" \
        --threads "$threads" --json "$out/$name.llamacpp.$round.json")
    fi
  done
done

# Summary: each tool's best over the rounds; ratios kvplan / anchor in speed (> 1: kvplan faster).
cpu=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | xargs)
vnni=$(grep -qw avx512_vnni /proc/cpuinfo && echo "AVX-512 VNNI" || echo "no AVX-512 VNNI")
amx=$(grep -qw amx_int8 /proc/cpuinfo && echo "AMX" || echo "no AMX")
echo "CPU: $cpu, $(nproc) cores visible, $vnni, $amx; $threads threads" | tee "$out/cpu.txt"
"$py" - "$out" "$prefill" "$contexts" "$kernels" "${names[@]}" <<'PY' | tee "$out/summary.md"
import glob, json, sys
out, prefill, contexts, kernels, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), sys.argv[5:]
prefill = [int(x) for x in prefill.split(",")]
contexts = [int(x) for x in contexts.split(",")]

def best(files, phase, key, value):
    secs = [r["seconds"] for f in files for r in json.load(open(f))["results"]
            if r["phase"] == phase and r.get(key) == value]
    return min(secs) if secs else None

ks = [f"kvplan-{k}" for k in kernels]
head = " | ".join(f"kvplan {k}" for k in kernels)
print(f"| model | phase | {head} | transformers | llama.cpp | {ks[0][7:]} / transformers | {ks[0][7:]} / llama.cpp |")
print("|---|---|" + "---:|" * (len(ks) + 4))
for m in models:
    tools = {t: sorted(glob.glob(f"{out}/{m}.{t}.*.json")) for t in ks + ["transformers", "llamacpp"]}
    rows = [("prefill", "tokens", n, n, f"prefill {n}", "tokens/s") for n in prefill]
    rows += [("decode", "context", c, 32, f"decode at {c}", "tokens/s") for c in contexts]
    for phase, key, value, count, label, unit in rows:
        s = {t: best(f, phase, key, value) for t, f in tools.items()}
        rate = {t: (count / v if v else None) for t, v in s.items()}
        cell = lambda t: f"{rate[t]:.1f}" if rate[t] else "–"
        ratio = lambda a, b: f"{rate[a] / rate[b]:.2f}×" if rate[a] and rate[b] else "–"
        mine = " | ".join(cell(k) for k in ks)
        print(f"| {m} | {label} ({unit}) | {mine} | {cell('transformers')} | "
              f"{cell('llamacpp')} | {ratio(ks[0], 'transformers')} | {ratio(ks[0], 'llamacpp')} |")
PY
