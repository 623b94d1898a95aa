"""Hugging Face transformers baseline for `kvplan bench` (not a dependency of kvplan).

Same measurements as `kvplan bench`: prefill of the same token ids (logits for the last position
only, float32, sdpa attention) and greedy decode steps after a 2K-token prefill. Run it beside
`kvplan bench` in one session (tools/bench_side_by_side.sh) so both see the same machine state.

Set-up (a debugging environment, ~3 GB of wheels, kept out of the project):
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install torch transformers gguf accelerate
Usage:
    /tmp/ref/bin/python tools/bench_transformers.py ~/.cache/kvplan/models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json, os, sys, time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

TEXT = ("The river runs past the old mill, where the miller's children once counted "
        "the boats going down to the sea. In the spring the water rises and covers the lower field; in "
        "the autumn it falls again, leaving mud, reeds and the smell of rain. Nobody remembers who built "
        "the bridge, but everyone agrees that it was built to last. ")


def ids_of_length(tok, n):
    unit = tok(TEXT, add_special_tokens=False)["input_ids"]
    return [unit[i % len(unit)] for i in range(n)]


def main():
    gguf = os.path.abspath(sys.argv[1])
    prefill = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "512,2048").split(",")]
    ctx, steps, repeats = 2048, 32, 2
    d, f = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32,
                                                 attn_implementation="sdpa").eval()
    print(f"transformers {__import__('transformers').__version__} torch {torch.__version__} "
          f"threads {torch.get_num_threads()}")
    out = []
    with torch.inference_mode():
        model(torch.tensor([ids_of_length(tok, 16)]), logits_to_keep=1)
        for n in prefill:
            x = torch.tensor([ids_of_length(tok, n)])
            best = min(_timed(lambda: model(x, logits_to_keep=1, use_cache=True)) for _ in range(repeats))
            print(f"prefill {n:>5} tokens: {best:>7.3f} s  {n / best:>8.1f} tokens/s")
            out.append({"phase": "prefill", "tokens": n, "seconds": best})
        ids = ids_of_length(tok, ctx + steps)
        best = float("inf")
        for _ in range(repeats):
            o = model(torch.tensor([ids[:ctx]]), logits_to_keep=1, use_cache=True)
            past = o.past_key_values
            t = time.perf_counter()
            for i in range(steps):
                o = model(torch.tensor([[ids[ctx + i]]]), past_key_values=past, use_cache=True, logits_to_keep=1)
                past = o.past_key_values
            best = min(best, time.perf_counter() - t)
        print(f"decode  {steps} tokens at {ctx} context: {best:>7.3f} s  {steps / best:>8.2f} tokens/s")
        out.append({"phase": "decode", "context": ctx, "tokens": steps, "seconds": best})
    print(json.dumps(out))


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
