#!/usr/bin/env bash
# The crowd simulation against three servers on one PostgreSQL (issue 20).
#
#   scripts/bench/population.sh BIN_DIR OUT [population options...]
#
# BIN_DIR holds a release `webtune` and `population` (target/release after
# cargo build --release -p webtune -p webtune-research, or a copy of an
# older build; an older build's examples/population is found too), so that two builds
# can be compared in one session. Starts a throwaway PostgreSQL cluster
# (scripts/postgres.sh), three `webtune serve --quorum 3` on it with the
# default rate limits, runs `population` with the options given (defaults:
# 10,000 clients, 50 classes, 60 s of arrivals, 64 in flight; add --json
# for one JSON line), writes its output to OUT, prints the output's last
# lines, and stops everything.
set -euo pipefail
bin="${1:?usage: population.sh BIN_DIR OUT [options]}"
out="${2:?usage: population.sh BIN_DIR OUT [options]}"
shift 2
here="$(cd "$(dirname "$0")/../.." && pwd)"
webtune="$bin/webtune"
population="$bin/population"
[ -x "$population" ] || population="$bin/examples/population"
[ -x "$webtune" ] && [ -x "$population" ] || { echo "no webtune or population in $bin" >&2; exit 2; }

eval "$("$here/scripts/postgres.sh" start)"
work="$(mktemp -d /tmp/webtune-population.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$here/scripts/postgres.sh" stop "$WEBTUNE_TEST_PG_DIR"
  rm -rf "$work"
}
trap cleanup EXIT

urls=()
for i in 1 2 3; do
  "$webtune" serve --addr 127.0.0.1:0 --database-url "$WEBTUNE_TEST_PG_URL" --quorum 3 \
    --models-dir "$work/models" >"$work/serve$i.log" 2>&1 &
  pids+=($!)
  # The first server migrates the database; the others start after it.
  for _ in $(seq 1 300); do
    url="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve$i.log" | head -1 || true)"
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$work/serve$i.log" >&2; exit 1; }
  urls+=("$url")
done
servers="$(IFS=,; echo "${urls[*]}")"
server_pids="$(IFS=,; echo "${pids[*]}")"
"$population" --servers "$servers" --server-pids "$server_pids" --clients 10000 --classes 50 \
  --arrival-seconds 60 --parallel 64 --seed 2026 --progress 0 "$@" >"$out"
tail -n 12 "$out"
