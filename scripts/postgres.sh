#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests and prints its URL.
#
#   eval "$(scripts/postgres.sh start)"   # exports WEBTUNE_TEST_PG_URL and WEBTUNE_TEST_PG_DIR
#   eval "$(scripts/postgres.sh start --fast)"
#   scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR"
#
# Durable by default: fsync and synchronous_commit on, as a deployment runs,
# so a benchmark measures reports acknowledged only once on disk. `--fast`
# turns fsync off, for test suites only: they check that a report is
# acknowledged after its transaction commits (a killed server loses none),
# never that the disk keeps a commit across a power loss, and fsync off
# spares two shared cores a flush per commit. WEBTUNE_PG_OPTS adds server
# options (e.g. "-c shared_buffers=4GB"); PGBIN names the binaries (default:
# the newest /usr/lib/postgresql/*/bin) and WEBTUNE_PG_USER the user they
# run as when this script runs as root (default postgres).
#
# Installs the `postgresql` apt package when initdb is missing. The cluster
# lives in a temporary directory, listens only on 127.0.0.1 on a free port,
# trusts local connections, and runs as the `postgres` user when this script
# runs as root (PostgreSQL refuses to run as root).
set -euo pipefail

find_bin() {
  if [ -n "${PGBIN:-}" ]; then echo "$PGBIN"; else ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; fi
}
user="${WEBTUNE_PG_USER:-postgres}"

start() {
  local durability="-c fsync=on -c synchronous_commit=on"
  [ "${1:-}" = --fast ] && durability="-c fsync=off"
  local bin; bin="$(find_bin)"
  if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
    echo "installing postgresql" >&2
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends postgresql >&2
    bin="$(find_bin)"
  fi
  local dir port as=()
  dir="$(mktemp -d /tmp/webtune-pg.XXXXXX)"
  # A free port: ask the kernel for one, then hand it to postgres.
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  if [ "$(id -u)" -eq 0 ]; then
    # A machine without the postgresql package (a relocatable build in
    # PGBIN) may lack the user.
    id -u "$user" >/dev/null 2>&1 || useradd -M -r -s /usr/sbin/nologin "$user" >&2
    chown "$user": "$dir"
    as=(runuser -u "$user" -- env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $dir $durability -c max_connections=300 ${WEBTUNE_PG_OPTS:-}" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  echo "export WEBTUNE_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
  echo "export WEBTUNE_TEST_PG_DIR=$dir"
}

stop() {
  local dir="$1" bin as=()
  bin="$(find_bin)"
  [ "$(id -u)" -eq 0 ] && as=(runuser -u "$user" -- env "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}")
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
  *) echo "usage: $0 start [--fast] | stop DIR" >&2; exit 2 ;;
esac
