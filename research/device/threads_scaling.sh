#!/usr/bin/env bash
# Threaded Wasm kernels natively (wasmtime, `webtune run`) on the GPU
# machine's CPU cores: K0–K3 with 1, 2, 4, 8 and 16 parts, one thread per
# part, each checked against the f64 reference. The figures behind
# BENCHMARKS.md's "Threaded Wasm kernels: scaling"; wasmtime, not V8, so they
# measure how the parts scale on more cores than the dev machine has, not a
# browser's absolute speed.
#
#   research/device/threads_scaling.sh BIN OUT_DIR
#
# BIN is a release `webtune` built with `--features native`.
set -euo pipefail
BIN=$1 OUT=$2
mkdir -p "$OUT"
lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket' > "$OUT/cpu.txt" || true
TILE='"x0":6,"y0":8,"r0":2,"r1":256,"order":"nkm","inner_n_first":false,"unroll":["x0","y0","r0"],"vectorize":4,"cache_read":true,"relaxed_simd":true'
# name op shape tiles split (the split's unit gives every count up to 16 parts)
CASES=(
  "K0 matmul 384,768,768 \"x1\":60,\"y1\":48 n"
  "K1 matmul 640,768,3072 \"x1\":60,\"y1\":64 n"
  "K2 batch_matmul 12,384,384,64 \"x1\":24,\"y1\":64 m"
  "K3 batch_matmul 120,64,64,64 \"x1\":60,\"y1\":64 batch"
)
for c in "${CASES[@]}"; do
  read -r name op shape tiles split <<<"$c"
  for t in 1 2 4 8 16; do
    if [ "$t" = 1 ]; then cfg="{$TILE,$tiles}"; else cfg="{$TILE,$tiles,\"threads\":$t,\"split\":\"$split\"}"; fi
    dir="$OUT/k/$name-$t"
    "$BIN" compile --op "$op" --shape "$shape" --target wasm --config "$cfg" --out "$dir" >/dev/null
    printf '%s %s threads=%s ' "$name" "$shape" "$t"
    "$BIN" run --kernel "$dir" --reps 30 | tr -d '\n'
    echo
  done
done | tee "$OUT/scaling.jsonl"
