#!/usr/bin/env python3
"""What llm_peers.mjs needs from the GGUF files, as JSON:
- "prompts": for 128 and 894 tokens, a text and its token ids, so that wllama
  (whose completion API takes text only) and webtune prefill exactly the
  same tokens: plain prose (scripts/reference/smollm2_f64.py's fixed text,
  repeated, starting at the first word where this works) cut at a word
  boundary after exactly that many tokens, so that the text tokenises back
  to the same ids; tokenised by that script's `tokenizers` tokenizer, built
  from the first file's own metadata (byte-level BPE; SmolLM2 adds no BOS);
- "tensor_bytes": per file (by base name), the bytes of its tensor data,
  which a decode step reads whole (the output head is the tied embedding
  matrix, so all of it is read; the norms are a few KB).

    ~/.cache/webtune/venv/bin/python research/web-bench/llm_prompts.py OUT.json MODEL.gguf [MORE.gguf ...]
"""

import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "reference"))
from gguf import GGUFReader  # noqa: E402
from smollm2_f64 import PROSE, field, hf_tokenizer  # noqa: E402

LENGTHS = (128, 894)


def main(dst, src, *more):
    r = GGUFReader(src)
    if field(r, "tokenizer.ggml.add_bos_token", False):
        sys.exit(f"llm_prompts: {src} adds a BOS token; these prompts are written for a model that does not")
    g = SimpleNamespace(tokens=field(r, "tokenizer.ggml.tokens"), token_types=field(r, "tokenizer.ggml.token_type"), merges=field(r, "tokenizer.ggml.merges"))
    tok = hf_tokenizer(g)
    words = (PROSE * 8).split(" ")
    out = {}
    for n in LENGTHS:
        for start in range(200):
            ids = tok.encode(" ".join(words[start:]), add_special_tokens=False).ids
            text = tok.decode(ids[:n])
            # The next token starts a word, and the cut text tokenises back to the same ids.
            if len(ids) > n and g.tokens[ids[n]].startswith("\u0120") and tok.encode(text, add_special_tokens=False).ids == ids[:n]:
                out[str(n)] = {"text": text, "ids": ids[:n]}
                break
        else:
            sys.exit(f"llm_prompts: no cut of the prose gives exactly {n} tokens at a word boundary")
    sizes = {os.path.basename(f): sum(int(t.n_bytes) for t in GGUFReader(f).tensors) for f in (src, *more)}
    out = {"gguf": os.path.basename(src), "prompts": out, "tensor_bytes": sizes}
    tmp = f"{dst}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.replace(tmp, dst)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: llm_prompts.py OUT.json MODEL.gguf [MORE.gguf ...]")
    main(*sys.argv[1:])
