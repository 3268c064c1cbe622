#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool), from the repository root:
#   research/device/gpu_bench_builds.sh ROUNDS BIN_DIR... -- MODE...
# Runs gpu_bench.sh's MODEs (usually `lite`, with GPU_BENCH_SHAPES and
# GPU_BENCH_TILES set) for every build directory in turn, ROUNDS times, so
# that builds compared side by side share the machine's state: round 1 runs
# A B C, round 2 runs them again. Each run starts with a line
# `== build DIR round N`; its JSON lines follow. With $OUT set, round 1 of
# each build leaves NVIDIA's shader disk cache, its files joined, as
# $OUT/cache_<build>.bin for research/device/sass_counts.py.
set -uo pipefail
rounds="${1:?usage: gpu_bench_builds.sh ROUNDS BIN_DIR... -- MODE...}"
shift
builds=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds+=("$1"); shift; done
shift || true
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(lite)
for r in $(seq 1 "$rounds"); do
  for b in "${builds[@]}"; do
    echo "== build $b round $r"
    if [ "$r" = 1 ] && [ -n "${OUT:-}" ]; then
      dir=$(mktemp -d)
      __GL_SHADER_DISK_CACHE_PATH="$dir" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
        research/device/gpu_bench.sh "$b" "${modes[@]}"
      find "$dir" -type f -name '*.bin' -exec cat {} + > "$OUT/cache_$(basename "$b").bin"
      rm -rf "$dir"
    else
      research/device/gpu_bench.sh "$b" "${modes[@]}"
    fi
  done
done
