#!/usr/bin/env bash
# On the GPU machine, one call: webtune's decode through Dawn against llama.cpp CUDA on the same
# synthetic GGUF, with the GPU's SM clock sampled throughout (clocked.sh). In order:
#   1. llama-bench, built here (run_llama_cpp.sh, ~210 s on 16 cores) unless CARRY_DIR holds
#      llama-bench.xz (a static build: too large to come back from the GPU machine so far);
#   2. llama-bench `-fa 1 -p 128 -n 128 -d 128,1024 -r 5`, clocked;
#   3. run_dawn.sh CARRY_DIR with the options given here (llm_dawn.mjs), clocked;
#   4. the same llama-bench again, clocked (its rate moves between runs in one call).
# Writes under $OUT: llama-before.md, llama-after.md, dawn/ (dawn.jsonl, serve.log), clk-*.csv,
# Usage: research/gpu-llm/decode_vs_llama.sh CARRY_DIR [llm_dawn.mjs options...]
set -uo pipefail
carry=$(cd "${1:?usage: decode_vs_llama.sh CARRY_DIR [options]}" && pwd); shift
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
work=${WORK:-/tmp/llm-gpu}; mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv | tee "$out/gpu.txt"
grep -m1 'model name' /proc/cpuinfo; nproc
if [ -f "$carry/llama-bench.xz" ]; then
  mkdir -p "$work/b/bin" && xz -dc "$carry/llama-bench.xz" > "$work/b/bin/llama-bench" && chmod +x "$work/b/bin/llama-bench"
  [ -f "$work/synth.gguf" ] || python3 "$here/synth_gguf.py" fill "$carry/smol.skel" "$work/synth.gguf" 7
else
  BENCH=0 WAIT=${WAIT:-330} "$here/run_llama_cpp.sh" "$carry" || exit $?
fi
bench="cd $work && b/bin/llama-bench -m synth.gguf -ngl 99 -fa 1 -p 128 -n 128 -d 128,1024 -r 5 -o md"
"$here/clocked.sh" "$out/clk-llama-before.csv" bash -c "$bench" 2>&1 | tee "$out/llama-before.md"
OUT=$out/dawn "$here/clocked.sh" "$out/clk-dawn.csv" "$here/run_dawn.sh" "$carry" "$@"
"$here/clocked.sh" "$out/clk-llama-after.csv" bash -c "$bench" 2>&1 | tee "$out/llama-after.md"
