#!/usr/bin/env bash
# On the GPU machine's 16 cores (no cargo, no network, no PostgreSQL): the
# write path before and after a change, ABBA in one call (issue 39), then
# the after build's whole matrix.
#   research/device/write_16.sh CARRY [REPORTS] [CLIENTS] [ROUNDS] [SETUPS]
# CARRY holds pg-portable.tar.xz (scripts/bench/pg-portable.sh),
# a/webtune.xz and b/webtune.xz (stripped release builds, xz), and
# report_load and bare_axum. Logs go to $OUT (or ./out): ab.log
# (scripts/bench/write_ab.sh) and path.log (scripts/bench/write_path.sh
# with no history, when WRITE_PATH=1).
set -uo pipefail
carry=$(cd "${1:?usage: write_16.sh CARRY [REPORTS] [CLIENTS] [ROUNDS] [SETUPS]}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
n=${2:-10000} c=${3:-64} rounds=${4:-2} setups=${5:-"pg1 pg3 sqlite"}
# shellcheck source=pg_env.sh
. "$(dirname "$0")/pg_env.sh"
bins=/tmp/webtune-wp
for side in a b; do
  mkdir -p "$bins/$side"
  [ -x "$bins/$side/webtune" ] || { xz -dc "$carry/$side/webtune.xz" > "$bins/$side/webtune" && chmod +x "$bins/$side/webtune"; }
  cp "$carry/report_load" "$carry/bare_axum" "$bins/$side/"
done
cd "$root"
lscpu | grep -m1 'Model name'
scripts/bench/write_ab.sh "$bins/a" "$bins/b" "$n" "$c" "$rounds" "$setups" 2>&1 | tee "$out/ab.log"
if [ "${WRITE_PATH:-0}" = 1 ]; then
  BINS="$bins/b" scripts/bench/write_path.sh "$n" "64 256" 0 2>&1 | tee "$out/path.log"
fi
