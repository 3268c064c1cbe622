#!/usr/bin/env bash
# On the GPU machine: SmolLM2's shapes on WebGPU through Dawn (Chrome's WebGPU, in Node), from a
# fresh `webtune serve` holding the synthetic GGUF (seeded random values of the real formats).
# Needs, beside the checkout: CARRY_DIR from prepare.sh --webtune, and the Vulkan loader unpacked
# (the caller runs `for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig` first).
# Usage: research/gpu-llm/run_dawn.sh CARRY_DIR [llm_dawn.mjs options...]
# Writes dawn.jsonl and serve.log under $OUT (or ./out).
# With SERVER_B=1 and CARRY_DIR/webtune-b.xz (another build, e.g. the previous commit's), a second
# `webtune serve` of that build with its own database of the same GGUF is started too and passed as
# --server-b (for llm_dawn.mjs --server-ab ROUNDS); its log is serve-b.log.
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
extra=()
if [ "${SERVER_B:-0}" = 1 ]; then
  [ -x "$work/webtune-b" ] || { xz -dc "$carry/webtune-b.xz" > "$work/webtune-b" && chmod +x "$work/webtune-b"; }
  dbb=$work/dawn-db-b; rm -rf "$dbb"; mkdir -p "$dbb"
  "$work/webtune-b" model import "$work/synth.gguf" --name smollm2-synth --database-url "sqlite://$dbb/w.sqlite" | tail -1
  portb=$(( ${PORT:-8791} + 1 ))
  serve_bg "$work/webtune-b" "sqlite://$dbb/w.sqlite" "$portb" "$out/serve-b.log"
  srvb=$served
  extra=(--server-b "http://127.0.0.1:$portb")
fi
serve_and_run "sqlite://$db/w.sqlite" "${PORT:-8791}" "$out/serve.log" llm_dawn.mjs --model smollm2-synth "${extra[@]}" "$@" 2>&1 | tee "$out/dawn.jsonl"
rc=${PIPESTATUS[0]}
[ -n "${srvb:-}" ] && { kill "$srvb" 2>/dev/null; wait "$srvb" 2>/dev/null; }
exit "$rc"
