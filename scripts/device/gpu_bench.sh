#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the repository root:
#   scripts/device/gpu_bench.sh BIN_DIR
# BIN_DIR holds the gpu_bench example built here. Prints JSON lines.
set -uo pipefail
bin="${1:?usage: gpu_bench.sh BIN_DIR}"
# The machine has the NVIDIA driver but no Vulkan loader: unpack the carried one.
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WGPU_BACKEND=vulkan
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
echo "== cuBLAS and copy baselines"
python3 scripts/device/cublas_baseline.py
echo "== webtune WGSL kernels"
"$bin/gpu_bench" device
