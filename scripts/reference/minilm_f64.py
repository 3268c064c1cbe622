#!/usr/bin/env python3
"""f64 reference embeddings of a BERT sentence encoder (all-MiniLM-L6-v2).

    minilm_f64.py MODEL_DIR OUT.json

MODEL_DIR is a Hugging Face-layout directory (config.json, model.safetensors,
tokenizer.json, the sentence-transformers files). The script runs the model
in float64 with numpy, independently of webtune: its own reading of the
safetensors header, exact erf GELU, layer norm with the config's eps, the
attention mask, mean pooling over real tokens and L2 normalisation, each
text truncated at max_seq_length with [CLS] and [SEP] kept. Token ids come
from the model's tokenizer.json through the `tokenizers` package, with the
file's own padding turned off and its truncation set to max_seq_length.

Before writing anything it asserts the published sentence-transformers
example scores of all-MiniLM-L6-v2 (to 4 decimals), and that a padded,
masked batch gives the same embeddings as each text alone.

OUT.json: {"format": 1, "model", "max_seq_length", "dim", "pooling",
"normalize", "pairs": [{"a", "b", "cosine", "published"}],
"texts": [{"label", "text", "token_ids", "tokens_untruncated",
"embedding"}]}; embeddings are L2-normalised float64 lists.
"""

import json
import math
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

PUBLISHED = [
    ("The new movie is awesome", "The new movie is so great", 0.8939),
    ("The cat sits outside", "The cat plays in the garden", 0.6788),
    ("I love pasta", "Do you like pizza?", 0.5096),
]

# Plain prose from which the long texts are cut, so that their tokens are
# ordinary words rather than one token repeated.
PROSE = (
    "Sentence embeddings map a piece of text to a point in a vector space so that texts with "
    "similar meaning land close together. They power semantic search, clustering, duplicate "
    "detection and retrieval for question answering. A small encoder such as this one reads at "
    "most two hundred and fifty six word pieces, mixes them through six layers of self attention "
    "and feed forward networks, averages the token vectors over the real tokens and scales the "
    "result to unit length. Running it inside a web page keeps the user's text on the device, "
    "avoids a round trip to a server and works offline once the weights are cached. The price is "
    "compute: every layer multiplies matrices whose sizes depend on the number of tokens, and the "
    "speed of those products decides how long the user waits. Tuning the kernels for the device "
    "at hand, on the device itself, is how webtune tries to make that wait short on every phone, "
    "laptop and desktop, whatever its processor or graphics card happens to be. Each measurement "
    "is shared so that the next device of the same kind starts with the best known kernels. "
)


def load_safetensors(path):
    """{name: float64 array} from a safetensors file: an 8-byte little-endian
    header length, a JSON header of dtype/shape/data_offsets, then the data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        buf = data[begin:end]
        dtype = info["dtype"]
        if dtype == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif dtype == "F16":
            a = np.frombuffer(buf, dtype="<f2")
        elif dtype == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dtype == "F64":
            a = np.frombuffer(buf, dtype="<f8")
        else:
            continue  # position_ids (I64) and the like: not weights
        out[name] = a.astype(np.float64).reshape(info["shape"])
    return out


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(x):
    """Exact GELU, x·Φ(x), with math.erf on every element."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x, gamma, beta, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


class Bert:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = json.load(f)
        w = load_safetensors(os.path.join(model_dir, "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
        self.w = {k[len(prefix) :]: v for k, v in w.items() if k.startswith(prefix)}
        self.eps = float(self.cfg.get("layer_norm_eps", 1e-12))
        self.heads = int(self.cfg["num_attention_heads"])
        self.layers = int(self.cfg["num_hidden_layers"])
        assert self.cfg.get("hidden_act", "gelu") == "gelu", self.cfg.get("hidden_act")

    def forward(self, ids, mask):
        """Token vectors [B, S, H] of a padded batch; mask [B, S] is 1 for real tokens."""
        w, eps = self.w, self.eps
        b, s = ids.shape
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][np.arange(s)][None, :, :]
        x = x + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        h = x.shape[-1]
        d = h // self.heads
        # Padded keys get -inf before the softmax (a large negative number in
        # the Hugging Face code; both give them weight 0 in float64).
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -np.inf)

        def linear(t, name):
            return t @ w[name + ".weight"].T + w[name + ".bias"]

        def split(t):
            return t.reshape(b, s, self.heads, d).transpose(0, 2, 1, 3)

        for l in range(self.layers):
            p = f"encoder.layer.{l}."
            q = split(linear(x, p + "attention.self.query"))
            k = split(linear(x, p + "attention.self.key"))
            v = split(linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            e = np.exp(scores)
            probs = e / e.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
            a = linear(ctx, p + "attention.output.dense")
            x = layer_norm(a + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
            f = gelu(linear(x, p + "intermediate.dense"))
            f = linear(f, p + "output.dense")
            x = layer_norm(f + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        return x

    def embed(self, batch_ids):
        """L2-normalised mean-pooled embeddings of a list of token id lists,
        run as one batch padded to the longest."""
        s = max(len(t) for t in batch_ids)
        ids = np.zeros((len(batch_ids), s), dtype=np.int64)
        mask = np.zeros((len(batch_ids), s), dtype=np.float64)
        for i, t in enumerate(batch_ids):
            ids[i, : len(t)] = t
            mask[i, : len(t)] = 1.0
        x = self.forward(ids, mask)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norm, 1e-12)


def sentence_transformers_settings(model_dir, cfg):
    """(max_seq_length, pooling, normalize) as the importer reads them."""
    max_len = min(512, int(cfg["max_position_embeddings"]))
    p = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.exists(p):
        with open(p) as f:
            max_len = min(int(json.load(f)["max_seq_length"]), int(cfg["max_position_embeddings"]))
    pooling, normalize = "mean", False
    p = os.path.join(model_dir, "modules.json")
    if os.path.exists(p):
        with open(p) as f:
            modules = json.load(f)
        for m in modules:
            if m["type"].endswith(".Normalize"):
                normalize = True
            if m["type"].endswith(".Pooling"):
                with open(os.path.join(model_dir, m["path"], "config.json")) as f:
                    pc = json.load(f)
                pooling = "cls" if pc.get("pooling_mode_cls_token") else "mean"
    return max_len, pooling, normalize


def cut_to_tokens(tok, n_ids):
    """The longest prefix of PROSE (repeated as needed) whose encoding,
    untruncated and with [CLS] and [SEP], has exactly n_ids ids."""
    words = (PROSE * 4).split()
    lo, hi = 1, len(words)
    # Token count grows with the number of words; find the word count that
    # reaches n_ids, then trim characters if one word overshoots.
    while lo < hi:
        mid = (lo + hi) // 2
        if len(tok.encode(" ".join(words[:mid])).ids) < n_ids:
            lo = mid + 1
        else:
            hi = mid
    text = " ".join(words[:lo])
    while len(tok.encode(text).ids) > n_ids:
        text = text[:-1].rstrip()
    assert len(tok.encode(text).ids) == n_ids, (n_ids, len(tok.encode(text).ids))
    return text


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: minilm_f64.py MODEL_DIR OUT.json")
    model_dir, out_path = sys.argv[1], sys.argv[2]
    model = Bert(model_dir)
    max_len, pooling, normalize = sentence_transformers_settings(model_dir, model.cfg)
    assert pooling == "mean" and normalize, "this reference implements mean pooling with L2 normalisation"

    # Untruncated tokenizer (to count), and the one that encodes: the file
    # pads to a fixed length and truncates at 128; neither is what the model
    # card's sentence-transformers encoding does.
    full = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    full.no_padding()
    full.no_truncation()
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)

    texts = []
    for a, b, _ in PUBLISHED:
        texts += [a, b]
    labels = ["movie_a", "movie_b", "cat_a", "cat_b", "pasta", "pizza"]
    extra = [
        ("empty", ""),
        ("one_word", "hello"),
        ("tokens_255", cut_to_tokens(full, 255)),
        ("tokens_300", cut_to_tokens(full, 300)),
        ("accents", "Crème brûlée à Zürich: señor Müller's naïve café résumé, déjà vu."),
        ("cjk", "我喜欢在公园里散步。東京は日本の首都です。서울은 한국의 수도입니다."),
        ("emoji", "I love pizza 🍕😀 and rainy days ☔️🌧️ 👍🏽"),
        ("mixed", "Mixed: café 東京 🍕 C++ & rust_lang v1.95 — 42% off!!! <b>bold</b> über-fast \t tabs\nnew lines"),
    ]
    labels += [l for l, _ in extra]
    texts += [t for _, t in extra]

    ids = []
    for t in texts:
        e = tok.encode(t)
        assert e.ids[0] == 101 and e.ids[-1] == 102, "each encoding starts with [CLS] and ends with [SEP]"
        ids.append(list(e.ids))
    untrunc = [len(full.encode(t).ids) for t in texts]
    by_label = dict(zip(labels, range(len(texts))))
    assert len(ids[by_label["tokens_255"]]) == 255 and untrunc[by_label["tokens_255"]] == 255
    assert len(ids[by_label["tokens_300"]]) == max_len and untrunc[by_label["tokens_300"]] == 300

    # Each text alone (no padding at all).
    emb = []
    for i, t in enumerate(ids):
        print(f"  f64 forward {i + 1}/{len(ids)} ({len(t)} tokens)", file=sys.stderr)
        emb.append(model.embed([t])[0])
    emb = np.array(emb)

    # The short texts again as one padded, masked batch: the mask must make
    # padding invisible.
    short = [i for i, t in enumerate(ids) if len(t) <= 64]
    batched = model.embed([ids[i] for i in short])
    worst = float(np.abs(batched - emb[short]).max())
    assert worst < 1e-12, f"a padded, masked batch differs from the texts alone by {worst:e}"

    pairs = []
    for a, b, published in PUBLISHED:
        cos = float(emb[texts.index(a)] @ emb[texts.index(b)])
        print(f"  cosine({a!r}, {b!r}) = {cos:.6f} (published {published})", file=sys.stderr)
        assert abs(cos - published) < 5e-5, f"cosine({a!r}, {b!r}) = {cos:.6f}, published {published}"
        pairs.append({"a": a, "b": b, "cosine": cos, "published": published})

    out = {
        "format": 1,
        "model": "all-MiniLM-L6-v2",
        "max_seq_length": max_len,
        "dim": int(emb.shape[1]),
        "pooling": pooling,
        "normalize": normalize,
        "pairs": pairs,
        "texts": [
            {"label": l, "text": t, "token_ids": i, "tokens_untruncated": u, "embedding": e.tolist()}
            for l, t, i, u, e in zip(labels, texts, ids, untrunc, emb)
        ],
    }
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    os.replace(tmp, out_path)
    print(f"  wrote {out_path}: {len(texts)} texts", file=sys.stderr)


if __name__ == "__main__":
    main()
