#!/usr/bin/env bash
# On the GPU machine: SentenceEncoder on WebGPU through Dawn (Chrome's WebGPU, in Node) against
# its Wasm path on the same machine, from a fresh `webtune serve` holding a synthetic
# all-MiniLM-L6-v2 (the real model's files and tensor shapes, seeded random weights).
# Needs, beside the checkout: CARRY_DIR from prepare.sh --webtune, with enc/ made here by
#   python3 research/gpu-llm/synth_encoder.py skeleton MODEL_DIR CARRY_DIR/enc
# and the Vulkan loader unpacked (the caller runs `for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig` first).
# Usage: research/gpu-llm/run_encoder_dawn.sh CARRY_DIR [encoder_dawn.mjs options...]
# Writes encoder_dawn.jsonl and serve-encoder.log under $OUT (or ./out).
set -uo pipefail
carry=$(cd "${1:?usage: run_encoder_dawn.sh CARRY_DIR [options]}" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
work=${WORK:-/tmp/llm-gpu}; mkdir -p "$work"
. "$here/dawn_common.sh"
unpack_dawn
if [ ! -f "$work/enc/model.safetensors" ]; then
  rm -rf "$work/enc" && cp -r "$carry/enc" "$work/enc" && python3 "$here/synth_encoder.py" fill "$work/enc" 7
fi
db=$work/enc-db; rm -rf "$db"; mkdir -p "$db"
"$work/webtune" model import "$work/enc" --name minilm-synth --database-url "sqlite://$db/w.sqlite" | tail -1
serve_and_run "sqlite://$db/w.sqlite" "${PORT:-8792}" "$out/serve-encoder.log" encoder_dawn.mjs --model minilm-synth "$@" 2>&1 | tee "$out/encoder_dawn.jsonl"
exit "${PIPESTATUS[0]}"
