#!/usr/bin/env bash
# Builds the folder that travels to the GPU machine for the language-model GPU benchmarks
# (at most 64 MiB travels there, and nothing can be fetched there):
#   llamacpp-trim.tar.xz  llama.cpp's source (vendored in the llama-cpp-python sdist on PyPI),
#                         trimmed to ggml (CPU + CUDA backends), llama, common and llama-bench: ~2.3 MB
#   smol.skel             the model GGUF's header (metadata, tokenizer, tensor infos), ~1.8 MB;
#                         synth_gguf.py fills it with seeded random values of the same formats there
#   dawn/                 Node 20 (xz) and the npm package `webgpu` 0.6.2 (Dawn's Node binding), ~29 MB
#   webtune.xz            the release server binary, stripped (only with --webtune)
# and, in the repository's ignored .gl/, the Vulkan loader with the GL dispatch libraries (with
# libvulkan1 alone the NVIDIA ICD gave no vkCreateInstance there and Dawn found no adapter; with
# these and dawn_common.sh's EGL vendor file it found the H200); carry both OUT_DIR and .gl, and
# unpack .gl first in every call.
# Usage: research/gpu-llm/prepare.sh OUT_DIR MODEL.gguf [--webtune]
# Then on the GPU machine (after `for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig`):
#   research/gpu-llm/run_llama_cpp.sh OUT_DIR   and   research/gpu-llm/run_dawn.sh OUT_DIR
set -euo pipefail
out=${1:?usage: prepare.sh OUT_DIR MODEL.gguf [--webtune]}
gguf=${2:?usage: prepare.sh OUT_DIR MODEL.gguf [--webtune]}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -f "$out/llamacpp-trim.tar.xz" ]; then
  tmp=$(mktemp -d)
  # The simple index (PEP 503): PyPI's JSON API does not answer from every network.
  url=$(curl -fsS https://pypi.org/simple/llama-cpp-python/ | grep -o 'https://[^"#]*llama_cpp_python-0\.3\.36\.tar\.gz' | head -1)
  curl -fsSL -o "$tmp/sdist.tar.gz" "$url"
  mkdir "$tmp/src" && tar xzf "$tmp/sdist.tar.gz" -C "$tmp/src" --strip-components=1
  S=$tmp/src/vendor/llama.cpp T=$tmp/trim/llama.cpp
  mkdir -p "$T/ggml/src" "$T/tools"
  cp -r "$S/CMakeLists.txt" "$S/cmake" "$S/src" "$S/include" "$S/common" "$S/vendor" "$S/LICENSE" "$T/"
  cp -r "$S/ggml/CMakeLists.txt" "$S/ggml/cmake" "$S/ggml/include" "$T/ggml/"
  for f in "$S"/ggml/src/*; do
    case $(basename "$f") in
      ggml-cann|ggml-et|ggml-hexagon|ggml-hip|ggml-metal|ggml-musa|ggml-opencl|ggml-openvino|ggml-sycl|ggml-virtgpu|ggml-vulkan|ggml-webgpu|ggml-zdnn|ggml-zendnn|ggml-blas|ggml-rpc) ;;
      *) cp -r "$f" "$T/ggml/src/" ;;
    esac
  done
  cp -r "$S/tools/llama-bench" "$T/tools/"
  printf 'find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(llama-bench)\n' > "$T/tools/CMakeLists.txt"
  (cd "$tmp/trim" && tar cJf "$out/llamacpp-trim.tar.xz" llama.cpp)
  rm -rf "$tmp"
fi
"$py" "$here/synth_gguf.py" skeleton "$gguf" "$out/smol.skel"
if [ ! -f "$out/dawn/node.xz" ]; then
  # Dawn's Node binding, linux-x64 only, and the Node binary that runs it (the GPU machine has no Node).
  mkdir -p "$out/dawn" && tmp=$(mktemp -d)
  (cd "$tmp" && npm pack webgpu@0.6.2 >/dev/null && tar xzf webgpu-0.6.2.tgz)
  rm -rf "$tmp"/package/dist/win32* "$tmp"/package/dist/darwin* "$tmp"/package/dist/linux-arm64
  mv "$tmp/package" "$tmp/webgpu" && (cd "$tmp" && tar cJf "$out/dawn/webgpu.tar.xz" webgpu) && rm -rf "$tmp"
  xz -T2 -6 -c "$(readlink -f "$(command -v node)")" > "$out/dawn/node.xz"
fi
if ! ls "$root"/.gl/libglvnd0_*.deb > /dev/null 2>&1; then
  mkdir -p "$root/.gl"
  (cd "$root/.gl" && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
if [ "${3:-}" = "--webtune" ]; then
  (cd "$root" && cargo build --release -p webtune --bin webtune)
  strip -o "$out/webtune" "$root/target/release/webtune"
  xz -T2 -6 -f "$out/webtune"
fi
du -sh "$out"/*
