#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (fuzz/), cut down from the project's real files.

Python standard library only. Writes fuzz/seeds/<target>/<name>; run from the repository root:

    python3 tools/fuzz_seeds.py [GGUF ...]

GGUF arguments: real model files (e.g. ~/.cache/kvplan/models/*.gguf). From each, the `gguf`
seed keeps every metadata key with arrays cut to 16 items and the three smallest tensors cut to
one block row; the `tokenizer` seed keeps the tokenizer metadata with the vocabulary cut to its
first 300 tokens (merges and special ids that fall outside dropped), prefixed by a sample text;
the `chat_template` seed is the model's template. Plans, profiles, records and results come from
plans/, planner/tests/fixtures/ and results/, cut to 2 layers, 3 query heads, 1 KV head and a few
records; the archives are small wheels and sdists laid out as the fetch code expects.
"""

import io
import json
import os
import struct
import sys
import tarfile
import zipfile

OUT = "fuzz/seeds"

# GGUF value types.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# ggml type id: (block size, block bytes)
BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
          12: (256, 144), 13: (256, 176), 14: (256, 210), 30: (1, 2)}


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


class Reader:
    def __init__(self, f):
        self.f = f

    def take(self, fmt):
        n = struct.calcsize(fmt)
        return struct.unpack(fmt, self.f.read(n))[0]

    def string(self):
        return self.f.read(self.take("<Q")).decode("utf-8")

    def value(self, ty):
        if ty == STR:
            return self.string()
        if ty == ARR:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR[ty])


def read_gguf(path):
    with open(path, "rb") as f:
        r = Reader(f)
        assert f.read(4) == b"GGUF"
        version, n_t, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
        meta = []
        for _ in range(n_kv):
            key, ty = r.string(), r.take("<I")
            meta.append((key, ty, r.value(ty)))
        infos = []
        for _ in range(n_t):
            name, nd = r.string(), r.take("<I")
            dims = [r.take("<Q") for _ in range(nd)]
            infos.append((name, dims, r.take("<I"), r.take("<Q")))
        align = next((v for k, _, v in meta if k == "general.alignment"), 32)
        start = (f.tell() + align - 1) // align * align
        tensors = []
        for name, dims, ty, off in infos:
            if ty not in BLOCKS:
                continue
            bs, bb = BLOCKS[ty]
            if dims[0] % bs:
                continue
            n = 1
            for d in dims:
                n *= d
            tensors.append((n // bs * bb, name, dims, ty, start + off))
        tensors.sort()
        picked = []
        for size, name, dims, ty, at in tensors[:3]:
            bs, bb = BLOCKS[ty]
            f.seek(at)
            row = dims[0] // bs * bb
            picked.append((name, [dims[0]], ty, f.read(min(row, size))))
        return version, meta, picked


def put_value(out, ty, v):
    if ty == STR:
        b = v.encode("utf-8")
        out += struct.pack("<Q", len(b)) + b
    elif ty == ARR:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        for x in items:
            put_value(out, et, x)
    else:
        out += struct.pack(SCALAR[ty], v)


def gguf_bytes(meta, tensors):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)))
    for key, ty, v in meta:
        put_value(out, STR, key)
        out += struct.pack("<I", ty)
        put_value(out, ty, v)
    off = 0
    for name, dims, ty, data in tensors:
        put_value(out, STR, name)
        out += struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ty, off)
        off += (len(data) + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % 32)
    return bytes(out)


def cut_arrays(meta, n):
    return [(k, ty, (v[0], v[1][:n]) if ty == ARR else v) for k, ty, v in meta]


def tokenizer_meta(meta, keep=300):
    tok = {k: (ty, v) for k, ty, v in meta if k.startswith("tokenizer.")}
    tokens = tok.get("tokenizer.ggml.tokens", (ARR, (STR, [])))[1][1][:keep]
    kept = set(tokens)
    out = []
    for k, (ty, v) in tok.items():
        if ty == ARR and k in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                               "tokenizer.ggml.token_type"):
            v = (v[0], v[1][:keep])
        elif ty == ARR and k == "tokenizer.ggml.merges":
            v = (v[0], [m for m in v[1] if all(p in kept for p in m.split(" ", 1))
                        and m.replace(" ", "", 1) in kept][:400])
        elif k.endswith("_token_id") and isinstance(v, int) and v >= keep:
            continue
        out.append((k, ty, v))
    return out


def from_gguf(path):
    stem = os.path.basename(path).split(".gguf")[0]
    _, meta, tensors = read_gguf(path)
    write("gguf", stem + ".gguf", gguf_bytes(cut_arrays(meta, 16), tensors))
    text = "Hello world! The needle is 42.\n  tabs\tand   spaces, ünïcødé, 日本語 <|im_end|>"
    tb = text.encode("utf-8")
    write("tokenizer", stem, struct.pack("<H", len(tb)) + tb + gguf_bytes(tokenizer_meta(meta), []))
    tmpl = next((v for k, _, v in meta if k == "tokenizer.chat_template"), None)
    if tmpl:
        write("chat_template", stem + ".jinja", tmpl)


# --- plans and profiles: 2 layers, 3 query heads, 1 KV head -------------------------------------

def shrink(v, layers, heads, kv):
    """Cuts every list as long as the layer, query-head or KV-head count."""
    if isinstance(v, dict):
        return {k: shrink(x, layers, heads, kv) for k, x in v.items()}
    if isinstance(v, list):
        n = len(v)
        if n == layers:
            v = v[:2]
        elif n == heads:
            v = v[:3]
        elif n == kv and kv != heads:
            v = v[:1]
        return [shrink(x, layers, heads, kv) for x in v]
    return v


def small_json(path, target, name):
    d = json.load(open(path))
    g = (d.get("model") or {}).get("geometry")
    if g:
        d = shrink(d, g["layers"], g["q_heads"], g["kv_heads"])
        g = d["model"]["geometry"]
        g.update(layers=2, q_heads=3, kv_heads=1, q_to_kv=[0, 0, 0])
    det = d.get("details")
    if det:
        for kind in ("retrieval", "retrieval_reasoning"):
            trials = det[f"{kind}_trials"][:3]
            det[f"{kind}_trials"] = trials
            d[kind]["trials_total"] = len(trials)
            d[kind]["trials_kept"] = sum(t["kept"] for t in trials)
        det["wavelet_by_position"] = [row[:8] for row in det["wavelet_by_position"]]
    write(target, name, json.dumps(d, separators=(",", ":")))


def plans_and_profiles():
    for p in sorted(os.listdir("plans")):
        if p.endswith(".plan.json"):
            small_json(os.path.join("plans", p), "plan", p)
        elif p.endswith(".profile.json"):
            small_json(os.path.join("plans", p), "profile", p)
    small_json("planner/tests/fixtures/smollm2-handmade.profile.json", "profile", "handmade.json")
    for d in ("v1", "v2"):
        base = os.path.join("planner/tests/fixtures", d)
        for p in sorted(os.listdir(base)):
            small_json(os.path.join(base, p), "migrate", f"{d}-{p}")


def records_and_results():
    for p in sorted(os.listdir("results")):
        path = os.path.join("results", p)
        if not p.endswith(".json") or not os.path.isfile(path):
            continue
        d = json.load(open(path))
        if "records" in d:
            d["records"] = d["records"][:4]
            for r in d["records"]:
                for k in ("nll", "nlls"):
                    if isinstance(r.get(k), list):
                        r[k] = r[k][:40]
        for k in ("niah", "quality", "perplexity"):
            if isinstance(d.get(k), list):
                d[k] = d[k][:3]
        write("records", p, json.dumps(d, separators=(",", ":")))


def prompts():
    prompt = {"task": "niah", "context_len": 12, "depth": 0.5, "example": 0, "ids": list(range(12)),
              "context_ids": list(range(9)), "question_ids": [9, 10, 11], "window_end": 12,
              "answer_tokens": 4, "expected": ["42"], "metric": "string_match_all"}
    f = {"format": "kvplan-prompts/v1", "model": "SmolLM2-135M-Instruct",
         "model_sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
         "task": "niah", "settings": {"seed": "0", "prompt": "chat"}, "prompts": [prompt]}
    write("prompts", "niah.json", json.dumps(f))


def archives():
    def whl(members):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in members:
                z.writestr(name, data)
        return b.getvalue()

    write("archive", "part.whl", whl([("pkg/data/part01.bin", b"GGUF" + bytes(range(60))),
                                       ("pkg-1.0.dist-info/METADATA", "Name: pkg\n")]))
    write("archive", "texts.whl", whl([("pkg/texts/a.txt", "An essay.\n" * 8),
                                        ("pkg/texts/sub/b.txt", "A play.\n"),
                                        ("pkg/texts/../escape.txt", "x")]))
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w:gz") as t:
        for name, data in [("pkg-1.0/texts/a.txt", b"An essay.\n"), ("pkg-1.0/setup.py", b"")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    write("archive", "texts.tar.gz", b.getvalue())


def main():
    for path in sys.argv[1:]:
        from_gguf(path)
    plans_and_profiles()
    records_and_results()
    prompts()
    archives()
    for t in sorted(os.listdir(OUT)):
        files = os.listdir(os.path.join(OUT, t))
        size = sum(os.path.getsize(os.path.join(OUT, t, f)) for f in files)
        print(f"{t}: {len(files)} seeds, {size} bytes")


if __name__ == "__main__":
    main()
