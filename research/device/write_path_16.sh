#!/usr/bin/env bash
# On the GPU machine's 16 cores (no cargo, no network, no PostgreSQL): the
# write path's whole matrix (issue 39), scripts/bench/write_path.sh with its
# defaults: 64 and 256 clients; SQLite, PostgreSQL with one and three
# servers; an empty database and one holding HISTORY ballots; lookups
# while reports flow, against bare axum idle.
#   research/device/write_path_16.sh CARRY [REPORTS] [CLIENTS] [HISTORY]
# CARRY is write_16.sh's: pg-portable.tar.xz (scripts/bench/pg-portable.sh,
# which brings wrk), b/webtune.xz (the stripped release build measured,
# xz), report_load and bare_axum. The log goes to $OUT/path.log (or ./out).
set -uo pipefail
carry=$(cd "${1:?usage: write_path_16.sh CARRY [REPORTS] [CLIENTS] [HISTORY]}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD/out}; mkdir -p "$out"
# shellcheck source=pg_env.sh
. "$(dirname "$0")/pg_env.sh"
bins=/tmp/webtune-wpf
mkdir -p "$bins"
[ -x "$bins/webtune" ] || { xz -dc "$carry/b/webtune.xz" > "$bins/webtune" && chmod +x "$bins/webtune"; }
cp "$carry/report_load" "$carry/bare_axum" "$bins/"
chmod -R a+rx "$bins"
cd "$root"
lscpu | grep -m1 'Model name'
BINS="$bins" scripts/bench/write_path.sh "${2:-10000}" "${3:-64 256}" "${4:-10000000}" 2>&1 | tee "$out/path.log"
