"""A Hugging Face-layout BERT encoder of seeded random weights, for the GPU
machine, where the 90 MB all-MiniLM-L6-v2 model cannot travel (at most 64
MiB does): every small file of the real model is kept (config, tokenizer,
pooling), and model.safetensors is rebuilt there from its header alone with
seeded random values of each tensor's dtype and shape. The same bytes move
and the same kernels run; the embeddings mean nothing.

    python3 synth_encoder.py skeleton MODEL_DIR OUT_DIR   # here: OUT_DIR holds the small files and model.safetensors.header
    python3 synth_encoder.py fill OUT_DIR SEED            # there: writes OUT_DIR/model.safetensors

Weights are N(0, 0.05²); LayerNorm weights 1 + N(0, 0.05²) and biases N(0, 0.02²),
so that activations keep the scale of a trained model's.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16}


def skeleton(model, out):
    os.makedirs(out, exist_ok=True)
    for root, _, files in os.walk(model):
        for f in files:
            if f == "model.safetensors":
                continue
            src = os.path.join(root, f)
            dst = os.path.join(out, os.path.relpath(src, model))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
    with open(os.path.join(model, "model.safetensors"), "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = fh.read(n)
    with open(os.path.join(out, "model.safetensors.header"), "wb") as fh:
        fh.write(struct.pack("<Q", n) + header)


def fill(out, seed):
    with open(os.path.join(out, "model.safetensors.header"), "rb") as fh:
        raw = fh.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    size = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    data = bytearray(size)
    rng = np.random.default_rng(seed)
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        dt = DTYPES.get(t["dtype"])
        shape = t["shape"]
        lo, hi = t["data_offsets"]
        if t["dtype"] == "I64":
            # position_ids: 0, 1, 2, ... as the real file holds them.
            data[lo:hi] = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).tobytes()
            continue
        if dt is None:
            sys.exit(f"synth_encoder: tensor {name} has dtype {t['dtype']}, not F32, F16 or I64")
        if "LayerNorm.weight" in name or name.endswith("norm.weight"):
            v = 1 + 0.05 * rng.standard_normal(shape)
        elif name.endswith("bias"):
            v = 0.02 * rng.standard_normal(shape)
        else:
            v = 0.05 * rng.standard_normal(shape)
        b = np.asarray(v, dtype=dt).tobytes()
        assert len(b) == hi - lo, name
        data[lo:hi] = b
    with open(os.path.join(out, "model.safetensors"), "wb") as fh:
        fh.write(raw[: 8 + n])
        fh.write(data)
    print(f"synth_encoder: {len(header) - ('__metadata__' in header)} tensors of seeded random values (seed {seed}), {size / 1e6:.1f} MB")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "skeleton":
        skeleton(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "fill":
        fill(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(__doc__)
