#!/usr/bin/env bash
# On the GPU machine: llama.cpp's CUDA build (the native anchor) on the synthetic SmolLM2 GGUF.
# Builds llama-bench once (about 3.5 minutes on 16 cores: the build runs in its own session, so a
# call cut short can be resumed by running this again while the machine is warm), then runs
# llama-bench: prefill of 128 tokens and 128 decoded tokens at depth 0, 128 and 1024, flash
# attention off and on, 5 repetitions (BENCH=0 builds only). Writes llama-bench.md/.json under
# $OUT (or ./out).
# Usage: research/gpu-llm/run_llama_cpp.sh CARRY_DIR   (CARRY_DIR made by prepare.sh)
set -uo pipefail
carry=$(cd "${1:?usage: run_llama_cpp.sh CARRY_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
work=${WORK:-/tmp/llm-gpu}; mkdir -p "$work" && cd "$work"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
nvcc --version | tail -2
[ -f synth.gguf ] || python3 "$here/synth_gguf.py" fill "$carry/smol.skel" synth.gguf 7
if [ ! -x b/bin/llama-bench ]; then
  if [ ! -d llama.cpp ]; then
    tar xJf "$carry/llamacpp-trim.tar.xz"
    setsid bash -c "cmake -S llama.cpp -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF > build.log 2>&1 \
      && ninja -C b -j \$(nproc) llama-bench >> build.log 2>&1; echo done >> build.log" < /dev/null &
  fi
  for _ in $(seq 1 "${WAIT:-520}"); do grep -q '^done' build.log 2>/dev/null && break; sleep 1; done
  tail -3 build.log; cp build.log "$out/"
fi
[ -x b/bin/llama-bench ] || { echo "llama-bench is not built yet: run this again"; exit 3; }
[ "${BENCH:-1}" = 0 ] && exit 0
b/bin/llama-bench -m synth.gguf -ngl 99 -fa 0,1 -p 128 -n 128 -d 0,128,1024 -r 5 -o md 2>&1 | tee "$out/llama-bench.md"
b/bin/llama-bench -m synth.gguf -ngl 99 -fa 1 -p 128 -n 128 -d 0,128,1024 -r 5 -o json > "$out/llama-bench.json" 2>/dev/null
