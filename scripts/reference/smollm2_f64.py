#!/usr/bin/env python3
"""f64 reference generation and tokenization of SmolLM2-135M-Instruct (a llama GGUF).

    smollm2_f64.py MODEL.gguf OUT.json

What it computes. The model's forward pass in float64 with numpy, straight
from the GGUF, for a fixed set of prompts (plain text and ChatML chat,
short and a few hundred tokens): token embedding; 30 blocks of [RMSNorm
(eps from the file, times its weight); Q, K, V; RoPE on ADJACENT pairs
(x[2i], x[2i+1]) rotated by pos * base^(-2i/64), llama.cpp's rope type
NORM, which the GGUF converter permuted Q and K for; grouped-query causal
attention (query head h reads KV head h // (heads / kv_heads)), scaled by
1/sqrt(head_dim); output projection; residual; RMSNorm; SwiGLU
down(silu(gate) * up); residual]; final RMSNorm; the output head (tied to
token_embd when the file has no output.weight). A KV cache makes generation
incremental: the prompt is one prefill, then one token per step. Each prompt
is decoded greedily for STEPS steps (never stopping at an end-of-generation
token, so every prompt has STEPS steps; `first_eog_step` says where a
runtime would stop): step s's logits are those after the prompt plus the
reference's own greedy tokens 0..s-1, so a runtime teacher-forced on
`greedy_ids` sees the same inputs.

How it is independent of webtune. Tensors are read and dequantised by the
`gguf` Python package (llama.cpp's own reader and numpy dequantisers),
not by webtune's Rust importer; f16 -> f32 is exact and the package rounds
Q4_1's d*q + m to f32 (at most half an f32 ulp per weight, far below the
0.05 logit bound), then everything runs in f64. The chat text is rendered
from the file's own tokenizer.chat_template with jinja2 (as Hugging Face's
apply_chat_template does). Token ids come from two tokenizers built here
from the GGUF metadata that must agree on every string: the `tokenizers`
package (a tokenizer.json-equivalent: byte-level BPE, the `smollm`
pre-tokenizer = individual digits then the GPT-2 regex, the CONTROL tokens
as special added tokens), and a small pure-Python byte-level BPE written
from llama.cpp's definition of the same pre-tokenizer.

Checks before anything is written (the script fails otherwise):
- the prompt run as one prefill and token by token gives the same logits
  (to 1e-9): the KV cache and the causal mask agree;
- on a natural sentence, RoPE on adjacent pairs has a far lower negative
  log-likelihood than RoPE on halves (x[i], x[i+32]): the pairing is right;
- the greedy answer to "What is the capital of France?" (chat) says Paris;
- both tokenizers give the same ids, and decoding gives the text back.

OUT.json (format 1):
{ "format": 1, "model": "SmolLM2-135M-Instruct",
  "source": {"file", "sha256"},
  "config": {vocab_size, hidden_size, num_layers, num_heads, num_kv_heads,
             head_dim, ffn_size, rope_theta, rms_eps, context_length,
             tied_embeddings},
  "eog_ids": [0, 2, 4], "steps": 32,
  "fixed_ids": [16 vocabulary ids whose logits every step records],
  "checks": {"incremental_max_abs_diff", "rope_adjacent_nll",
             "rope_halves_nll", "rope_sentence"},
  "prompts": [{
     "label", "kind": "plain" | "chat",
     "messages": [{"role", "content"}] (chat only; rendered with
                 add_generation_prompt = true),
     "text": the exact prompt text (the rendered template for chat),
     "token_ids": its ids (no BOS; special tokens in the text are parsed),
     "greedy_ids": [steps ids], "greedy_text": their decoding,
     "first_eog_step": index of the first end-of-generation id in
                       greedy_ids, or null,
     "steps": [{"token": greedy id, "margin": top1 - top2 logit,
                "logsumexp": log(sum(exp(logits))) (so log-probs can be
                compared: logprob = logit - logsumexp),
                "top_ids": the 16 highest-logit ids, best first,
                "top_logits": their logits,
                "fixed_logits": the logits of fixed_ids}],
     "logits0_f32": base64 of the step-0 logits, all vocab_size of them,
                    little-endian float32 }],
  "tokenizer": [{"label", "text", "ids", "decoded"}] }
Logits are plain JSON floats (float64) except logits0_f32.
"""

import base64
import hashlib
import json
import math
import os
import sys
import time

# One BLAS thread: a decode step is matrix-vector products, bound by memory,
# and on a busy 2-core machine two BLAS threads made them 20x slower here.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import jinja2  # noqa: E402
import jinja2.sandbox  # noqa: E402
import numpy as np  # noqa: E402
import regex  # noqa: E402
from gguf import GGMLQuantizationType, GGUFReader  # noqa: E402
from gguf.quants import dequantize  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402

STEPS = 32
TOP = 16
FIXED_IDS = [0, 1, 2, 4, 17, 198, 314, 1000, 3000, 7000, 12000, 18000, 25000, 33000, 41000, 49151]

# Plain prose for the long prompts: fixed text, so the reference is
# deterministic and needs no network.
PROSE = (
    "The lighthouse stood at the end of a narrow spit of rock, and for most of the year the only "
    "visitors were gulls and the men who brought oil and bread once a fortnight. The keeper kept a "
    "log of every ship that passed: its name when he could read it, the direction of the wind, the "
    "height of the waves and the hour at which the lamp was lit. Over forty years the log filled "
    "eleven thick volumes. When the light was finally automated, a historian from the city came to "
    "collect them, expecting dull columns of numbers. Instead she found, between the entries, small "
    "drawings of clouds, notes about the birds that nested on the gallery, recipes for fish soup, "
    "and letters to a daughter who had moved abroad and never written back. The historian read the "
    "volumes in order during one long winter. In the spring she published a short book about the "
    "keeper, the ships and the sea, and the daughter, by then an old woman, read it and travelled "
    "back to the coast to see the lighthouse for herself. "
)

# A natural sentence for the RoPE pairing check.
ROPE_SENTENCE = (
    "The quick brown fox jumps over the lazy dog. Paris is the capital and largest city of France, "
    "and it is known for the Eiffel Tower, the Louvre museum and its cafes."
)


# --- GGUF --------------------------------------------------------------------


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


class Gguf:
    """The llama hyperparameters, tokenizer metadata and f64 weights of a GGUF."""

    def __init__(self, path):
        r = GGUFReader(path)
        arch = field(r, "general.architecture")
        assert arch == "llama", f"architecture {arch!r}, this reference implements llama"
        self.chat_template = field(r, "tokenizer.chat_template")
        self.tokens = field(r, "tokenizer.ggml.tokens")
        self.token_types = field(r, "tokenizer.ggml.token_type")
        self.merges = field(r, "tokenizer.ggml.merges")
        self.pre = field(r, "tokenizer.ggml.pre", "default")
        assert field(r, "tokenizer.ggml.model") == "gpt2", "this reference implements byte-level BPE"
        assert not field(r, "tokenizer.ggml.add_bos_token", False), "SmolLM2 adds no BOS"
        self.eos_id = int(field(r, "tokenizer.ggml.eos_token_id"))
        n_head = int(field(r, "llama.attention.head_count"))
        hidden = int(field(r, "llama.embedding_length"))
        self.cfg = {
            "vocab_size": len(self.tokens),
            "hidden_size": hidden,
            "num_layers": int(field(r, "llama.block_count")),
            "num_heads": n_head,
            "num_kv_heads": int(field(r, "llama.attention.head_count_kv", n_head)),
            "head_dim": hidden // n_head,
            "ffn_size": int(field(r, "llama.feed_forward_length")),
            "rope_theta": float(field(r, "llama.rope.freq_base", 10000.0)),
            "rms_eps": float(field(r, "llama.attention.layer_norm_rms_epsilon")),
            "context_length": int(field(r, "llama.context_length")),
        }
        assert int(field(r, "llama.rope.dimension_count", self.cfg["head_dim"])) == self.cfg["head_dim"]
        self.w = {}
        self.types = {}
        for t in r.tensors:
            name = t.name[: -len(".weight")] if t.name.endswith(".weight") else t.name
            # GGUF shapes list the fastest dimension first: [K, N] is a row-major [N][K].
            shape = [int(x) for x in reversed(t.shape.tolist())]
            if t.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
                a = np.asarray(t.data)
            else:
                a = dequantize(np.asarray(t.data), t.tensor_type)
            self.w[name] = np.asarray(a, dtype=np.float64).reshape(shape)
            self.types[name] = t.tensor_type.name
        self.cfg["tied_embeddings"] = "output" not in self.w


# --- Model -------------------------------------------------------------------


def rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * weight


def silu(x):
    return x / (1.0 + np.exp(-x))


class Llama:
    def __init__(self, g, rope="adjacent"):
        c = g.cfg
        self.c = c
        self.w = g.w
        self.rope = rope
        hd = c["head_dim"]
        self.inv_freq = c["rope_theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        self.head = g.w["token_embd"] if c["tied_embeddings"] else g.w["output"]
        L, H = c["num_layers"], c["hidden_size"]
        for i in range(L):
            for n, shape in [
                ("attn_norm", [H]),
                ("attn_q", [c["num_heads"] * hd, H]),
                ("attn_k", [c["num_kv_heads"] * hd, H]),
                ("attn_v", [c["num_kv_heads"] * hd, H]),
                ("attn_output", [H, c["num_heads"] * hd]),
                ("ffn_norm", [H]),
                ("ffn_gate", [c["ffn_size"], H]),
                ("ffn_up", [c["ffn_size"], H]),
                ("ffn_down", [H, c["ffn_size"]]),
            ]:
                got = list(g.w[f"blk.{i}.{n}"].shape)
                assert got == shape, f"blk.{i}.{n}: shape {got}, expected {shape}"
        assert list(g.w["token_embd"].shape) == [c["vocab_size"], H]

    def new_cache(self):
        return {"k": [None] * self.c["num_layers"], "v": [None] * self.c["num_layers"], "len": 0}

    def apply_rope(self, x, pos):
        """x [T, heads, hd], pos [T]."""
        ang = pos[:, None] * self.inv_freq[None, :]  # [T, hd/2]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        hd = x.shape[-1]
        if self.rope == "adjacent":
            a, b = x[..., 0::2], x[..., 1::2]
        else:  # "halves", the NEOX convention; used only to check the pairing
            a, b = x[..., : hd // 2], x[..., hd // 2 :]
        ra, rb = a * cos - b * sin, a * sin + b * cos
        out = np.empty_like(x)
        if self.rope == "adjacent":
            out[..., 0::2], out[..., 1::2] = ra, rb
        else:
            out[..., : hd // 2], out[..., hd // 2 :] = ra, rb
        return out

    def forward(self, ids, cache, all_logits=False):
        """Runs the new tokens `ids` at positions cache["len"].. and appends
        their keys and values to the cache. Returns the logits of the last
        position [V], or of every new position [T, V] with all_logits."""
        c, w = self.c, self.w
        nh, nkv, hd, eps = c["num_heads"], c["num_kv_heads"], c["head_dim"], c["rms_eps"]
        group = nh // nkv
        t = len(ids)
        p0 = cache["len"]
        pos = np.arange(p0, p0 + t, dtype=np.float64)
        x = w["token_embd"][np.asarray(ids)]  # [T, H]
        # Causal mask over the whole cache: new position i sees keys 0..p0+i.
        keys_pos = np.arange(p0 + t)
        mask = np.where(keys_pos[None, :] <= (p0 + np.arange(t))[:, None], 0.0, -np.inf)  # [T, S]
        for i in range(c["num_layers"]):
            p = f"blk.{i}."
            h = rms_norm(x, w[p + "attn_norm"], eps)
            q = (h @ w[p + "attn_q"].T).reshape(t, nh, hd)
            k = (h @ w[p + "attn_k"].T).reshape(t, nkv, hd)
            v = (h @ w[p + "attn_v"].T).reshape(t, nkv, hd)
            q, k = self.apply_rope(q, pos), self.apply_rope(k, pos)
            if cache["k"][i] is None:
                cache["k"][i], cache["v"][i] = k, v
            else:
                cache["k"][i] = np.concatenate([cache["k"][i], k])
                cache["v"][i] = np.concatenate([cache["v"][i], v])
            K, V = cache["k"][i], cache["v"][i]  # [S, nkv, hd]
            kh = np.repeat(K.transpose(1, 0, 2), group, axis=0)  # [nh, S, hd]
            vh = np.repeat(V.transpose(1, 0, 2), group, axis=0)
            scores = q.transpose(1, 0, 2) @ kh.transpose(0, 2, 1) / math.sqrt(hd) + mask[None]  # [nh, T, S]
            scores = scores - scores.max(axis=-1, keepdims=True)
            e = np.exp(scores)
            probs = e / e.sum(axis=-1, keepdims=True)
            ctx = (probs @ vh).transpose(1, 0, 2).reshape(t, nh * hd)
            x = x + ctx @ w[p + "attn_output"].T
            h = rms_norm(x, w[p + "ffn_norm"], eps)
            f = silu(h @ w[p + "ffn_gate"].T) * (h @ w[p + "ffn_up"].T)
            x = x + f @ w[p + "ffn_down"].T
        cache["len"] = p0 + t
        x = rms_norm(x if all_logits else x[-1:], w["output_norm"], eps)
        logits = x @ self.head.T
        return logits if all_logits else logits[0]


def logsumexp(v):
    m = v.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(v - m).sum(axis=-1, keepdims=True)))[..., 0]


def mean_nll(model, ids):
    """Mean negative log-likelihood of ids[1:] given their prefixes."""
    logits = model.forward(ids, model.new_cache(), all_logits=True)
    lp = logits[:-1] - logsumexp(logits[:-1])[:, None]
    return float(-lp[np.arange(len(ids) - 1), ids[1:]].mean())


# --- Tokenizers --------------------------------------------------------------

# llama.cpp's `smollm` pre-tokenizer: every digit alone, then the GPT-2 regex
# (with its whitespace fallback) on the pieces between.
DIGIT = regex.compile(r"\p{N}")
GPT2 = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's byte -> printable character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class PyBpe:
    """A byte-level BPE written from the definitions (no `tokenizers`)."""

    def __init__(self, g):
        assert g.pre == "smollm", f"pre-tokenizer {g.pre!r}: this reference implements smollm"
        self.vocab = {t: i for i, t in enumerate(g.tokens)}
        self.tokens = g.tokens
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(g.merges)}
        self.special = {g.tokens[i]: i for i, ty in enumerate(g.token_types) if ty in (3, 4)}
        # Longest first, so that a special token that is a prefix of another loses.
        self.special_re = regex.compile("|".join(regex.escape(s) for s in sorted(self.special, key=len, reverse=True)))
        self.b2u = bytes_to_unicode()
        self.u2b = {c: b for b, c in self.b2u.items()}
        self.memo = {}

    def bpe(self, word):
        if word in self.memo:
            return self.memo[word]
        parts = list(word)
        while len(parts) > 1:
            best, at = None, -1
            for j in range(len(parts) - 1):
                r = self.ranks.get((parts[j], parts[j + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, j
            if best is None:
                break
            # Merge every occurrence of the best pair, left to right.
            a, b = parts[at], parts[at + 1]
            out, j = [], 0
            while j < len(parts):
                if j < len(parts) - 1 and parts[j] == a and parts[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(parts[j])
                    j += 1
            parts = out
        ids = [self.vocab[p] for p in parts]
        self.memo[word] = ids
        return ids

    def encode_plain(self, text):
        ids = []
        pieces, last = [], 0
        for m in DIGIT.finditer(text):
            pieces += [text[last : m.start()], m.group()]
            last = m.end()
        pieces.append(text[last:])
        for piece in pieces:
            for m in GPT2.finditer(piece):
                ids += self.bpe("".join(self.b2u[b] for b in m.group().encode("utf-8")))
        return ids

    def encode(self, text):
        ids, last = [], 0
        for m in self.special_re.finditer(text):
            ids += self.encode_plain(text[last : m.start()])
            ids.append(self.special[m.group()])
            last = m.end()
        return ids + self.encode_plain(text[last:])

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            out += t.encode("utf-8") if t in self.special else bytes(self.u2b[c] for c in t)
        return out.decode("utf-8", errors="replace")


def hf_tokenizer(g):
    """The `tokenizers` package's tokenizer for the GGUF metadata, as the
    tokenizer.json a runtime reads describes it."""
    vocab = {t: i for i, t in enumerate(g.tokens)}
    merges = [tuple(m.split(" ")) for m in g.merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False, ignore_merges=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [
            AddedToken(g.tokens[i], special=(ty == 3), normalized=False, lstrip=False, rstrip=False, single_word=False)
            for i, ty in enumerate(g.token_types)
            if ty in (3, 4)
        ]
    )
    return tok


class Tokenizers:
    """Both tokenizers; every encoding is checked to agree."""

    def __init__(self, g):
        self.py = PyBpe(g)
        self.hf = hf_tokenizer(g)

    def encode(self, text):
        a = self.py.encode(text)
        b = self.hf.encode(text, add_special_tokens=False).ids
        assert a == b, f"the two tokenizers disagree on {text!r}:\n  python     {a}\n  tokenizers {b}"
        return a

    def decode(self, ids):
        a = self.py.decode(ids)
        b = self.hf.decode(ids, skip_special_tokens=False)
        assert a == b, f"the two decoders disagree on {ids}: {a!r} vs {b!r}"
        return a


TOKENIZER_TEXTS = [
    ("empty", ""),
    ("hello", "Hello world"),
    ("accents", "Crème brûlée à Zürich: señor Müller's naïve café résumé, déjà vu. Ångström, Øresund, ŁÓDŹ."),
    ("cjk", "我喜欢在公园里散步。東京は日本の首都です。서울은 한국의 수도입니다."),
    ("emoji", "I love pizza 🍕😀 and rainy days ☔️🌧️ 👍🏽 family 👨‍👩‍👧 flags 🇫🇷🇯🇵"),
    ("scripts", "Привет, мир! Γειά σου Κόσμε! مرحبا بالعالم नमस्ते दुनिया שלום"),
    ("python", "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"),
    ("rust", 'fn main() {\n\tlet v: Vec<u32> = (0..10).collect();\n\tprintln!("{v:?} -> {}", v.len());\n}'),
    ("whitespace", "a  b   c    d\t\te\n\n\nf \n g   \r\n h     \u3000i\u00a0j   "),
    ("digits", "Pi is 3.14159265358979; on 2026-11-28 it cost $1,234,567.89 (007 agents x10000, ½ ² ٣)."),
    ("contractions", "I'm sure you'll see they've done it, he'd said. DON'T SHOUT, it's 'quoted'."),
    ("chatml", "<|im_start|>user\nhi<|im_end|>"),
    ("chatml_full", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"),
    ("specials_adjacent", "<|endoftext|><|endoftext|>text<|im_end|><repo_name>x<file_sep>"),
    ("not_special", "< |im_start| > almost <|im_start and |im_end|> and <|IM_START|>"),
    ("leading_trailing", "  leading spaces and trailing  "),
    ("odd_unicode", "zero\u200bwidth, nbsp\u00a0here, combining e\u0301 vs \u00e9, ligature \ufb01, rtl \u202eabc"),
    ("repeats", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!!!!!!!!!!!----------==========......"),
    ("url_json", 'Visit https://example.com/path?q=1&r=two#frag or {"key": [1, 2.5e-3, null, true], "k2": "v"}'),
    ("markdown", "# Title\n\n- item **bold** _it_\n- `code` [link](http://x.y)\n\n| a | b |\n|---|---|\n"),
    ("newlines_only", "\n\n\n\n"),
]


# --- Prompts -----------------------------------------------------------------


def render_chat(template, messages):
    """The file's chat template, rendered as Hugging Face's apply_chat_template
    (and @huggingface/jinja) does, with the generation prompt."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token="", eos_token="<|im_end|>")


def prompts(template):
    long_plain = (PROSE + PROSE.replace("lighthouse", "tower").replace("keeper", "watchman")).strip()
    long_chat = PROSE.strip() + "\n\nSummarize the story above in three sentences."
    out = [
        ("plain_short", "plain", None, "The capital of France is"),
        ("plain_code", "plain", None, "def fibonacci(n):\n    "),
        ("plain_long", "plain", None, long_plain),
        ("chat_short", "chat", [{"role": "user", "content": "What is the capital of France?"}], None),
        ("chat_poem", "chat", [{"role": "user", "content": "Write a short poem about the sea."}], None),
        (
            "chat_system_multiturn",
            "chat",
            [
                {"role": "system", "content": "You are a concise assistant who answers in English."},
                {"role": "user", "content": "Name three primary colors."},
                {"role": "assistant", "content": "Red, yellow and blue."},
                {"role": "user", "content": "And which two of them make green?"},
            ],
            None,
        ),
        ("chat_long", "chat", [{"role": "user", "content": long_chat}], None),
    ]
    return [(l, k, m, render_chat(template, m) if k == "chat" else t) for l, k, m, t in out]


def step_record(logits, fixed):
    order = np.argsort(-logits, kind="stable")
    top = order[:TOP]
    return {
        "token": int(order[0]),
        "margin": float(logits[order[0]] - logits[order[1]]),
        "logsumexp": float(logsumexp(logits)),
        "top_ids": [int(i) for i in top],
        "top_logits": [float(logits[i]) for i in top],
        "fixed_logits": [float(logits[i]) for i in fixed],
    }


def generate(model, ids, steps):
    """Greedy, STEPS steps; returns (greedy ids, per-step logits)."""
    cache = model.new_cache()
    logits = model.forward(ids, cache)
    greedy, all_logits = [], []
    for s in range(steps):
        all_logits.append(logits)
        t = int(np.argmax(logits))
        greedy.append(t)
        if s + 1 < steps:
            logits = model.forward([t], cache)
    return greedy, all_logits


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: smollm2_f64.py MODEL.gguf OUT.json")
    gguf_path, out_path = sys.argv[1], sys.argv[2]
    t0 = time.time()
    with open(gguf_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    g = Gguf(gguf_path)
    print(f"  read and dequantised {len(g.w)} tensors in {time.time() - t0:.1f} s", file=sys.stderr)
    # End of generation, as llama.cpp and the bundle's `eog_ids` have it for
    # this vocabulary: the eos token and the tokens named below (0, 2, 4).
    eog = sorted({g.eos_id} | {i for i, t in enumerate(g.tokens) if t in ("<|endoftext|>", "<|im_end|>", "<reponame>")})
    toks = Tokenizers(g)
    model = Llama(g, rope="adjacent")

    # The RoPE pairing: adjacent pairs must explain natural text far better.
    ids = toks.encode(ROPE_SENTENCE)
    nll_adj = mean_nll(model, ids)
    nll_half = mean_nll(Llama(g, rope="halves"), ids)
    print(f"  RoPE check: mean NLL {nll_adj:.3f} (adjacent pairs) vs {nll_half:.3f} (halves)", file=sys.stderr)
    assert nll_adj < 3.5 and nll_adj + 1.0 < nll_half, "RoPE on adjacent pairs does not explain natural text"

    # The KV cache: one prefill equals token by token.
    short = ids[:12]
    whole = model.forward(short, model.new_cache(), all_logits=True)
    cache = model.new_cache()
    inc = np.array([model.forward([t], cache) for t in short])
    diff = float(np.abs(whole - inc).max())
    print(f"  KV-cache check: prefill vs token by token, max |diff| {diff:.2e}", file=sys.stderr)
    assert diff < 1e-9, f"prefill and incremental logits differ by {diff:e}"

    records = []
    for label, kind, messages, text in prompts(g.chat_template):
        t1 = time.time()
        ids = toks.encode(text)
        assert toks.decode(ids) == text, f"{label}: the prompt does not round-trip"
        greedy, logits = generate(model, ids, STEPS)
        gtext = toks.decode(greedy)
        first_eog = next((s for s, t in enumerate(greedy) if t in eog), None)
        print(
            f"  {label}: {len(ids)} prompt tokens, {STEPS} steps in {time.time() - t1:.1f} s, "
            f"min margin {min(float(np.sort(l)[-1] - np.sort(l)[-2]) for l in logits):.4f}, "
            f"first EOG step {first_eog}\n    -> {gtext!r}",
            file=sys.stderr,
        )
        if label == "chat_short":
            answer = toks.decode(greedy[:first_eog])
            assert "Paris" in answer, f"the reference answers {answer!r} to the capital of France"
        rec = {"label": label, "kind": kind}
        if messages is not None:
            rec["messages"] = messages
        rec.update(
            {
                "text": text,
                "token_ids": ids,
                "greedy_ids": greedy,
                "greedy_text": gtext,
                "first_eog_step": first_eog,
                "steps": [step_record(l, FIXED_IDS) for l in logits],
                "logits0_f32": base64.b64encode(logits[0].astype("<f4").tobytes()).decode("ascii"),
            }
        )
        records.append(rec)

    tok_records = []
    for label, text in TOKENIZER_TEXTS:
        ids = toks.encode(text)
        decoded = toks.decode(ids)
        assert decoded == text, f"tokenizer text {label!r} does not round-trip: {decoded!r}"
        tok_records.append({"label": label, "text": text, "ids": ids, "decoded": decoded})

    out = {
        "format": 1,
        "model": "SmolLM2-135M-Instruct",
        "source": {"file": os.path.basename(gguf_path), "sha256": sha},
        "config": g.cfg,
        "eog_ids": eog,
        "steps": STEPS,
        "fixed_ids": FIXED_IDS,
        "checks": {
            "incremental_max_abs_diff": diff,
            "rope_adjacent_nll": nll_adj,
            "rope_halves_nll": nll_half,
            "rope_sentence": ROPE_SENTENCE,
        },
        "prompts": records,
        "tokenizer": tok_records,
    }
    tmp = out_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    os.replace(tmp, out_path)
    print(f"  wrote {out_path}: {len(records)} prompts, {len(tok_records)} tokenizer texts in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
