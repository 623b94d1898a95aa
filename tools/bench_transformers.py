"""Hugging Face transformers baseline for `kvplan bench` (not a dependency of kvplan).

Same measurements as `kvplan bench`: prefill of the same text (logits for the last position
only, float32, sdpa attention) and greedy-free decode steps (the next token of the text) after a
prefill of each decode context. Run by tools/bench_side_by_side.sh beside `kvplan bench` and
llama.cpp (tools/bench_llamacpp.py) in one session, so all see the same machine state.

    python tools/bench_transformers.py MODEL.gguf [--prefill 512,2048] [--contexts 2048,8160]
        [--decode-tokens 32] [--repeats 2] [--threads 2] [--json FILE]
"""
import argparse
import json
import os
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

# kvplan bench's paragraph (src/cmd/bench.rs TEXT), repeated to the lengths measured.
TEXT = ("The river runs past the old mill, where the miller's children once counted "
        "the boats going down to the sea. In the spring the water rises and covers the lower field; in "
        "the autumn it falls again, leaving mud, reeds and the smell of rain. Nobody remembers who built "
        "the bridge, but everyone agrees that it was built to last. ")


def ids_of_length(tok, n):
    unit = tok(TEXT, add_special_tokens=False)["input_ids"]
    return [unit[i % len(unit)] for i in range(n)]


def ints(s):
    return [int(x) for x in s.split(",") if x]


def bench_args(doc):
    """The options every anchor takes (the same as tools/bench_side_by_side.sh passes)."""
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("gguf")
    ap.add_argument("--prefill", type=ints, default=[512, 2048])
    ap.add_argument("--contexts", type=ints, default=[2048])
    ap.add_argument("--decode-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    return ap.parse_args()


def main():
    args = bench_args(__doc__)
    torch.set_num_threads(args.threads)
    gguf = os.path.abspath(args.gguf)
    d, f = os.path.dirname(gguf), os.path.basename(gguf)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="sdpa").eval()
    print(f"transformers {__import__('transformers').__version__} torch {torch.__version__} "
          f"threads {torch.get_num_threads()}")
    out = []
    with torch.inference_mode():
        model(torch.tensor([ids_of_length(tok, 16)]), logits_to_keep=1)
        for n in args.prefill:
            x = torch.tensor([ids_of_length(tok, n)])
            best = min(_timed(lambda: model(x, logits_to_keep=1, use_cache=True))
                       for _ in range(args.repeats))
            print(f"prefill {n:>5} tokens: {best:>7.3f} s  {n / best:>8.1f} tokens/s")
            out.append({"phase": "prefill", "tokens": n, "seconds": best})
        steps = args.decode_tokens
        for ctx in args.contexts:
            ids = ids_of_length(tok, ctx + steps)
            best = float("inf")
            for _ in range(args.repeats):
                o = model(torch.tensor([ids[:ctx]]), logits_to_keep=1, use_cache=True)
                past = o.past_key_values
                t = time.perf_counter()
                for i in range(steps):
                    o = model(torch.tensor([[ids[ctx + i]]]), past_key_values=past,
                              use_cache=True, logits_to_keep=1)
                    past = o.past_key_values
                best = min(best, time.perf_counter() - t)
            print(f"decode  {steps} tokens at {ctx} context: {best:>7.3f} s  "
                  f"{steps / best:>8.2f} tokens/s")
            out.append({"phase": "decode", "context": ctx, "tokens": steps, "seconds": best})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"engine": "transformers", "results": out}, fh, indent=1)


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
