#!/usr/bin/env python3
"""Acceptance check of `kvplan export --to all` folders: builds each target's own config objects
from the exported files, with the packages that install on a CPU machine, so that a file an
engine would refuse (vLLM's Qwen2 assert on mixed layer_types) fails here, not in production.

Run from a venv OUTSIDE the repository (never CI; offline):

    python3 -m venv /work/venv-engines
    /work/venv-engines/bin/pip install vllm==0.33.0 kvpress==0.5.5
    /work/venv-engines/bin/python tools/engine_configs_check.py plans/exports/*/ \
        [--duo-src DIR] [--kvcache-factory-src DIR]

(Where `pip install vllm` would pull CUDA wheels a CPU machine has no use for, the wheel's Python
files unpacked — `unzip vllm-0.33.0-*.whl 'vllm/*'` — on `PYTHONPATH`, with its pure-Python
requirements installed, serve as well: the checks below import no compiled part of vLLM.)

For each export folder (one per model, with `<format>/kvplan-export.json` inside):

- vllm: a Hugging Face config of the model's architecture and geometry (no weights) is written to
  a temporary folder; `vllm.engine.arg_utils.EngineArgs(model=DIR, hf_overrides=<hf_overrides.txt>)
  .create_model_config()` builds vLLM's `ModelConfig` with the overrides applied, and the
  resulting `hf_text_config` is checked against what vLLM 0.33.0's model code accepts:
  `Qwen2Model` asserts `max_window_layers == num_hidden_layers` when `layer_types` mixes kinds
  (the assert is evaluated on the built config exactly as written there), `Gemma3Attention`
  takes a sliding layer's RoPE from the local base (no global layer may be sliding), and the
  model-wide window (`CacheConfig.sliding_window`) is the config's only when every layer slides.
  Then the manifest's `admission_slots` against vLLM's own `max_memory_usage_bytes` of each
  layer's spec (`FullAttentionSpec`, `SlidingWindowSpec`) under the export's serving settings.
- kvpress: `PerLayerCompressionPress(SnapKVPress(), compression_ratios)` for every
  `compression_ratios*.json` (one ratio per layer, each in [0, 1)).
- lukv: the curve's shape and range, as `LUKVPress` checks it ([99, layers, KV heads]).
- duo: `duo_attn.utils.load_attn_pattern` and `sparsify_attention_heads(gates, sparsity=S)` from a
  DuoAttention checkout (`--duo-src`), checked to keep the number of full heads the export says
  (`head_compression_ratio`); kvpress's `DuoAttentionPress(head_compression_ratio=...)` is built.
- headkv: `head_capacity.json` as a `[layers, query heads]` int tensor; with
  `--kvcache-factory-src`, KVCache-Factory's HeadKV cluster is constructed with it.
- trtllm, llamacpp: TensorRT-LLM does not install on a CPU machine (its PyPI package is a stub
  that needs nvidia-smi) and llama.cpp is not a Python package: their files are checked for the
  shape the sources read (`KvCacheConfig.max_attention_window`: one positive int per layer;
  `--override-kv <arch>.attention.sliding_window=int:W`) and reported as checked against source.

Prints one line per check (`ok`, `FAIL`, `skip` and why) and exits 1 if any check failed.
"""

import argparse
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

RESULTS = []


def report(status, where, what):
    RESULTS.append(status)
    print(f"{status:4}  {where}: {what}")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def have(module):
    try:
        importlib.import_module(module)
        return True
    except Exception as e:  # an installed package that fails to import counts as absent
        print(f"      ({module} not importable: {type(e).__name__}: {e})")
        return False


def hf_config(manifest, plan):
    """A transformers config of the plan's architecture and geometry, without weights."""
    import transformers

    g = plan["model"]["geometry"]
    arch = manifest["architecture"]
    common = dict(
        num_hidden_layers=g["layers"],
        num_attention_heads=g["q_heads"],
        num_key_value_heads=g["kv_heads"],
        head_dim=g["head_dim"],
        hidden_size=g["q_heads"] * g["head_dim"],
        intermediate_size=4 * g["q_heads"] * g["head_dim"],
        vocab_size=1024,
        max_position_embeddings=32768,
    )
    if arch == "llama":
        return transformers.LlamaConfig(**common, architectures=["LlamaForCausalLM"])
    if arch == "qwen2":
        return transformers.Qwen2Config(
            **common, max_window_layers=21, architectures=["Qwen2ForCausalLM"]
        )
    if arch == "gemma3":
        windows = g["layer_windows"]
        sw = next(w for w in windows if w is not None)
        types = ["sliding_attention" if w else "full_attention" for w in windows]
        return transformers.Gemma3TextConfig(
            **common, sliding_window=sw, layer_types=types, architectures=["Gemma3ForCausalLM"]
        )
    raise ValueError(f"no config for architecture {arch}")


def vllm_rules(cfg, arch, plan):
    """vLLM 0.33.0's model-code conditions on the built config (module docstring)."""
    types = list(getattr(cfg, "layer_types", None) or [])
    if arch == "gemma3":
        native = plan["model"]["geometry"]["layer_windows"]
        bad = [l for l, (t, w) in enumerate(zip(types, native)) if w is None and t != "full_attention"]
        assert not bad, (
            f"global layers {bad} marked sliding would take the local RoPE base (vllm gemma3.py "
            "rope_parameters[layer_type])"
        )
    if arch == "qwen2" and len(set(types)) > 1:
        assert cfg.max_window_layers == cfg.num_hidden_layers, (
            "Sliding window for some but all layers is not supported (vllm qwen2.py)"
        )
    all_sliding = bool(types) and all(t == "sliding_attention" for t in types)
    return all_sliding, types


def check_vllm(folder, manifest, plan):
    if not have("vllm"):
        report("skip", folder, "vllm not installed")
        return
    from vllm.engine.arg_utils import EngineArgs

    overrides = json.loads(Path(folder, "hf_overrides.txt").read_text())
    with tempfile.TemporaryDirectory() as d:
        hf_config(manifest, plan).save_pretrained(d)
        args = EngineArgs(model=d, hf_overrides=overrides, skip_tokenizer_init=True)
        try:
            mc = args.create_model_config()
        except Exception as e:
            report("FAIL", folder, f"EngineArgs.create_model_config: {type(e).__name__}: {e}")
            return
        cfg = mc.hf_text_config
        try:
            all_sliding, types = vllm_rules(cfg, manifest["architecture"], plan)
        except AssertionError as e:
            report("FAIL", folder, f"vLLM refuses it or runs another model: {e}")
            return
        want = overrides["layer_types"]
        if types != want:
            report("FAIL", folder, f"layer_types after overrides {types[:4]}… != file {want[:4]}…")
            return
        window = mc.get_sliding_window()
        if all_sliding and window != overrides["sliding_window"]:
            report("FAIL", folder, f"model-wide window {window} != {overrides['sliding_window']}")
            return
        report(
            "ok",
            folder,
            f"vLLM ModelConfig with hf_overrides: {len(types)} layers, "
            f"{sum(t == 'full_attention' for t in types)} full, window {window}",
        )
        check_vllm_admission(folder, manifest, types, overrides["sliding_window"])


def check_vllm_admission(folder, manifest, types, window):
    """The manifest's `admission_slots` against vLLM's own sizing: each layer's KV-cache spec
    (`FullAttentionSpec`, `SlidingWindowSpec`) asked for `max_memory_usage_bytes` — the startup
    pool sizing and admission cap — under a config with the export's serving settings, its
    batches in flight taken from `VllmConfig.max_concurrent_batches` (async scheduling on, vLLM's
    default), in slots per KV head (one head of size 1, so a page is 2 · 16 · 2 bytes)."""
    from types import SimpleNamespace as NS

    import torch
    from vllm.config.vllm import VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec

    r, n = manifest["reduction"], manifest["context_len"]
    serving = r["serving"]
    config = NS(
        scheduler_config=NS(
            async_scheduling=True, max_num_batched_tokens=serving["max_num_batched_tokens"]
        ),
        parallel_config=NS(
            pipeline_parallel_size=1, decode_context_parallel_size=1, prefill_context_parallel_size=1
        ),
        use_v2_model_runner=False,
        model_config=NS(max_model_len=n),
    )
    config.max_concurrent_batches = VllmConfig.max_concurrent_batches.fget(config)
    config.max_in_flight_tokens = VllmConfig.max_in_flight_tokens.fget(config)
    block = r["block_size"]
    common = dict(block_size=block, num_kv_heads=1, head_size=1, dtype=torch.float16)
    slots = 0
    for t in types:
        if t == "sliding_attention":
            spec = SlidingWindowSpec(sliding_window=window, **common)
        else:
            spec = FullAttentionSpec(**common)
        slots += spec.max_memory_usage_bytes(config) // spec.page_size_bytes * block
    if slots != r["admission_slots"]:
        report("FAIL", folder, f"vLLM sizes admission at {slots} slots, the manifest {r['admission_slots']}")
        return
    report(
        "ok",
        folder,
        f"admission {slots} slots per KV head = vLLM's max_memory_usage_bytes "
        f"({config.max_concurrent_batches} batches × {serving['max_num_batched_tokens']} in flight)",
    )


def check_kvpress(folder, manifest, plan):
    layers = plan["model"]["geometry"]["layers"]
    files = sorted(Path(folder).glob("compression_ratios*.json"))
    for f in files:
        ratios = read_json(f)["compression_ratios"]
        if len(ratios) != layers or not all(0.0 <= r < 1.0 for r in ratios):
            report("FAIL", f, f"{len(ratios)} ratios for {layers} layers, or one outside [0, 1)")
            return
    if not have("kvpress"):
        report("skip", folder, f"{len(files)} files shaped right; kvpress not installed")
        return
    from kvpress import PerLayerCompressionPress, SnapKVPress

    for f in files:
        PerLayerCompressionPress(SnapKVPress(), compression_ratios=read_json(f)["compression_ratios"])
    report("ok", folder, f"PerLayerCompressionPress built from {len(files)} serving-length files")


def check_lukv(folder, manifest, plan):
    import numpy as np

    g = plan["model"]["geometry"]
    curve = np.load(Path(folder, "lukv_curve.npy"), allow_pickle=False)
    ok = curve.shape == (99, g["layers"], g["kv_heads"]) and ((curve >= 0) & (curve <= 1)).all()
    report("ok" if ok else "FAIL", folder, f"curve {curve.shape}, ratios in [0, 1]: {ok}")


def check_duo(folder, manifest, plan, duo_src):
    config = read_json(Path(folder, "config.json"))
    if duo_src is None:
        report("skip", folder, "no --duo-src (a DuoAttention checkout): pattern read as text only")
        return
    sys.path.insert(0, str(duo_src))
    try:
        from duo_attn.utils import load_attn_pattern, sparsify_attention_heads
    except Exception as e:
        report("skip", folder, f"duo_attn not importable from {duo_src}: {e}")
        return
    gates, sink, recent = load_attn_pattern(folder)
    heads = gates.size
    want_full = round((1.0 - config["head_compression_ratio"]) * heads)
    kept, sparsity = sparsify_attention_heads(gates.copy(), sparsity=config["sparsity"])
    full = int(kept.sum())
    status = "ok" if full == want_full and (sink, recent) == (config["sink_size"], config["recent_size"]) else "FAIL"
    report(status, folder, f"load_attn_pattern + sparsify_attention_heads: {full} full of {heads} (want {want_full})")


def check_headkv(folder, manifest, plan, factory_src):
    g = plan["model"]["geometry"]
    cap = read_json(Path(folder, "head_capacity.json"))["head_capacity"]
    ok = len(cap) == g["layers"] and all(len(r) == g["q_heads"] for r in cap)
    ok = ok and all(isinstance(x, int) and x >= 0 for r in cap for x in r)
    report("ok" if ok else "FAIL", folder, f"head_capacity [{len(cap)}, {len(cap[0])}] of ints >= 0")
    if factory_src is None:
        report("skip", folder, "no --kvcache-factory-src: the cluster is not constructed")
        return
    sys.path.insert(0, str(factory_src))
    try:
        import torch
        from pyramidkv.pyramidkv_utils import HeadKVCluster
    except Exception as e:
        report("skip", folder, f"KVCache-Factory not importable from {factory_src}: {e}")
        return
    HeadKVCluster(
        window_size=read_json(Path(folder, "head_capacity.json"))["window_size"],
        max_capacity_prompt=128,
        layer_idx=0,
        num_hidden_layers=g["layers"],
        head_capacity=torch.tensor(cap),
    )
    report("ok", folder, "KVCache-Factory HeadKVCluster built with head_capacity")


def check_trtllm(folder, manifest, plan):
    layers = plan["model"]["geometry"]["layers"]
    body = read_json(Path(folder, "kv_cache_config.json"))
    w = body["max_attention_window"]
    ok = len(w) == layers and all(isinstance(x, int) and x > 0 for x in w)
    yaml = Path(folder, "extra_llm_api_options.yaml").read_text()
    ok = ok and yaml.startswith("kv_cache_config:\n")
    # The block manager frees blocks at its smallest window only (one detached-block count per
    # sequence, kvCacheManager.cpp at b35ac1b6): every window below the context must be one size.
    sliding = sorted({x for x in w if x < manifest["context_len"]})
    ok = ok and len(sliding) <= 1
    report("ok" if ok else "FAIL", folder, f"KvCacheConfig fields shaped as llm_args.py reads them, windows below the context {sliding} (one size: the block manager frees blocks at its smallest window only; checked against source; TensorRT-LLM does not install on CPU)")


def check_llamacpp(folder, manifest, plan):
    line = Path(folder, "override_kv.txt").read_text().strip()
    arch = manifest["architecture"]
    ok = line.startswith(f"--override-kv {arch}.attention.sliding_window=int:")
    report("ok" if ok else "FAIL", folder, f"{line} (checked against llama-model.cpp)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+", help="folders written by kvplan export --to all")
    ap.add_argument("--plans", default="plans", help="where <slug>.plan.json are (default plans)")
    ap.add_argument("--duo-src", type=Path, help="a checkout of mit-han-lab/duo-attention")
    ap.add_argument("--kvcache-factory-src", type=Path, help="a checkout of KVCache-Factory")
    a = ap.parse_args()
    for top in a.exports:
        top = Path(top)
        for manifest_path in sorted(top.glob("*/kvplan-export.json")):
            folder = manifest_path.parent
            manifest = read_json(manifest_path)
            plan = read_json(Path(a.plans, f"{top.name}.plan.json"))
            fmt = manifest["format"]
            try:
                if fmt == "vllm":
                    check_vllm(folder, manifest, plan)
                elif fmt == "kvpress":
                    check_kvpress(folder, manifest, plan)
                elif fmt == "lukv":
                    check_lukv(folder, manifest, plan)
                elif fmt == "duo":
                    check_duo(folder, manifest, plan, a.duo_src)
                elif fmt == "headkv":
                    check_headkv(folder, manifest, plan, a.kvcache_factory_src)
                elif fmt == "trtllm":
                    check_trtllm(folder, manifest, plan)
                elif fmt == "llamacpp":
                    check_llamacpp(folder, manifest, plan)
            except Exception as e:
                report("FAIL", folder, f"{type(e).__name__}: {e}")
    failed = RESULTS.count("FAIL")
    print(f"{RESULTS.count('ok')} passed, {failed} failed, {RESULTS.count('skip')} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
