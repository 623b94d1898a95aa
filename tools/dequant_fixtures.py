#!/usr/bin/env python3
"""Writes runtime/src/gguf/fixtures/dequant_blocks.json: raw GGML blocks and their f32 values.

The expected values come from an implementation independent of kvplan: gguf-py's
`gguf.quants.dequantize` (the numpy reference shipped with llama.cpp's Python package). Blocks are
read from the real model files (Q5_0, Q8_0, Q4_K, Q6_K) and, for the types no catalog model
stores (Q5_1, Q5_K), built from seeded random bytes with finite f16 scales, so every quant bit is
exercised. Expected values are stored as the hex of their little-endian f32 bytes, so the test
compares bit for bit.

Run from the repository root, outside the project's environment:

    python3 -m venv /tmp/venv-gguf && /tmp/venv-gguf/bin/pip install gguf numpy
    /tmp/venv-gguf/bin/python tools/dequant_fixtures.py [MODELS_DIR]

MODELS_DIR defaults to $KVPLAN_MODELS or ~/.cache/kvplan/models and must hold
qwen2.5-coder-0.5b-instruct.gguf and gemma-3-270m.gguf.
"""

import importlib.metadata
import json
import os
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

OUT = "runtime/src/gguf/fixtures/dequant_blocks.json"

# (model file, tensor, block indices): real blocks of every quantised type the models store.
REAL = [
    ("qwen2.5-coder-0.5b-instruct.gguf", "token_embd.weight", [0, 1, 100_000]),
    ("qwen2.5-coder-0.5b-instruct.gguf", "blk.0.attn_q.weight", [7]),
    ("gemma-3-270m.gguf", "blk.0.attn_q.weight", [0, 12_345]),
    ("gemma-3-270m.gguf", "blk.17.ffn_up.weight", [3]),
    ("qwen2.5-coder-0.5b-instruct.gguf", "output.weight", [5]),
    ("gemma-3-270m.gguf", "blk.0.attn_output.weight", [0, 200]),
    ("qwen2.5-coder-0.5b-instruct.gguf", "blk.0.ffn_down.weight", [1]),
]

# Types without a block in the models: seeded random blocks (how many of each).
SYNTHETIC = [(T.Q5_1, 3), (T.Q5_K, 3)]


def block_of(tensor, index):
    """Raw bytes of block `index` of a quantised tensor, as a uint8 array."""
    block_size, type_size = GGML_QUANT_SIZES[tensor.tensor_type]
    raw = np.asarray(tensor.data).reshape(-1).view(np.uint8)
    assert raw.size % type_size == 0
    return raw[index * type_size : (index + 1) * type_size].copy()


def finite_half(rng, scale):
    """A finite, nonzero f16 as two bytes."""
    return np.array([rng.normal() * scale], dtype=np.float16).view(np.uint8)


def synthetic_block(qtype, rng):
    """Random quants with finite f16 scale (and minimum) fields in ggml's layout."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=type_size, dtype=np.uint8)
    raw[0:2] = finite_half(rng, 0.01)  # d
    if qtype in (T.Q5_1, T.Q5_K):
        raw[2:4] = finite_half(rng, 0.01)  # m (Q5_1) or dmin (Q5_K)
    return raw


def case(qtype, source, raw):
    values = gguf.quants.dequantize(raw.reshape(1, -1), qtype).reshape(-1).astype("<f4")
    assert np.all(np.isfinite(values)), source
    return {
        "type": qtype.name,
        "source": source,
        "block_hex": raw.tobytes().hex(),
        "expected_f32_le_hex": values.tobytes().hex(),
    }


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "KVPLAN_MODELS", os.path.expanduser("~/.cache/kvplan/models")
    )
    cases = []
    readers = {}
    for file, name, indices in REAL:
        reader = readers.setdefault(file, gguf.GGUFReader(os.path.join(models, file)))
        tensor = next(t for t in reader.tensors if t.name == name)
        for i in indices:
            raw = block_of(tensor, i)
            cases.append(case(tensor.tensor_type, f"{file} {name} block {i}", raw))
    rng = np.random.default_rng(20261123)
    for qtype, n in SYNTHETIC:
        for i in range(n):
            cases.append(case(qtype, f"seeded random block {i}", synthetic_block(qtype, rng)))
    doc = {
        "generator": "tools/dequant_fixtures.py: gguf-py "
        f"{importlib.metadata.version('gguf')} gguf.quants.dequantize, numpy {np.__version__}",
        "cases": cases,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(cases)} blocks")


if __name__ == "__main__":
    main()
