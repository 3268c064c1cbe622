#!/usr/bin/env bash
# Report throughput for BENCHMARKS.md (issue 20), all in one run so the
# ratios compare like with like:
#   1. durable top-5 reports per second and their latency (report_load),
#      16 and 64 clients, on SQLite and on PostgreSQL, for every binary
#      given (so two versions compare in one run);
#   2. best-kernel lookups per second while 64 clients report (wrk), against
#      a bare axum handler answering a body of the same size, idle;
#   3. three servers on one PostgreSQL against one, reports crossing servers.
#
#   scripts/bench/reports.sh [REPORTS] [BIN...]
#
# REPORTS defaults to 3000; BIN to target/release/webtune (built here).
# Needs wrk (apt) and PostgreSQL (scripts/postgres.sh installs it), which
# runs durable (fsync and synchronous_commit on). scripts/bench/write_path.sh
# is the 16-core form (256 clients, history scale).
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-3000}"
shift || true
bins=("$@")
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >&2; }
cargo build --release -q -p webtune --example bare_axum
cargo build --release -q -p webtune-research --bin report_load
[ ${#bins[@]} -gt 0 ] || { cargo build --release -q -p webtune; bins=(target/release/webtune); }
ex=target/release/examples
dir="$(mktemp -d /tmp/webtune-reports.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${WEBTUNE_TEST_PG_DIR:-}" ] && scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
eval "$(scripts/postgres.sh start)"
pg_base="${WEBTUNE_TEST_PG_URL%/*}"
# Writes are rate-limited per address by default, and connections per
# address are capped; the load (report clients and wrk) comes from one.
limits=(--rate-per-address 1000000000 --rate-per-session 1000000000 --max-connections-per-address 1000)
port=18400

wait_up() {
  for _ in $(seq 1 200); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server at $1 did not come up" >&2
  exit 1
}

# serve BIN DB_URL: a new server on a fresh port, its URL in $url (not run
# in a subshell, so that its pid is remembered).
serve() {
  port=$((port + 1))
  "$1" serve --addr "127.0.0.1:$port" --database-url "$2" "${limits[@]}" >"$dir/serve-$port.log" 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$port"
  wait_up "$url"
}

fresh_db() { # ENGINE -> URL of an empty database
  if [ "$1" = sqlite ]; then
    echo "sqlite://$dir/r$RANDOM$RANDOM.sqlite"
  else
    local name="r$RANDOM$RANDOM"
    psql -q "$WEBTUNE_TEST_PG_URL" -c "CREATE DATABASE $name" >/dev/null
    echo "$pg_base/$name"
  fi
}

stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

query="device_key=gpu-nvidia/hopper/h0/-&op=matmul&shape=64,64,64&target=wgsl"

for engine in sqlite postgres; do
  for bin in "${bins[@]}"; do
    for c in 16 64; do
      serve "$bin" "$(fresh_db "$engine")"
      printf '== reports: %s, %s, %s clients: ' "$engine" "$bin" "$c"
      target/release/report_load "$url" "$n" "$c" 2>/dev/null
      stop_servers
    done
  done
done

# Lookups while 64 clients report (newest binary), against bare axum idle.
bin="${bins[-1]}"
for engine in sqlite postgres; do
  serve "$bin" "$(fresh_db "$engine")"
  answer="$(curl -fsS "$url/v1/kernels/best?$query")"
  target/release/report_load "$url" "$n" 64 >"$dir/during.json" 2>"$dir/during.err" &
  lp=$!
  until grep -q sending "$dir/during.err" 2>/dev/null; do sleep 0.05; done
  echo "== lookups during reports: $engine (wrk -t1 -c16 -d2s)"
  wrk -t1 -c16 -d2s --latency "$url/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx'
  wait "$lp"
  printf '   the reports meanwhile: '
  cat "$dir/during.json"
  stop_servers
done
port=$((port + 1))
"$ex/bare_axum" "127.0.0.1:$port" "${#answer}" >"$dir/bare.log" 2>&1 &
pids+=($!)
sleep 0.5
echo "== lookups: bare axum, idle (wrk -t1 -c16 -d2s)"
# The same path and query as the lookups above (bare axum routes only
# /v1/kernels/best: `/` was a 404).
wrk -t1 -c16 -d2s --latency "http://127.0.0.1:$port/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx'
stop_servers

# Three servers on one PostgreSQL against one.
serve "$bin" "$(fresh_db postgres)"
printf '== reports: postgres, 1 server, 64 clients: '
target/release/report_load "$url" "$n" 64 2>/dev/null
stop_servers
db="$(fresh_db postgres)"
urls=""
for _ in 1 2 3; do
  serve "$bin" "$db"
  urls="${urls:+$urls,}$url"
done
printf '== reports: postgres, 3 servers, 64 clients, every report to another server than its session: '
target/release/report_load "$urls" "$n" 64 2>/dev/null
