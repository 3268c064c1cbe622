#!/usr/bin/env bash
# Installs what the tests need and runs every test. CI calls exactly this.
#
# Needs: Mesa's Vulkan driver (WGSL kernels run on lavapipe), Node.js (V8
# runs the Wasm kernels), PostgreSQL (kernel-db runs on SQLite and on
# PostgreSQL), Chromium (end-to-end tests in a real browser).
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
log "starting PostgreSQL"
eval "$(scripts/postgres.sh start)"
trap 'scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR"' EXIT
export WEBTUNE_REQUIRE_PG=1

# --- Rust ------------------------------------------------------------------
log "cargo test"
cargo test --workspace --all-features --no-fail-fast 2>&1

# --- Under attack ------------------------------------------------------------
# The adversarial suite (issue 23) already ran inside `cargo test` above
# (server/tests/adversarial.rs: slow bodies, half-open connections, reports
# that try to flag good kernels, cross-target sessions, fingerprint junk,
# CORS, against a real `webtune serve` on loopback). The fuzz targets run
# for a fixed budget each where cargo-fuzz and a nightly toolchain exist.
if command -v cargo-fuzz >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q nightly; then
  log "fuzz targets, 20 s each"
  for t in ir_parser schedule_decoder report_decoder; do
    (cd fuzz && cargo +nightly fuzz run "$t" -- -max_total_time=20 2>&1 | tail -3)
  done
else
  log "fuzz targets skipped: needs cargo-fuzz and a nightly toolchain (cargo install cargo-fuzz; rustup toolchain install nightly)"
fi

# --- Browser ---------------------------------------------------------------
# The client runtime and demo are TypeScript built with esbuild; dist/ is
# committed (webtune serve embeds it), so the build must reproduce it exactly.
log "client runtime: npm ci, dist check, unit tests"
(cd client-runtime/web && npm ci --no-audit --no-fund --loglevel=error && node build.mjs --check && node --test test/unit.test.mjs test/tuner.test.mjs)

# The demo in headless Chromium (Debian's; never a downloaded one) against a
# real `webtune serve` on loopback with a fresh SQLite file: Wasm, then
# WebGPU on SwiftShader. Chart screenshots land in artifacts/. Then subgroup
# kernels straight from `webtune compile` in Chromium's WebGPU (Tint).
log "end-to-end in Chromium"
cargo build -p webtune --all-features 2>&1
(cd client-runtime/web && WEBTUNE_BIN="$PWD/../../target/debug/webtune" node --test test/e2e.test.mjs test/subgroups.test.mjs)
