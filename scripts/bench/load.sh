#!/usr/bin/env bash
# Load figures for BENCHMARKS.md (issues 5 and 7), all in one run so the
# ratios compare like with like:
#   1. best-kernel lookups per second and latency percentiles with wrk,
#      against `webtune serve` on SQLite, on PostgreSQL, and a bare axum
#      handler answering a body of the same size;
#   2. top-5 reports accepted per second (each acknowledged after its commit),
#      with the research crate's report_load, on SQLite and on PostgreSQL.
#
#   scripts/bench/load.sh [SECONDS] [CONNECTIONS]
#
# Needs wrk (apt) and PostgreSQL (scripts/postgres.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-10}"
conns="${2:-32}"
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >&2; }
cargo build --release -q -p webtune --example bare_axum
cargo build --release -q -p webtune-research --bin report_load
bin=target/release
dir="$(mktemp -d /tmp/webtune-load.XXXXXX)"
pids=()
pg_dir=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$pg_dir" ] && scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

wait_up() {
  for _ in $(seq 1 100); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server at $1 did not come up" >&2
  exit 1
}

query="device_key=gpu-nvidia/hopper/load/-&op=matmul&shape=384,768,768&target=wgsl"
# Writes are rate-limited per address by default; the load comes from one.
limits=(--rate-per-address 1000000000 --rate-per-session 1000000000)

lookup() { # NAME URL
  local body
  body="$(curl -fsS "$2/v1/kernels/best?$query")"
  echo "== lookups: $1 (answer ${#body} bytes; wrk -t2 -c$conns -d${secs}s)"
  wrk -t2 -c"$conns" -d"${secs}s" --latency "$2/v1/kernels/best?$query" | grep -E 'Requests/sec|Latency |50%|90%|99%|Non-2xx|Socket errors'
}

# SQLite.
"$bin/webtune" serve --addr 127.0.0.1:18181 --database-url "sqlite://$dir/load.sqlite" "${limits[@]}" >"$dir/sqlite.log" 2>&1 &
pids+=($!)
wait_up http://127.0.0.1:18181
answer="$(curl -fsS "http://127.0.0.1:18181/v1/kernels/best?$query")"

# The bare handler answers a body of the same size.
"$bin/examples/bare_axum" 127.0.0.1:18191 "${#answer}" >"$dir/bare.log" 2>&1 &
pids+=($!)
sleep 0.5
lookup "bare axum" http://127.0.0.1:18191
lookup "webtune serve, SQLite" http://127.0.0.1:18181
echo "== reports: SQLite"
"$bin/report_load" http://127.0.0.1:18181 400 16

# PostgreSQL.
eval "$(scripts/postgres.sh start)"
pg_dir="$WEBTUNE_TEST_PG_DIR"
"$bin/webtune" serve --addr 127.0.0.1:18182 --database-url "$WEBTUNE_TEST_PG_URL" "${limits[@]}" >"$dir/pg.log" 2>&1 &
pids+=($!)
wait_up http://127.0.0.1:18182
lookup "bare axum (again)" http://127.0.0.1:18191
lookup "webtune serve, PostgreSQL" http://127.0.0.1:18182
echo "== reports: PostgreSQL"
"$bin/report_load" http://127.0.0.1:18182 400 16
