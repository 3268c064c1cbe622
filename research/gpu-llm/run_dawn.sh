#!/usr/bin/env bash
# On the GPU machine: SmolLM2's shapes on WebGPU through Dawn (Chrome's WebGPU, in Node), from a
# fresh `webtune serve` holding the synthetic GGUF (seeded random values of the real formats).
# Needs, beside the checkout: CARRY_DIR from prepare.sh --webtune, and the Vulkan loader unpacked
# (the caller runs `for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig` first).
# Usage: research/gpu-llm/run_dawn.sh CARRY_DIR [llm_dawn.mjs options...]
# Writes dawn.jsonl and serve.log under $OUT (or ./out).
set -uo pipefail
carry=$(cd "${1:?usage: run_dawn.sh CARRY_DIR [options]}" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
work=${WORK:-/tmp/llm-gpu}; mkdir -p "$work"
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -x "$work/node" ] || { xz -dc "$carry/dawn/node.xz" > "$work/node" && chmod +x "$work/node"; }
[ -d "$work/webgpu" ] || tar xJf "$carry/dawn/webgpu.tar.xz" -C "$work"
[ -x "$work/webtune" ] || { xz -dc "$carry/webtune.xz" > "$work/webtune" && chmod +x "$work/webtune"; }
[ -f "$work/synth.gguf" ] || python3 "$here/synth_gguf.py" fill "$carry/smol.skel" "$work/synth.gguf" 7
db=$work/dawn-db; rm -rf "$db"; mkdir -p "$db"
"$work/webtune" model import "$work/synth.gguf" --name smollm2-synth --database-url "sqlite://$db/w.sqlite" | tail -2
port=${PORT:-8791}
"$work/webtune" serve --addr "127.0.0.1:$port" --database-url "sqlite://$db/w.sqlite" > "$out/serve.log" 2>&1 &
srv=$!
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/v1/models" > /dev/null && break; sleep 0.1; done
"$work/node" "$root/research/web-bench/llm_dawn.mjs" --server "http://127.0.0.1:$port" --model smollm2-synth \
  --runtime "$root/client-runtime/web/dist/webtune.js" --webgpu "$work/webgpu/index.js" "$@" 2>&1 | tee "$out/dawn.jsonl"
rc=${PIPESTATUS[0]}
kill $srv 2>/dev/null; wait $srv 2>/dev/null
exit $rc
