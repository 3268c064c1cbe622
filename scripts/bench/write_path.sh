#!/usr/bin/env bash
# The crowd's write path at scale (issue 39), all in one run so that ratios
# compare like with like. PostgreSQL runs durable (fsync and
# synchronous_commit on); every report is acknowledged only once committed.
#   1. durable top-5 reports/s, p50 and p99 (report_load), for each client
#      count: SQLite with one server, PostgreSQL with one and with three
#      servers (every report crossing servers);
#   2. best-kernel lookups (wrk) on one of three servers while 64 clients
#      report, against bare axum idle, with the same wrk;
#   3. history scale: the same load on a database already holding HISTORY
#      ballots and as many measurements (generated in PostgreSQL, in
#      parallel slices), against an empty one.
#
#   scripts/bench/write_path.sh [REPORTS] [CLIENTS] [HISTORY]
#
# REPORTS per run (default 20000), CLIENTS a list (default "64 256"),
# HISTORY ballots (default 10000000; 0 skips part 3). Binaries come from
# BINS (webtune, report_load, bare_axum; default target/release with
# bare_axum under examples/), wrk from WRK, PostgreSQL from PGBIN (see
# scripts/postgres.sh). Nothing is built here, so it runs where cargo is
# not: on 2 cores, `cargo build --release -p webtune --bin webtune
# --example bare_axum && cargo build --release -p webtune-research --bin
# report_load` first.
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-20000}"
clients="${2:-64 256}"
history="${3:-10000000}"
bins="${BINS:-target/release}"
webtune="$bins/webtune"
load="$bins/report_load"
bare="$bins/bare_axum"
[ -x "$bare" ] || bare="$bins/examples/bare_axum"
wrk="${WRK:-wrk}"
psql="psql"
[ -n "${PGBIN:-}" ] && psql="$PGBIN/psql"
for b in "$webtune" "$load" "$bare"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done
dir="$(mktemp -d /tmp/webtune-write.XXXXXX)"
chmod 777 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${WEBTUNE_TEST_PG_DIR:-}" ] && scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
# An operator's settings for a 16-core machine; durability stays on.
export WEBTUNE_PG_OPTS="${WEBTUNE_PG_OPTS:--c shared_buffers=4GB -c max_wal_size=16GB -c checkpoint_timeout=30min}"
eval "$(scripts/postgres.sh start)"
pg_base="${WEBTUNE_TEST_PG_URL%/*}"
"$psql" -qAt "$WEBTUNE_TEST_PG_URL" -c "SHOW fsync" -c "SHOW synchronous_commit" | tr '\n' ' ' | sed 's/^/== PostgreSQL fsync, synchronous_commit: /'
echo
echo "== machine: $(nproc) cores; $(date -u +%F)"
ulimit -n 65536 2>/dev/null || true
limits=(--rate-per-address 1000000000 --rate-per-session 1000000000 --max-connections-per-address 4000 --max-connections 8000
  --max-in-flight 4096 --max-queues 1024)
port=18500

up() { # URL: answers /healthz (curl, or bash's /dev/tcp where curl is missing)
  if command -v curl >/dev/null; then curl -fsS "$1/healthz" >/dev/null 2>&1; return; fi
  local hp="${1#http://}"
  (exec 3<>"/dev/tcp/${hp%:*}/${hp#*:}") 2>/dev/null
}

wait_up() {
  for _ in $(seq 1 300); do
    up "$1" && return 0
    sleep 0.1
  done
  echo "server at $1 did not come up: $(tail -3 "$dir"/serve-*.log)" >&2
  exit 1
}

serve() { # DB_URL: a new server; its URL in $url
  port=$((port + 1))
  "$webtune" serve --addr "127.0.0.1:$port" --database-url "$1" "${limits[@]}" >"$dir/serve-$port.log" 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$port"
  wait_up "$url"
}

fresh_db() { # ENGINE -> URL of an empty database
  if [ "$1" = sqlite ]; then
    echo "sqlite://$dir/r$RANDOM$RANDOM.sqlite"
  else
    local name="r$RANDOM$RANDOM"
    "$psql" -q "$WEBTUNE_TEST_PG_URL" -c "CREATE DATABASE $name" >/dev/null
    echo "$pg_base/$name"
  fi
}

stop_servers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

servers() { # DB_URL COUNT: COUNT servers; their URLs in $urls
  urls=""
  for _ in $(seq 1 "$2"); do
    serve "$1"
    urls="${urls:+$urls,}$url"
  done
}

query="device_key=gpu-nvidia/hopper/h0/-&op=matmul&shape=64,64,64&target=wgsl"

# --- 1. Reports/s -------------------------------------------------------------
for c in $clients; do
  for setup in "sqlite 1" "postgres 1" "postgres 3"; do
    set -- $setup
    servers "$(fresh_db "$1")" "$2"
    printf '== reports: %s, %s server(s), %s clients: ' "$1" "$2" "$c"
    "$load" "$urls" "$n" "$c" 2>/dev/null
    stop_servers
  done
done

# --- 2. Lookups during the load, against bare axum idle ------------------------
wrk_args=(-t4 -c64 -d3s --latency)
servers "$(fresh_db postgres)" 3
first="${urls%%,*}"
"$load" "$urls" 256 64 >/dev/null 2>&1 # a winner to look up
answer="$(curl -fsS "$first/v1/kernels/best?$query" 2>/dev/null || printf '%1400s' '')"
"$load" "$urls" "$n" 64 >"$dir/during.json" 2>"$dir/during.err" &
lp=$!
until grep -q sending "$dir/during.err" 2>/dev/null; do sleep 0.05; done
echo "== lookups on one of 3 servers while 64 clients report to them (wrk ${wrk_args[*]})"
"$wrk" "${wrk_args[@]}" "$first/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx'
wait "$lp"
printf '   the reports meanwhile: '
cat "$dir/during.json"
stop_servers
port=$((port + 1))
"$bare" "127.0.0.1:$port" "${#answer}" >"$dir/bare.log" 2>&1 &
pids+=($!)
sleep 0.5
echo "== lookups: bare axum, idle (wrk ${wrk_args[*]})"
"$wrk" "${wrk_args[@]}" "http://127.0.0.1:$port/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx'
stop_servers

# --- 3. History scale -----------------------------------------------------------
[ "$history" -gt 0 ] || exit 0
# fill DB_URL: HISTORY ballots (15 per session: 5 kernels at 3 keys) and as
# many measurements (3 reports of 5 per session, 2 of them older) on the
# keys, kernels and space the warm-up's reports used, then the tallies
# recounted from the ballots, ANALYZE (autovacuum's steady state) and a
# checkpoint. Foreign keys are not checked row by row (the rows are made
# consistent).
fill() {
  local db="$1" sessions=$((history / 15)) slices=8
  local space kernels keys fp
  space="$("$psql" -qAt "$db" -c "SELECT space_checksum FROM ballots LIMIT 1")"
  kernels="$("$psql" -qAt "$db" -c "SELECT string_agg(format('(%s, %L)', i, k), ', ') FROM (SELECT kernel_sha256 AS k, row_number() OVER (ORDER BY kernel_sha256) - 1 AS i FROM (SELECT DISTINCT kernel_sha256 FROM ballots) d) x WHERE i < 5")"
  keys="$("$psql" -qAt "$db" -c "SELECT string_agg(format('(%s, %L, %L, %L)', i, device_key, arch_key, vendor_key), ', ') FROM (SELECT *, row_number() OVER (ORDER BY device_key) - 1 AS i FROM (SELECT DISTINCT device_key, arch_key, vendor_key FROM sessions) d) x")"
  fp="$("$psql" -qAt "$db" -c "SELECT fingerprint_sha256 FROM devices LIMIT 1")"
  local nkeys; nkeys="$("$psql" -qAt "$db" -c "SELECT COUNT(DISTINCT device_key) FROM sessions")"
  local t0=$SECONDS
  for s in $(seq 0 $((slices - 1))); do
    local lo=$((s * sessions / slices + 1)) hi=$(((s + 1) * sessions / slices))
    "$psql" -q "$db" >"$dir/fill-$s.log" 2>&1 <<SQL &
SET session_replication_role = replica;
CREATE TEMP TABLE g AS SELECT x, md5('s' || x) AS sid, k.* FROM generate_series($lo, $hi) x
  JOIN (VALUES $keys) AS k(ki, dk, ak, vk) ON k.ki = x % $nkeys;
INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at)
  SELECT sid, '$fp', dk, ak, vk, '', x FROM g;
INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at)
  SELECT md5('r' || x || '-' || t), sid, 'matmul', '64,64,64', 'wgsl', '$space', dk, ak, vk, '', 1000 + x * 3 + t
  FROM g CROSS JOIN generate_series(0, 2) t;
INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight)
  SELECT md5('r' || x || '-' || t), kn.i + 1, kn.k, md5('t' || x || '-' || t || '-' || kn.i), 100 + kn.i, 10, 1, 5 - kn.i
  FROM g CROSS JOIN generate_series(0, 2) t CROSS JOIN (VALUES $kernels) AS kn(i, k);
INSERT INTO ballots (op, shape, target, space_checksum, level, level_key, session_id, kernel_sha256, report_id, created_at, weight, median_us)
  SELECT 'matmul', '64,64,64', 'wgsl', '$space', l.level, CASE l.level WHEN 'device' THEN dk WHEN 'arch' THEN ak ELSE vk END,
         sid, kn.k, md5('r' || x || '-2'), 1000 + x * 3 + 2, 5 - kn.i, 100 + kn.i
  FROM g CROSS JOIN (VALUES $kernels) AS kn(i, k) CROSS JOIN (VALUES ('device'), ('arch'), ('vendor')) AS l(level);
SQL
  done
  wait
  cat "$dir"/fill-*.log
  "$psql" -q "$db" <<SQL
DELETE FROM tallies;
INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions)
  SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, SUM(weight), COUNT(*) FROM ballots
  GROUP BY op, shape, target, space_checksum, level, level_key, kernel_sha256;
ANALYZE;
CHECKPOINT;
SQL
  printf '   filled in %s s: ' $((SECONDS - t0))
  "$psql" -qAt "$db" -c "SELECT format('%s ballots, %s measurements, %s reports, database %s', (SELECT COUNT(*) FROM ballots), (SELECT COUNT(*) FROM measurements), (SELECT COUNT(*) FROM reports), pg_size_pretty(pg_database_size(current_database())))"
}

for stored in empty history; do
  db="$(fresh_db postgres)"
  servers "$db" 1
  "$load" "$urls" 256 64 >/dev/null 2>&1 # kernels, keys and space to fill on
  if [ "$stored" = history ]; then
    echo "== filling $history ballots"
    fill "$db"
  fi
  printf '== reports: postgres, 1 server, 64 clients, %s database: ' "$stored"
  "$load" "$urls" "$n" 64 2>/dev/null
  stop_servers
  servers "$db" 3
  printf '== reports: postgres, 3 servers, 64 clients, %s database: ' "$stored"
  "$load" "$urls" "$n" 64 2>/dev/null
  stop_servers
done
