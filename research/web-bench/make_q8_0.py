#!/usr/bin/env python3
"""Writes a Q8_0 copy of a llama GGUF from the file's own weights, for
llm_peers.mjs (issue 36's Benchmarks): wllama's llama.cpp build has SIMD dot
products for Q8_0 but not for Q4_1, so the copy is the strongest form of that
peer on a CPU.

    ~/.cache/webtune/venv/bin/python research/web-bench/make_q8_0.py IN.gguf OUT.gguf

Every Q4_1 / Q4_0 / F16 weight matrix is dequantised with the `gguf`
package (w = d·q + m per block of 32) and quantised again to Q8_0 (blocks of
32: an f16 scale max|w|/127 and 32 signed bytes, llama.cpp's rounding as the
package implements it); Q8_0 and F32 tensors (the embeddings, the norms) are
copied byte for byte; every metadata key is copied, except
`general.file_type`, which says MOSTLY_Q8_0. Refuses a file that is not
llama, or that holds a tensor type it cannot convert, with one line. The
output appears whole (written beside it, then renamed) or not at all.
"""

import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType, GGUFWriter, Keys, LlamaFileType
from gguf.quants import dequantize, quantize

CONVERT = {T.Q4_0, T.Q4_1, T.F16}
COPY = {T.Q8_0, T.F32}


def fail(msg):
    print(f"make_q8_0: {msg}", file=sys.stderr)
    sys.exit(1)


def main(src, dst):
    try:
        r = GGUFReader(src)
    except Exception as e:  # noqa: BLE001 (any unreadable file: one line)
        fail(f"{src}: not a readable GGUF file ({e})")
    arch = r.fields.get(Keys.General.ARCHITECTURE)
    arch = arch.contents() if arch is not None else None
    if arch != "llama":
        fail(f"{src}: architecture {arch!r}, this script writes llama files only")
    for t in r.tensors:
        if t.tensor_type not in CONVERT | COPY:
            fail(f"{src}: tensor {t.name} is {t.tensor_type.name}; this script converts {', '.join(x.name for x in CONVERT | COPY)}")

    tmp = f"{dst}.tmp-{os.getpid()}"
    w = GGUFWriter(tmp, arch)
    for f in r.fields.values():
        if f.name == Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
            continue
        vt = f.types[0]
        if f.name == Keys.General.FILE_TYPE:
            w.add_key_value(f.name, int(LlamaFileType.MOSTLY_Q8_0), GGUFValueType.UINT32)
            continue
        if f.name == Keys.General.ALIGNMENT:
            w.data_alignment = int(f.contents())
        sub = f.types[-1] if vt == GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), vt, sub_type=sub)

    before = after = 0
    for t in r.tensors:
        data = np.asarray(t.data)
        before += t.n_bytes
        if t.tensor_type in COPY:
            out, qt = data, t.tensor_type
        else:
            # f32 values of the file's weights, then Q8_0 per block of 32.
            out, qt = quantize(np.ascontiguousarray(dequantize(data, t.tensor_type), dtype=np.float32), T.Q8_0), T.Q8_0
        after += out.nbytes
        w.add_tensor(t.name, out, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)
    print(f"make_q8_0: {dst}: {len(r.tensors)} tensors, {before / 1e6:.1f} MB of tensor data -> {after / 1e6:.1f} MB", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: make_q8_0.py IN.gguf OUT.gguf")
    main(sys.argv[1], sys.argv[2])
