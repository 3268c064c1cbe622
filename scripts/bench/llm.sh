#!/usr/bin/env bash
# SmolLM2-135M-Instruct in the browser for BENCHMARKS.md (issue 36): webtune's
# TextGenerator against wllama 3.13.0 (llama.cpp as Wasm) on the same Q4_1
# GGUF and on a Q8_0 copy of it, in one headless Chromium session: prefill
# and decode tokens/s, the first token from a cold page, bytes downloaded,
# and decode as a fraction of the memory-bandwidth floor; median of 3 rounds,
# ratios in the same run (research/web-bench/llm_peers.mjs says how each
# figure is taken).
#
#   scripts/bench/llm.sh [llm_peers.mjs flags: --rounds N --cold N --tune-s S --threads 1,2 ...]
#
# Sets everything up: the model (scripts/fetch-model.sh), the Q8_0 copy
# (research/web-bench/make_q8_0.py) and the prompts (llm_prompts.py) in the
# cache, wllama (npm ci in research/web-bench), the release server (built
# here unless WEBTUNE_BIN names one), an import of the GGUF into a fresh
# model store, `webtune serve --quorum 1` on a free loopback port with a
# fresh SQLite database (so tuning in the run becomes the plan a cold page
# gets); stops the server and removes the store afterwards. The machine
# should be otherwise idle: the load average is printed before and after.
# WEBTUNE_BENCH_PEERS_ONLY=1 measures wllama (and the floor) alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
log() { printf 'llm.sh: %s\n' "$*" >&2; }

[ -x /usr/lib/chromium/chromium ] || [ -n "${CHROMIUM:-}" ] || {
  log "installing Debian's chromium"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >&2
}
[ -d client-runtime/web/node_modules/playwright-core ] || (cd client-runtime/web && npm ci --ignore-scripts >&2)
[ -d research/web-bench/node_modules/@wllama/wllama ] || (cd research/web-bench && npm ci --ignore-scripts >&2)

eval "$(scripts/fetch-model.sh)"
py="$WEBTUNE_MODEL_PYTHON"
bench="${WEBTUNE_CACHE:-$HOME/.cache/webtune}/bench"
mkdir -p "$bench"
q8="$bench/$(basename "$WEBTUNE_LLM_GGUF" .Q4_1.gguf).Q8_0.gguf"
if [ ! -f "$q8" ] || [ "$q8" -ot "$WEBTUNE_LLM_GGUF" ] || [ "$q8" -ot research/web-bench/make_q8_0.py ]; then
  log "writing the Q8_0 copy $q8"
  "$py" research/web-bench/make_q8_0.py "$WEBTUNE_LLM_GGUF" "$q8"
fi
prompts="$bench/llm_prompts.json"
"$py" research/web-bench/llm_prompts.py "$prompts" "$WEBTUNE_LLM_GGUF" "$q8"

dir="$(mktemp -d /tmp/webtune-llm-bench.XXXXXX)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

webtune=()
if [ "${WEBTUNE_BENCH_PEERS_ONLY:-0}" != 1 ]; then
  bin="${WEBTUNE_BIN:-target/release/webtune}"
  if [ -z "${WEBTUNE_BIN:-}" ]; then
    log "building the release server"
    cargo build --release -q -p webtune
  fi
  "$bin" model import "$WEBTUNE_LLM_GGUF" --name smollm2 --models-dir "$dir/models" >&2
  # One client tunes and reports much more than the per-address defaults allow.
  "$bin" serve --addr 127.0.0.1:0 --database-url "sqlite://$dir/bench.sqlite" --models-dir "$dir/models" --quorum 1 \
    --rate-per-address 1000000000 --rate-per-session 1000000000 >"$dir/serve.out" 2>"$dir/serve.err" &
  server=$!
  url=""
  for _ in $(seq 1 600); do
    url="$(grep -o 'listening on http://[^ ]*' "$dir/serve.out" 2>/dev/null | head -1 | cut -d' ' -f3 || true)"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$dir/serve.err" >&2; log "webtune serve exited"; exit 1; }
    sleep 0.1
  done
  [ -n "$url" ] || { log "webtune serve did not say where it listens in 60 s"; exit 1; }
  curl -fsS "$url/v1/models/smollm2" >/dev/null && curl -fsS "$url/v1/models/smollm2/graph" >/dev/null \
    || { log "$url does not serve smollm2's manifest and graph"; exit 1; }
  log "webtune serve at $url"
  webtune=(--webtune "$url" --webtune-model smollm2)
fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "before: $(uptime)"
node research/web-bench/llm_peers.mjs --q4 "$WEBTUNE_LLM_GGUF" --q8 "$q8" --prompts "$prompts" "${webtune[@]}" "$@"
echo "after: $(uptime)"
