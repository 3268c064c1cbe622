#!/usr/bin/env python3
"""Instruction counts of the pipelines in NVIDIA's shader disk cache.

Nsight Compute does not profile Vulkan, but the driver keeps every compiled
pipeline in its disk cache. Run the kernels on the GPU machine with
__GL_SHADER_DISK_CACHE_PATH=$OUT/cache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1,
bring the cache's *.bin back, and run this here:

    python3 research/device/sass_counts.py CACHE.bin [--min-bytes 30000]

The cache file is a series of zstd frames (needs `pip install zstandard`);
frames that start with NVIDIA's NVVM container hold raw sm_90 code in
16-byte instruction words. For each such frame this prints the counts of the
commonest opcodes (the low 12 bits of each word; 0x812 is LOP3, 0x421 FADD
with an immediate, 0x223 FFMA, 0x220 FMUL, 0x981 LDG, 0xf89 SHFL) and the
immediates of `LOP3 R, R, imm, ...` (opcode word 0x7812), which tells a
nibble unpacked with one logic instruction from one unpacked with two. The
words are matched on opcode bits only, without a disassembler: counts, not
a listing.
"""
import argparse
import collections
import struct
import sys

try:
    import zstandard
except ImportError:
    sys.exit("sass_counts: needs the zstandard module (pip install zstandard)")

NAMES = {0x812: "LOP3", 0x421: "FADD(imm)", 0x223: "FFMA", 0x220: "FMUL", 0x981: "LDG", 0xF89: "SHFL", 0x819: "SHF"}


def frames(data):
    at = 0
    while (at := data.find(b"\x28\xb5\x2f\xfd", at)) >= 0:
        try:
            yield at, zstandard.ZstdDecompressor().decompressobj().decompress(data[at:])
        except zstandard.ZstdError:
            pass
        at += 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache")
    ap.add_argument("--min-bytes", type=int, default=30000, help="skip smaller frames (entry points, metadata)")
    args = ap.parse_args()
    data = open(args.cache, "rb").read()
    for at, f in frames(data):
        if not f.startswith(b"NVDANVVM") or len(f) < args.min_bytes:
            continue
        # The instruction words' phase: the one where LOP3 opcodes are commonest.
        phase = max(range(16), key=lambda p: sum(struct.unpack_from("<Q", f, i)[0] & 0xFFF == 0x812 for i in range(p, len(f) - 16, 16)))
        ops, imms = collections.Counter(), collections.Counter()
        for i in range(phase, len(f) - 16, 16):
            lo = struct.unpack_from("<Q", f, i)[0]
            ops[lo & 0xFFF] += 1
            if lo & 0xFFFF == 0x7812:
                imms[lo >> 32] += 1
        named = {NAMES.get(k, hex(k)): v for k, v in ops.most_common(10) if k}
        print(f"frame at {at}: {len(f)} bytes; {named}")
        print(f"    LOP3 immediates: {[(hex(k), v) for k, v in imms.most_common(8)]}")


if __name__ == "__main__":
    main()
