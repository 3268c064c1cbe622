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
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -x "$work/node" ] || { xz -dc "$carry/dawn/node.xz" > "$work/node" && chmod +x "$work/node"; }
[ -d "$work/webgpu" ] || tar xJf "$carry/dawn/webgpu.tar.xz" -C "$work"
[ -x "$work/webtune" ] || { xz -dc "$carry/webtune.xz" > "$work/webtune" && chmod +x "$work/webtune"; }
if [ ! -f "$work/enc/model.safetensors" ]; then
  rm -rf "$work/enc" && cp -r "$carry/enc" "$work/enc" && python3 "$here/synth_encoder.py" fill "$work/enc" 7
fi
db=$work/enc-db; rm -rf "$db"; mkdir -p "$db"
"$work/webtune" model import "$work/enc" --name minilm-synth --database-url "sqlite://$db/w.sqlite" | tail -1
port=${PORT:-8792}
"$work/webtune" serve --addr "127.0.0.1:$port" --database-url "sqlite://$db/w.sqlite" > "$out/serve-encoder.log" 2>&1 &
srv=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/v1/models" > /dev/null && break; sleep 0.1; done
"$work/node" "$root/research/web-bench/encoder_dawn.mjs" --server "http://127.0.0.1:$port" --model minilm-synth \
  --runtime "$root/client-runtime/web/dist/webtune.js" --webgpu "$work/webgpu/index.js" "$@" 2>&1 | tee "$out/encoder_dawn.jsonl"
rc=${PIPESTATUS[0]}
kill $srv 2>/dev/null; wait $srv 2>/dev/null
exit $rc
