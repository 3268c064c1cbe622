#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the repository root:
#   research/device/gpu_bench.sh BIN_DIR [MODE ...]
# BIN_DIR holds the gpu_bench example (and optionally the webtune binary)
# built here. MODE is any of: baseline (cuBLAS, copy bandwidth), device
# (WGSL kernels), lite (lite-space quality and order), microbench (the
# primitive study on wgpu); default: baseline device. Prints JSON lines.
# GPU_BENCH_PARTS="big sample shapes q4 checks ceiling" picks parts of `device`
# (default all; checks: bounds checks on/off, ceiling: a read-only kernel);
# GPU_BENCH_Q4_QUICK=1 narrows the q4 search to where its bests lie;
# GPU_BENCH_Q4_OUTPUTS="1 2 4" adds q4 kernels with several outputs per thread;
# GPU_BENCH_SHAPES="kind:shape ..." picks the shapes of `shapes` and `lite`.
set -uo pipefail
bin="${1:?usage: gpu_bench.sh BIN_DIR [MODE ...]}"
shift
modes=("${@:-baseline device}")
[ $# -eq 0 ] && modes=(baseline device)
# The machine has the NVIDIA driver but no Vulkan loader: unpack the carried one.
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WGPU_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
for m in "${modes[@]}"; do
  case "$m" in
    baseline) echo "== cuBLAS and copy baselines"; python3 research/device/cublas_baseline.py ;;
    device) echo "== webtune WGSL kernels"; "$bin/gpu_bench" device ;;
    lite) echo "== lite space on the GPU"; "$bin/gpu_bench" lite ;;
    microbench) echo "== microbench wgsl on wgpu"; "$bin/webtune" microbench --target wgsl --engine wgpu --out "${OUT:-.}/microbench-wgsl.json" ;;
    *) echo "unknown mode $m" >&2; exit 2 ;;
  esac
done
