"""llama.cpp anchor for `kvplan bench`, through llama-cpp-python (not a dependency of kvplan).

The same GGUF file, its own quantised kernels (llama.cpp quantises activations to 8 bits for its
integer dot products; kvplan keeps them f32), the same text and thread count: prefill of each
length (one `eval` of the whole prompt, batches of up to 2048 tokens) and decode steps (one token
per `eval`, the next token of the text) after a prefill of each decode context.

    python tools/bench_llamacpp.py MODEL.gguf [--prefill 512,2048] [--contexts 2048,8160]
        [--decode-tokens 32] [--repeats 2] [--threads 2] [--json FILE]
"""
import json
import time

import llama_cpp
from llama_cpp import Llama

from bench_transformers import TEXT, bench_args


def main():
    args = bench_args(__doc__)
    steps = args.decode_tokens
    n_ctx = max(args.prefill + [c + steps for c in args.contexts])
    llm = Llama(model_path=args.gguf, n_ctx=n_ctx, n_batch=2048, n_threads=args.threads,
                n_threads_batch=args.threads, logits_all=False, verbose=False)
    unit = llm.tokenize(TEXT.encode(), add_bos=False, special=False)

    def ids_of_length(n):
        return [unit[i % len(unit)] for i in range(n)]

    print(f"llama-cpp-python {llama_cpp.__version__} threads {args.threads}")
    out = []
    llm.reset()
    llm.eval(ids_of_length(16))
    for n in args.prefill:
        ids = ids_of_length(n)
        best = float("inf")
        for _ in range(args.repeats):
            llm.reset()
            t = time.perf_counter()
            llm.eval(ids)
            best = min(best, time.perf_counter() - t)
        print(f"prefill {n:>5} tokens: {best:>7.3f} s  {n / best:>8.1f} tokens/s")
        out.append({"phase": "prefill", "tokens": n, "seconds": best})
    for ctx in args.contexts:
        ids = ids_of_length(ctx + steps)
        best = float("inf")
        for _ in range(args.repeats):
            llm.reset()
            llm.eval(ids[:ctx])
            t = time.perf_counter()
            for i in range(steps):
                llm.eval([ids[ctx + i]])
            best = min(best, time.perf_counter() - t)
        print(f"decode  {steps} tokens at {ctx} context: {best:>7.3f} s  {steps / best:>8.2f} tokens/s")
        out.append({"phase": "decode", "context": ctx, "tokens": steps, "seconds": best})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"engine": "llama.cpp", "results": out}, fh, indent=1)


if __name__ == "__main__":
    main()
