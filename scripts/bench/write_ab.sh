#!/usr/bin/env bash
# The write path before and after a change, interleaved, with where a
# report's cost goes (issue 39). For a machine where only ratios measured
# in one run mean anything (a shared 2-core one): each round runs A, B, B,
# A (ABBA) for every setup, a fresh database each run, and prints a line
# per run:
#   - durable top-5 reports/s, p50 and p99 (report_load; every report is
#     acknowledged only once on disk);
#   - CPU milliseconds per report of PostgreSQL's processes and of the
#     servers (from /proc, as write_path.sh reads it), and the load average;
#   - from the servers' /metrics: reports per writer group and the writer's
#     ms per report inside its transactions (builds that export
#     webtune_db_writer_*), and reports per elector pass and the elector's
#     ms per report;
#   - PostgreSQL (pg_stat_statements, pg_stat_wal, pg_stat_database):
#     statements, commits and WAL syncs per report, and the statements
#     that took the most time, per report, in the first round;
#   - the database's growth per report (its session and queue included):
#     the SQLite file and its log, or PostgreSQL's database size less an
#     empty one's;
#   - SQLite with STRACE=1: fsync and fdatasync calls per report while
#     the reports are sent (`strace -f -c` attached to the server then;
#     strace slows it, so those runs' rates, in parentheses, are not
#     compared).
#
#   scripts/bench/write_ab.sh A_BINS B_BINS [REPORTS] [CLIENTS] [ROUNDS] [SETUPS]
#
# A_BINS and B_BINS are folders holding a `webtune` each (report_load
# comes from B_BINS, else target/release); REPORTS per run (default 2000),
# CLIENTS (64), ROUNDS (2), SETUPS a list of sqlite, pg1 and pg3 (one or
# three servers on one PostgreSQL, reports crossing servers; default all).
# ANSWER as in write_path.sh (durable by default). PostgreSQL runs durable
# (fsync, synchronous_commit on), from scripts/postgres.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
a_bins="${1:?usage: write_ab.sh A_BINS B_BINS [REPORTS] [CLIENTS] [ROUNDS] [SETUPS]}"
b_bins="${2:?usage: write_ab.sh A_BINS B_BINS [REPORTS] [CLIENTS] [ROUNDS] [SETUPS]}"
n="${3:-2000}"
c="${4:-64}"
rounds="${5:-2}"
setups="${6:-sqlite pg1 pg3}"
answer="${ANSWER:-durable}"
load="$b_bins/report_load"
[ -x "$load" ] || load=target/release/report_load
for b in "$a_bins/webtune" "$b_bins/webtune" "$load"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done
dir="$(mktemp -d /tmp/webtune-ab.XXXXXX)"
chmod 777 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${WEBTUNE_TEST_PG_DIR:-}" ] && scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
export WEBTUNE_PG_OPTS="${WEBTUNE_PG_OPTS:--c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=1000 -c jit=off}"
eval "$(scripts/postgres.sh start)"
pg_base="${WEBTUNE_TEST_PG_URL%/*}"
psql -qAt "$WEBTUNE_TEST_PG_URL" -c "SELECT version()" -c "SHOW fsync" -c "SHOW synchronous_commit" | tr '\n' ' ' | sed 's/^/== /; s/$/(fsync, synchronous_commit)\n/'
echo "== $(date -u +%F), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); $n reports a run from $c clients, answered once $answer"
echo "== A: $a_bins/webtune; B: $b_bins/webtune"
ulimit -n 65536 2>/dev/null || true
limits=(--rate-per-address 1000000000 --rate-per-session 1000000000 --max-connections-per-address 4000 --max-connections 8000
  --max-in-flight 4096 --max-queues 1024)
port=18700

wait_up() {
  for _ in $(seq 1 300); do
    curl -fsS "$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server at $1 did not come up: $(tail -3 "$dir"/serve-*.log)" >&2
  exit 1
}

# servers BIN DB_URL COUNT: COUNT servers; their URLs in $urls.
servers() {
  urls=""
  local i
  for i in $(seq 1 "$3"); do
    port=$((port + 1))
    "$1" serve --addr "127.0.0.1:$port" --database-url "$2" "${limits[@]}" --report-answer "$answer" >"$dir/serve-$port.log" 2>&1 &
    pids+=($!)
    wait_up "http://127.0.0.1:$port"
    urls="${urls:+$urls,}http://127.0.0.1:$port"
  done
}

stop_servers() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

# CPU ticks of every process, keyed by pid and start time, so that
# processes born during a run count from zero.
snap() {
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null && printf '%s\n' "$line"
  done >"$1"
}
# cpu_ms BEFORE AFTER PIDS PARENTS: CPU ms used between the snaps by the
# processes PIDS (space-separated) and the children of PARENTS: only this
# run's servers and this cluster's PostgreSQL, not other users' processes.
cpu_ms() {
  awk -v pids=" $3 " -v parents=" $4 " -v hz="$(getconf CLK_TCK)" '
    { rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
      if (index(pids, " " $1 " ") == 0 && index(parents, " " f[2] " ") == 0) next
      key = $1 "/" f[20]; t = f[12] + f[13]
      if (FILENAME == A) t0[key] = t; else t1[key] = t }
    END { s = 0; for (k in t1) s += t1[k] - ((k in t0) ? t0[k] : 0); printf "%.0f", s * 1000 / hz }' A="$1" "$1" "$2"
}
postmaster="$(head -1 "$WEBTUNE_TEST_PG_DIR/data/postmaster.pid")"

metric() { # NAME: summed over $urls
  local u s=0 v
  for u in ${urls//,/ }; do
    v="$(curl -fsS "$u/metrics" 2>/dev/null | awk -v m="$1" '$1 == m { print $2; f = 1 } END { if (!f) print "" }')"
    [ -z "$v" ] && { echo ""; return; }
    s="$(awk -v a="$s" -v b="$v" 'BEGIN { print a + b }')"
  done
  echo "$s"
}

pg_reset() { # DB_URL
  psql -qAt "$1" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" \
    -c "SELECT pg_stat_reset_shared('wal')" -c "SELECT pg_stat_reset()" >/dev/null
}

printf '| %-6s | %-5s | %-3s | %-9s | %-6s | %-6s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-6s | %-5s |\n' \
  setup bin run reports/s p50_ms p99_ms pg_ms/rep web_ms/rep rep/group wr_ms/rep rep/pass el_ms/rep stmt/rep syncs/rep kB/rep load >"$dir/table"
empty_pg="$(psql -qAt "$WEBTUNE_TEST_PG_URL" -c "CREATE DATABASE ab_empty" -c "SELECT pg_database_size('ab_empty')" | tail -1)"

run() { # SETUP LABEL BINS ROUND
  local setup="$1" label="$2" bins="$3" round="$4" db count=1 engine=postgres
  case "$setup" in
    sqlite) engine=sqlite; db="sqlite://$dir/r$RANDOM$RANDOM.sqlite" ;;
    pg1 | pg3)
      [ "$setup" = pg3 ] && count=3
      local name="r$RANDOM$RANDOM"
      psql -q "$WEBTUNE_TEST_PG_URL" -c "CREATE DATABASE $name" >/dev/null
      db="$pg_base/$name"
      ;;
    *) echo "unknown setup $setup" >&2; exit 2 ;;
  esac
  local tracing=""
  [ "$engine" = sqlite ] && [ "${STRACE:-0}" = 1 ] && tracing=strace
  servers "$bins/webtune" "$db" "$count"
  rm -f "$dir/load.err" # the last run's "sending" would start the clock early
  "$load" "$urls" "$n" "$c" >"$dir/load.json" 2>"$dir/load.err" &
  local lp=$!
  until grep -q sending "$dir/load.err" 2>/dev/null || ! kill -0 "$lp" 2>/dev/null; do sleep 0.05; done
  [ "$engine" = postgres ] && pg_reset "$db"
  local g0 gr0 gb0 e0 er0 eb0
  g0="$(metric webtune_db_writer_groups_total)"; gr0="$(metric webtune_db_writer_reports_total)"; gb0="$(metric webtune_db_writer_busy_seconds_total)"
  e0="$(metric webtune_db_election_passes_total)"; er0="$(metric webtune_db_election_reports_total)"; eb0="$(metric webtune_db_election_busy_seconds_total)"
  local tracer=""
  if [ -n "$tracing" ]; then
    strace -f -c -e trace=fsync,fdatasync -o "$dir/strace" -p "${pids[0]}" 2>/dev/null &
    tracer=$!
  fi
  snap "$dir/s0"
  wait "$lp" || { echo "report_load failed: $(tail -3 "$dir/load.err")" >&2; exit 1; }
  snap "$dir/s1"
  if [ -n "$tracer" ]; then kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true; fi
  local la; la="$(cut -d' ' -f1 /proc/loadavg)"
  local g1 gr1 gb1 e1 er1 eb1
  g1="$(metric webtune_db_writer_groups_total)"; gr1="$(metric webtune_db_writer_reports_total)"; gb1="$(metric webtune_db_writer_busy_seconds_total)"
  e1="$(metric webtune_db_election_passes_total)"; er1="$(metric webtune_db_election_reports_total)"; eb1="$(metric webtune_db_election_busy_seconds_total)"
  local j rate p50 p99 got
  j="$(cat "$dir/load.json")"
  field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$j"; }
  rate="$(printf '%.0f' "$(field reports_per_s)")"; p50="$(printf '%.0f' "$(field p50_ms)")"; p99="$(printf '%.0f' "$(field p99_ms)")"
  got="$(field reports)"
  local pgms webms
  pgms="$(awk -v t="$(cpu_ms "$dir/s0" "$dir/s1" "$postmaster" "$postmaster")" -v n="$got" 'BEGIN { printf "%.2f", t / n }')"
  webms="$(awk -v t="$(cpu_ms "$dir/s0" "$dir/s1" "${pids[*]}" "${pids[*]}")" -v n="$got" 'BEGIN { printf "%.2f", t / n }')"
  ratio() { [ -n "$1" ] && [ -n "$3" ] && awk -v a="$1" -v b="$2" -v c="$3" -v d="$4" -v k="$5" 'BEGIN { if (c - d > 0) printf "%.2f", k * (a - b) / (c - d); else print "-" }' || echo "-"; }
  local per_group wr_ms per_pass el_ms
  per_group="$(ratio "$gr1" "$gr0" "$g1" "$g0" 1)"; wr_ms="$(ratio "$gb1" "$gb0" "$gr1" "$gr0" 1000)"
  per_pass="$(ratio "$er1" "$er0" "$e1" "$e0" 1)"; el_ms="$(ratio "$eb1" "$eb0" "$er1" "$er0" 1000)"
  local stmts="-" syncs="-"
  if [ "$engine" = postgres ]; then
    stmts="$(psql -qAt "$db" -c "SELECT round(SUM(calls)::numeric / $got, 1) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' \
      AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())")"
    syncs="$(psql -qAt "$db" -c "SELECT round(wal_sync::numeric / $got, 3) FROM pg_stat_wal")"
    local commits; commits="$(psql -qAt "$db" -c "SELECT round(xact_commit::numeric / $got, 2) FROM pg_stat_database WHERE datname = current_database()")"
    if [ "$round" = 1 ]; then
      echo "   $setup $label: $commits commits a report; the statements that took the most time (ms per report, calls per report):"
      # Statements that differ only in their lists' lengths count as one.
      psql -qAt -F ' | ' "$db" -c "SELECT round((SUM(total_exec_time) / $got)::numeric, 3), round(SUM(calls)::numeric / $got, 3), q \
        FROM (SELECT total_exec_time, calls, left(regexp_replace(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), \
        '\\\$[0-9]+', '\$', 'g'), '(\\(?\\\$(, )?\\)?(, )?)+', '..', 'g'), 120) AS q FROM pg_stat_statements \
        WHERE query NOT LIKE '%pg_stat%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())) s \
        GROUP BY q ORDER BY 1 DESC LIMIT 12" | sed 's/^/     /'
    fi
  fi
  local kb
  if [ "$engine" = postgres ]; then
    kb="$(psql -qAt "$db" -c "SELECT round((pg_database_size(current_database()) - $empty_pg) / 1024.0 / $got, 1)")"
  fi
  stop_servers
  if [ "$engine" = sqlite ]; then
    local f="${db#sqlite://}"
    kb="$( (stat -c %s "$f" "$f-wal" 2>/dev/null || true) | awk -v n="$got" '{ s += $1 } END { printf "%.1f", s / 1024 / n }')"
  fi
  if [ -n "$tracing" ]; then
    syncs="$(awk -v n="$got" '$NF == "fsync" || $NF == "fdatasync" { s += $4 } END { printf "%.3f", s / n }' "$dir/strace")"
    rm -f "$dir/strace"
    rate="($rate)"
  fi
  printf '| %-6s | %-5s | %-3s | %-9s | %-6s | %-6s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-9s | %-6s | %-5s |\n' \
    "$setup" "$label" "$round" "$rate" "$p50" "$p99" "$pgms" "$webms" "$per_group" "$wr_ms" "$per_pass" "$el_ms" "$stmts" "$syncs" "$kb" "$la" \
    | tee -a "$dir/table"
}

for round in $(seq 1 "$rounds"); do
  for setup in $setups; do
    run "$setup" A "$a_bins" "$round"
    run "$setup" B "$b_bins" "$round"
    run "$setup" B "$b_bins" "$round"
    run "$setup" A "$a_bins" "$round"
  done
done
echo
echo "== per run (pg_ms and web_ms: CPU ms a report of PostgreSQL and of the servers; wr_ms: the writer's ms a report inside"
echo "   its transactions; el_ms: the elector's ms a report; stmt and syncs: PostgreSQL statements and WAL syncs, or SQLite fsyncs under STRACE=1)"
cat "$dir/table"
