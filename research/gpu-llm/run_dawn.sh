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
. "$here/dawn_common.sh"
unpack_dawn
[ -f "$work/synth.gguf" ] || python3 "$here/synth_gguf.py" fill "$carry/smol.skel" "$work/synth.gguf" 7
db=$work/dawn-db; rm -rf "$db"; mkdir -p "$db"
"$work/webtune" model import "$work/synth.gguf" --name smollm2-synth --database-url "sqlite://$db/w.sqlite" | tail -2
serve_and_run "sqlite://$db/w.sqlite" "${PORT:-8791}" "$out/serve.log" llm_dawn.mjs --model smollm2-synth "$@" 2>&1 | tee "$out/dawn.jsonl"
exit "${PIPESTATUS[0]}"
