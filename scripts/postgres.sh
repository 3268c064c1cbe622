#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests and prints its URL.
#
#   eval "$(scripts/postgres.sh start)"   # exports WEBTUNE_TEST_PG_URL and WEBTUNE_TEST_PG_DIR
#   scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR"
#
# Installs the `postgresql` apt package when initdb is missing. The cluster
# lives in a temporary directory, listens only on 127.0.0.1 on a free port,
# trusts local connections, and runs as the `postgres` user when this script
# runs as root (PostgreSQL refuses to run as root).
set -euo pipefail

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

start() {
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
    chown postgres: "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=300" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  echo "export WEBTUNE_TEST_PG_URL=postgres://postgres@127.0.0.1:$port/postgres"
  echo "export WEBTUNE_TEST_PG_DIR=$dir"
}

stop() {
  local dir="$1" bin as=()
  bin="$(find_bin)"
  [ "$(id -u)" -eq 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
  *) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
