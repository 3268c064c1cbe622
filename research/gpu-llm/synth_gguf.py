#!/usr/bin/env python3
"""A GGUF file's header with seeded random tensor data of the same formats.

The GPU machine cannot take the 98 MB model (at most 64 MiB travels there), and
speed does not depend on the weights' values. So:

  synth_gguf.py skeleton MODEL.gguf SKEL     # here: the header only (metadata,
                                             # tokenizer, tensor infos), ~2 MB
  synth_gguf.py fill SKEL OUT.gguf [SEED]    # there: the same header, every tensor
                                             # filled with valid random values

The filled file has the model's architecture, tokenizer, tensor names, shapes,
types and offsets; only the values differ (F32 near 1, Q4_1/Q4_0/Q8_0 blocks with
small finite f16 scales). Needs numpy only.
"""
import struct
import sys

import numpy as np

# ggml type -> (block elements, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34)}
NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}


class Reader:
    def __init__(self, b):
        self.b, self.p = b, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.p)
        self.p += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = self.b[self.p:self.p + n].decode("utf-8", "replace")
        self.p += n
        return s

    def value(self, t):
        scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in scalar:
            return self.take(scalar[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            if et in scalar:  # skip a numeric array without building it
                self.p += n * struct.calcsize(scalar[et])
                return None
            return [self.value(et) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {t}")


def header(b):
    r = Reader(b)
    if r.take("4s") != b"GGUF":
        raise ValueError("not a GGUF file")
    version, n_tensors, n_kv = r.take("I"), r.take("Q"), r.take("Q")
    if version != 3:
        raise ValueError(f"GGUF version {version}, expected 3")
    align = 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("I")
        v = r.value(t)
        if key == "general.alignment":
            align = v
    tensors = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        ty, off = r.take("I"), r.take("Q")
        if ty not in TYPES:
            raise ValueError(f"tensor {name}: ggml type {ty} not handled")
        n = int(np.prod(dims))
        be, bb = TYPES[ty]
        tensors.append((name, dims, ty, off, n // be * bb))
    start = (r.p + align - 1) // align * align
    return start, tensors


def fill(ty, nbytes, rng):
    if ty == 0:
        n = nbytes // 4
        return (1.0 + 0.05 * rng.standard_normal(n)).astype("<f4").tobytes()
    if ty == 1:
        n = nbytes // 2
        return (0.02 * rng.standard_normal(n)).astype("<f2").tobytes()
    be, bb = TYPES[ty]
    nb = nbytes // bb
    blocks = np.empty((nb, bb), dtype=np.uint8)
    d = rng.uniform(0.002, 0.02, nb) if ty != 8 else rng.uniform(0.0005, 0.0015, nb)
    d = d.astype("<f2")
    blocks[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
    q0 = 2
    if ty == 3:  # Q4_1: d, m, 16 bytes of nibbles
        m = (-8.0 * d.astype(np.float32) * rng.uniform(0.8, 1.2, nb)).astype("<f2")
        blocks[:, 2:4] = m.view(np.uint8).reshape(nb, 2)
        q0 = 4
    blocks[:, q0:] = rng.integers(0, 256, (nb, bb - q0), dtype=np.uint8)
    return blocks.tobytes()


def main(argv):
    if len(argv) >= 4 and argv[1] == "skeleton":
        b = open(argv[2], "rb").read()
        start, tensors = header(b)
        open(argv[3], "wb").write(b[:start])
        total = sum(t[4] for t in tensors)
        kinds = sorted({NAMES[t[2]] for t in tensors})
        print(f"{argv[3]}: {start} header bytes, {len(tensors)} tensors ({', '.join(kinds)}), {total} data bytes")
        return 0
    if len(argv) >= 4 and argv[1] == "fill":
        skel = open(argv[2], "rb").read()
        start, tensors = header(skel)
        seed = int(argv[4]) if len(argv) > 4 else 1
        rng = np.random.default_rng(seed)
        with open(argv[3], "wb") as f:
            f.write(skel[:start])
            for name, dims, ty, off, nbytes in sorted(tensors, key=lambda t: t[3]):
                pos = start + off
                if f.tell() > pos:
                    raise ValueError(f"tensor {name} overlaps the one before it")
                f.write(b"\0" * (pos - f.tell()))
                f.write(fill(ty, nbytes, rng))
        print(f"{argv[3]}: {len(tensors)} tensors of seeded random values (seed {seed})")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
