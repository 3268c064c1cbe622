#!/usr/bin/env bash
# The crowd's write path at scale (issue 39): the whole matrix in one run,
# so that ratios compare like with like, then one table. PostgreSQL runs
# durable (fsync and synchronous_commit on); every report is acknowledged
# only once it is on disk.
#   - durable top-5 reports/s, p50 and p99 (report_load) for each client
#     count: SQLite with one server; PostgreSQL with one and with three
#     servers (every report crossing servers), on an empty database and on
#     one already holding HISTORY ballots and as many measurements;
#   - while each load runs, where the machine's time goes (from /proc, as
#     pidstat would): each core's busy share, and the cores that
#     PostgreSQL, the servers and the load generator used;
#   - best-kernel lookups (wrk) on one of three servers while 64 clients
#     report, against bare axum idle with the same wrk (skipped without wrk);
#   - how far the elections lagged the reports: each server's elector
#     counts stored reports in passes (the longest wait from a report's
#     commit to its count, and reports per pass, from /metrics).
#
#   scripts/bench/write_path.sh [REPORTS] [CLIENTS] [HISTORY]
#
# REPORTS per run (default 10000), CLIENTS a list (default "64 256"),
# HISTORY ballots (default 10000000; 0 skips the history runs). About 9
# minutes on 16 cores with the defaults, 3-4 of them filling the history.
# ANSWER is when the servers answer a report (`webtune serve
# --report-answer`): durable (default: once on disk, counted by the next
# pass) or counted (once on disk and counted).
#
# Self-contained for a machine without cargo, network or PostgreSQL:
# binaries (webtune, report_load, bare_axum) come from BINS, by default
# devbin/ where it holds them, else target/release (bare_axum under
# examples/); PostgreSQL from PGBIN, else from devbin/pg-portable.tar.xz
# (scripts/bench/pg-portable.sh's bundle, unpacked once into
# /tmp/webtune-pg-portable; it brings wrk too), else the system's (see
# scripts/postgres.sh, which runs it as a plain user when this runs as
# root). To prepare devbin/ here (about 45 MB):
#   cargo build --release -p webtune --bin webtune --example bare_axum
#   cargo build --release -p webtune-research --bin report_load
#   mkdir -p devbin && cp target/release/webtune target/release/report_load \
#     target/release/examples/bare_axum devbin/ && strip devbin/webtune devbin/report_load devbin/bare_axum
#   scripts/bench/pg-portable.sh devbin/pg-portable.tar.xz
set -euo pipefail
cd "$(dirname "$0")/../.."
n="${1:-10000}"
clients="${2:-64 256}"
history="${3:-10000000}"
answer="${ANSWER:-durable}"
if [ -z "${BINS:-}" ]; then
  if [ -x devbin/webtune ]; then bins=devbin; else bins=target/release; fi
else
  bins="$BINS"
fi
webtune="$bins/webtune"
load="$bins/report_load"
bare="$bins/bare_axum"
[ -x "$bare" ] || bare="$bins/examples/bare_axum"
for b in "$webtune" "$load"; do [ -x "$b" ] || { echo "missing $b (see this script's header)" >&2; exit 1; }; done
if [ -z "${PGBIN:-}" ] && [ -f devbin/pg-portable.tar.xz ]; then
  pgroot=/tmp/webtune-pg-portable
  if [ ! -d "$pgroot/usr/lib/postgresql" ]; then
    mkdir -p "$pgroot"
    tar -C "$pgroot" -xJf devbin/pg-portable.tar.xz
    chmod -R a+rX "$pgroot"
  fi
  PGBIN="$(ls -d "$pgroot"/usr/lib/postgresql/*/bin | sort -V | tail -1)"
  export PGBIN
  export LD_LIBRARY_PATH="$pgroot/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -z "${WRK:-}" ] && [ -x "$pgroot/usr/bin/wrk" ] && WRK="$pgroot/usr/bin/wrk"
fi
wrk="${WRK:-wrk}"
psql="psql"
[ -n "${PGBIN:-}" ] && psql="$PGBIN/psql"
dir="$(mktemp -d /tmp/webtune-write.XXXXXX)"
chmod 777 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${WEBTUNE_TEST_PG_DIR:-}" ] && scripts/postgres.sh stop "$WEBTUNE_TEST_PG_DIR" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
cores="$(nproc)"
# An operator's settings for a 16-core machine; durability stays on. The
# maintenance settings serve the history's fill (index builds, ANALYZE).
export WEBTUNE_PG_OPTS="${WEBTUNE_PG_OPTS:--c shared_buffers=4GB -c max_wal_size=16GB -c checkpoint_timeout=30min -c jit=off \
-c maintenance_work_mem=1GB -c max_parallel_maintenance_workers=$((cores / 2)) -c max_worker_processes=$((cores + 8))}"
eval "$(scripts/postgres.sh start)"
pg_base="${WEBTUNE_TEST_PG_URL%/*}"
echo "== $(date -u +%F), $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(($(awk '/MemTotal/{print $2}' /proc/meminfo) / 1048576)) GiB"
"$psql" -qAt "$WEBTUNE_TEST_PG_URL" -c "SELECT version()" -c "SHOW fsync" -c "SHOW synchronous_commit" \
  | tr '\n' ' ' | sed 's/^/== /; s/$/(fsync, synchronous_commit)\n/'
echo "== $n reports a run, answered once $answer (--report-answer); binaries from $bins"
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
  "$webtune" serve --addr "127.0.0.1:$port" --database-url "$1" "${limits[@]}" --report-answer "$answer" >"$dir/serve-$port.log" 2>&1 &
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

metrics() { # URL: its /metrics text (curl, or bash's /dev/tcp where curl is missing)
  if command -v curl >/dev/null; then curl -fsS "$1/metrics"; return; fi
  local hp="${1#http://}"
  exec 3<>"/dev/tcp/${hp%:*}/${hp#*:}"
  printf 'GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n' "$hp" >&3
  cat <&3
  exec 3<&-
}

# elections: over the servers in $urls, the longest wait from a report's
# commit to its count (ms) and the reports one elector pass counted on
# average: "LAG_MS PER_PASS".
elections() {
  local u lag=0 passes=0 counted=0 m
  for u in ${urls//,/ }; do
    m="$(metrics "$u" 2>/dev/null || true)"
    lag="$(awk -v l="$lag" '$1 == "webtune_db_election_lag_max_seconds" { v = $2 * 1000; if (v > l) l = v } END { printf "%.0f", l }' <<<"$m")"
    passes=$((passes + $(awk '$1 == "webtune_db_election_passes_total" { print $2 + 0; f = 1 } END { if (!f) print 0 }' <<<"$m")))
    counted=$((counted + $(awk '$1 == "webtune_db_election_reports_total" { print $2 + 0; f = 1 } END { if (!f) print 0 }' <<<"$m")))
  done
  echo "$lag $(awk -v c="$counted" -v p="$passes" 'BEGIN { printf "%.0f", (p > 0 ? c / p : 0) }')"
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

# --- Where the time goes (/proc) ---------------------------------------------
# snap FILE: every core's jiffies, and every process's CPU ticks (utime +
# stime, keyed by pid and start time) with its name; then the clock.
snap() {
  {
    grep '^cpu[0-9]' /proc/stat
    for f in /proc/[0-9]*/stat; do
      { read -r line <"$f"; } 2>/dev/null && printf 'P %s\n' "$line"
    done
    printf 'T %s\n' "$(date +%s.%N)"
  } >"$1"
}

# busy BEFORE AFTER: one line: the machine's busy share, each core's, and
# the cores used by postgres, webtune, report_load and everything else.
busy() {
  awk -v hz="$(getconf CLK_TCK)" '
    function proc(line, f, n, rest, name) {
      # "P pid (comm) state ...": comm may hold spaces; fields after it.
      name = line; sub(/^P [0-9]+ \(/, "", name); sub(/\) [A-Za-z] .*$/, "", name)
      rest = line; sub(/^.*\) /, "", rest); n = split(rest, f, " ")
      # rest: state(1) ... utime(12) stime(13) ... starttime(20)
      split(line, h, " ")
      key = h[2] "/" f[20]; ticks[FILENAME == A ? 0 : 1, key] = f[12] + f[13]; names[key] = name
    }
    /^cpu[0-9]/ {
      total = 0; for (i = 2; i <= NF; i++) total += $i
      idle = $5 + $6
      if (FILENAME == A) { t0[$1] = total; i0[$1] = idle; order[++ncpu] = $1 } else { t1[$1] = total; i1[$1] = idle }
      next
    }
    /^P / { proc($0); next }
    /^T / { if (FILENAME == A) s0 = $2; else s1 = $2 }
    END {
      secs = s1 - s0; all = 0; per = ""
      for (c = 1; c <= ncpu; c++) {
        k = order[c]; dt = t1[k] - t0[k]; b = dt > 0 ? 100 * (1 - (i1[k] - i0[k]) / dt) : 0
        all += b; per = per sprintf(" %d", b + 0.5)
      }
      for (key in names) {
        if (!((1, key) in ticks)) continue
        d = ticks[1, key] - (((0, key) in ticks) ? ticks[0, key] : 0)
        g = names[key]; if (g != "postgres" && g != "webtune" && g != "report_load") g = "other"
        used[g] += d / hz / secs
      }
      printf "%.1f %.1f %.1f %.1f %.0f |%s\n", used["postgres"], used["webtune"], used["report_load"], used["other"], all / ncpu, per
    }' A="$1" "$1" "$2"
}

# --- One run ---------------------------------------------------------------------
table="$dir/table"
printf '| %-10s | %-7s | %-7s | %-7s | %-9s | %-7s | %-7s | %-6s | %-8s | %-8s | %-7s | %-11s | %-5s | %-5s |\n' \
  engine servers clients history reports/s p50_ms p99_ms lag_ms per_pass postgres webtune report_load other busy% >"$table"
# run ENGINE SERVERS CLIENTS HISTORY_LABEL DB_URL: one load, its row.
run() {
  local engine="$1" count="$2" c="$3" hist="$4" db="$5"
  servers "$db" "$count"
  rm -f "$dir/load.err" # the last run's "sending" would start the clock during this one's preparation
  "$load" "$urls" "$n" "$c" >"$dir/load.json" 2>"$dir/load.err" &
  local lp=$!
  until grep -q sending "$dir/load.err" 2>/dev/null || ! kill -0 "$lp" 2>/dev/null; do sleep 0.05; done
  snap "$dir/snap0"
  wait "$lp" || { echo "report_load failed: $(tail -3 "$dir/load.err")" >&2; exit 1; }
  snap "$dir/snap1"
  local use; use="$(busy "$dir/snap0" "$dir/snap1")"
  local lag per_pass
  read -r lag per_pass <<<"$(elections)"
  stop_servers
  local j; j="$(cat "$dir/load.json")"
  field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$j"; }
  local rate p50 p99 refused
  rate="$(printf '%.0f' "$(field reports_per_s)")"
  p50="$(printf '%.0f' "$(field p50_ms)")"
  p99="$(printf '%.0f' "$(field p99_ms)")"
  refused="$(sed -n 's/.*"refused":\({[^}]*}\).*/\1/p' <<<"$j")"
  read -r pg web lg other all _ <<<"${use%%|*}"
  printf '== %s, %s server(s), %s clients, %s: %s reports/s, p50 %s ms, p99 %s ms%s; elections lagged %s ms at most, %s reports a pass\n' \
    "$engine" "$count" "$c" "$hist" "$rate" "$p50" "$p99" "$([ "$refused" = "{}" ] || echo ", refused $refused")" "$lag" "$per_pass"
  printf '   cores used: postgres %s, webtune %s, report_load %s, other %s; machine %s%% busy; per core (%%):%s\n' \
    "$pg" "$web" "$lg" "$other" "$all" "${use#*|}"
  printf '| %-10s | %-7s | %-7s | %-7s | %-9s | %-7s | %-7s | %-6s | %-8s | %-8s | %-7s | %-11s | %-5s | %-5s |\n' \
    "$engine" "$count" "$c" "$hist" "$rate" "$p50" "$p99" "$lag" "$per_pass" "$pg" "$web" "$lg" "$other" "$all" >>"$table"
}

# --- 1. SQLite, and PostgreSQL on an empty database ------------------------------
for c in $clients; do
  run sqlite 1 "$c" empty "$(fresh_db sqlite)"
done
for count in 1 3; do
  for c in $clients; do
    run postgres "$count" "$c" empty "$(fresh_db postgres)"
  done
done

# --- 2. History: HISTORY ballots already stored -------------------------------------
# fill DB_URL: HISTORY ballots (5 per session: one per kernel ranked, each
# counting at its session's three keys, as migration 0009 stores them) and
# as many measurements (a report of 5 per session) on the keys, kernels
# and space a warm-up's reports used, then the tallies recounted from the
# ballots at each level, ANALYZE (autovacuum's steady state) and a
# checkpoint. One slice of sessions per core, each one INSERT ... SELECT
# from generate_series a table (PostgreSQL makes the rows itself: no text
# crosses a socket, as COPY's would). Ids grow with the session number, so
# each slice appends to the keys kept while loading (those foreign keys
# point at) instead of seeking at random; the others are built after the
# rows, each by one sort. Foreign keys are not checked row by row (the
# rows are consistent by making).
fill() {
  local db="$1" sessions=$((history / 5)) slices="$cores"
  local space kernels keys fp nkeys
  space="$("$psql" -qAt "$db" -c "SELECT space_checksum FROM ballots LIMIT 1")"
  kernels="$("$psql" -qAt "$db" -c "SELECT string_agg(format('(%s, %L)', i, k), ', ') FROM (SELECT kernel_sha256 AS k, row_number() OVER (ORDER BY kernel_sha256) - 1 AS i FROM (SELECT DISTINCT kernel_sha256 FROM ballots) d) x WHERE i < 5")"
  keys="$("$psql" -qAt "$db" -c "SELECT string_agg(format('(%s, %L, %L, %L)', i, device_key, arch_key, vendor_key), ', ') FROM (SELECT *, row_number() OVER (ORDER BY device_key) - 1 AS i FROM (SELECT DISTINCT device_key, arch_key, vendor_key FROM sessions) d) x")"
  fp="$("$psql" -qAt "$db" -c "SELECT fingerprint_sha256 FROM devices LIMIT 1")"
  nkeys="$("$psql" -qAt "$db" -c "SELECT COUNT(DISTINCT device_key) FROM sessions")"
  local t0=$SECONDS fills=()
  # Indexes no foreign key needs are built after the rows, each by one
  # sort (in parallel), instead of taking the rows one by one.
  "$psql" -q -v ON_ERROR_STOP=1 "$db" <<'SQL'
CREATE TABLE fill_indexes AS
  SELECT i.indexname AS name, i.indexdef AS def, c.conname AS constraint_name, pg_get_constraintdef(c.oid) AS constraint_def,
         i.tablename AS table_name
  FROM pg_indexes i LEFT JOIN pg_constraint c ON c.conname = i.indexname
  WHERE i.schemaname = 'public' AND i.tablename IN ('ballots', 'measurements', 'reports', 'sessions')
    AND (c.conname IS NULL OR i.tablename = 'ballots');
DO $$ DECLARE r record; BEGIN
  FOR r IN SELECT * FROM fill_indexes LOOP
    IF r.constraint_name IS NULL THEN EXECUTE format('DROP INDEX %I', r.name);
    ELSE EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', r.table_name, r.constraint_name); END IF;
  END LOOP;
END $$;
SQL
  for s in $(seq 0 $((slices - 1))); do
    local lo=$((s * sessions / slices + 1)) hi=$(((s + 1) * sessions / slices))
    "$psql" -q -v ON_ERROR_STOP=1 "$db" >"$dir/fill-$s.log" 2>&1 <<SQL &
SET session_replication_role = replica;
SET synchronous_commit = off;
SET work_mem = '256MB';
CREATE TEMP TABLE g AS SELECT x, 'h' || lpad(x::text, 10, '0') AS sid, k.* FROM generate_series($lo, $hi) x
  JOIN (VALUES $keys) AS k(ki, dk, ak, vk) ON k.ki = x % $nkeys;
INSERT INTO sessions (id, fingerprint_sha256, device_key, arch_key, vendor_key, rho, created_at)
  SELECT sid, '$fp', dk, ak, vk, '', x FROM g ORDER BY sid;
INSERT INTO reports (id, session_id, op, shape, target, space_checksum, device_key, arch_key, vendor_key, rho, created_at)
  SELECT sid || '-0', sid, 'matmul', '64,64,64', 'wgsl', '$space', dk, ak, vk, '', 1000 + x FROM g ORDER BY sid;
INSERT INTO measurements (report_id, rank, kernel_sha256, ticket, median_us, runs, output_ok, weight)
  SELECT sid || '-0', kn.i + 1, kn.k, sid || '-0-' || kn.i, 100 + kn.i, 10, 1, 5 - kn.i
  FROM g CROSS JOIN (VALUES $kernels) AS kn(i, k) ORDER BY sid, kn.i;
INSERT INTO ballots (op, shape, target, space_checksum, session_id, kernel_sha256, device_key, arch_key, vendor_key, report_id,
                     created_at, weight, median_us)
  SELECT 'matmul', '64,64,64', 'wgsl', '$space', sid, kn.k, dk, ak, vk, sid || '-0', 1000 + x, 5 - kn.i, 100 + kn.i
  FROM g CROSS JOIN (VALUES $kernels) AS kn(i, k);
SQL
    fills+=($!)
  done
  local failed=0
  for j in "${fills[@]}"; do wait "$j" || failed=1; done
  [ "$failed" = 0 ] || { cat "$dir"/fill-*.log >&2; exit 1; }
  local t1=$SECONDS
  fills=()
  local name def cname cdef tbl
  while IFS='|' read -r name def cname cdef tbl; do
    if [ -n "$cname" ]; then
      def="ALTER TABLE $tbl ADD CONSTRAINT $cname $cdef"
    fi
    "$psql" -q -v ON_ERROR_STOP=1 "$db" -c "SET maintenance_work_mem = '1GB'" -c "$def" >"$dir/index-$name.log" 2>&1 &
    fills+=($!)
  done < <("$psql" -qAt "$db" -c "SELECT name, def, coalesce(constraint_name, ''), coalesce(constraint_def, ''), table_name FROM fill_indexes")
  for j in "${fills[@]}"; do wait "$j" || failed=1; done
  [ "$failed" = 0 ] || { cat "$dir"/index-*.log >&2; exit 1; }
  "$psql" -q "$db" -c "DROP TABLE fill_indexes"
  local t2=$SECONDS
  "$psql" -q -v ON_ERROR_STOP=1 "$db" <<SQL
DELETE FROM tallies;
INSERT INTO tallies (op, shape, target, space_checksum, level, level_key, kernel_sha256, votes, sessions)
  SELECT op, shape, target, space_checksum, level, level_key, kernel_sha256, SUM(weight), COUNT(*) FROM ballot_levels
  GROUP BY op, shape, target, space_checksum, level, level_key, kernel_sha256;
ANALYZE;
CHECKPOINT;
SQL
  printf '   filled in %s s (rows %s s, indexes %s s, tallies, ANALYZE and checkpoint %s s): ' $((SECONDS - t0)) $((t1 - t0)) \
    $((t2 - t1)) $((SECONDS - t2))
  "$psql" -qAt "$db" -c "SELECT format('%s ballots, %s measurements, %s reports, database %s', (SELECT COUNT(*) FROM ballots), (SELECT COUNT(*) FROM measurements), (SELECT COUNT(*) FROM reports), pg_size_pretty(pg_database_size(current_database())))"
}

if [ "$history" -gt 0 ]; then
  db="$(fresh_db postgres)"
  servers "$db" 1
  "$load" "$urls" 256 64 >/dev/null 2>&1 # kernels, keys and space to fill on
  stop_servers
  echo "== filling $history ballots"
  fill "$db"
  if [ "$history" -ge 1000000 ]; then label="$((history / 1000000))M"; else label="$((history / 1000))k"; fi
  for count in 1 3; do
    for c in $clients; do
      run postgres "$count" "$c" "$label" "$db"
    done
  done
fi

# --- 3. Lookups during the load, against bare axum idle ------------------------------
if command -v "$wrk" >/dev/null && [ -x "$bare" ] && [ "${LOOKUPS:-1}" != 0 ]; then
  query="device_key=gpu-nvidia/hopper/h0/-&op=matmul&shape=64,64,64&target=wgsl"
  wrk_args=(-t4 -c64 -d3s --latency)
  servers "$(fresh_db postgres)" 3
  first="${urls%%,*}"
  "$load" "$urls" 256 64 >/dev/null 2>&1 # a winner to look up
  size=1400
  command -v curl >/dev/null && size="$(curl -fsS "$first/v1/kernels/best?$query" | wc -c)"
  "$load" "$urls" "$n" 64 >"$dir/during.json" 2>"$dir/during.err" &
  lp=$!
  until grep -q sending "$dir/during.err" 2>/dev/null; do sleep 0.05; done
  echo "== lookups on one of 3 servers while 64 clients report to them (wrk ${wrk_args[*]})"
  "$wrk" "${wrk_args[@]}" "$first/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx' || true
  wait "$lp"
  printf '   the reports meanwhile: '
  cat "$dir/during.json"
  stop_servers
  port=$((port + 1))
  "$bare" "127.0.0.1:$port" "$size" >"$dir/bare.log" 2>&1 &
  pids+=($!)
  sleep 0.5
  echo "== lookups: bare axum, idle (wrk ${wrk_args[*]})"
  "$wrk" "${wrk_args[@]}" "http://127.0.0.1:$port/v1/kernels/best?$query" | grep -E 'Requests/sec|99%|Non-2xx' || true
  stop_servers
fi

echo
echo "== reports/s by setup (cores used during the load: postgres, webtune, report_load, other; busy%: the machine's)"
cat "$table"
