#!/usr/bin/env python3
"""llama.cpp's own integer path on a catalog model, against the transformers fixture.

llama.cpp multiplies quantised weights with activations it quantises to 8 bits (`Q8_0`/`Q8_K`
blocks), as kvplan's `--kernels int8` does; this prints how far its logits land from
transformers' float32 ones (`tests/fixtures/<model>/logits.json`): the last position's largest
absolute difference and the positions whose argmax differs — the scale that
`tests/int8_parity.rs::int8_cost_on_the_catalog_models` sets kvplan's integer path beside.

    ~/ref/bin/python tools/int8_llamacpp.py ~/.cache/kvplan/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        tests/fixtures/smollm2/logits.json

Needs llama-cpp-python (0.3.36 was used) and numpy in a venv outside the repository; f32 KV
cache, 2 threads.
"""
import json
import sys

import numpy as np
from llama_cpp import Llama

path, fixture = sys.argv[1], sys.argv[2]
d = json.load(open(fixture))
llm = Llama(model_path=path, n_ctx=512, logits_all=True, n_threads=2, verbose=False,
            type_k=0, type_v=0)
for case in [c for c in ["prompt", "chat"] if c in d]:
    ids = d[case]["ids"]
    llm.reset()
    llm.eval(ids)
    scores = np.array(llm.scores[:len(ids)])
    want = np.array(d[case]["last_logits"])
    top = [r[0] for r in d[case]["top10_ids_per_position"]]
    off = [i for i, a in enumerate(scores.argmax(axis=1)) if a != top[i]]
    print(f"{case} ({len(ids)} tokens): last logits {np.abs(scores[-1] - want).max():.3f} from "
          f"transformers, argmax off at {off}")
