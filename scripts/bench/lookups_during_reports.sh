#!/usr/bin/env bash
# Best-kernel lookups while reports flow, for several builds side by side
# (issue 20): for each round and each BIN, a fresh SQLite server, 64
# clients posting 4,000 reports (report_load), and `wrk -t1 -c16 -d2s` on
# GET /v1/kernels/best once the reports are being sent. Prints lookups/s
# and their p99, the reports' rate and p99 over the whole load, and the
# server's CPU seconds during the wrk window.
#
#   scripts/bench/lookups_during_reports.sh ROUNDS BIN [BIN...]
#
# Needs wrk (apt) and target/release/report_load
# (cargo build --release -p webtune-research --bin report_load).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:?usage: lookups_during_reports.sh ROUNDS BIN [BIN...]}"
shift
command -v wrk >/dev/null || { echo "installing wrk" >&2; apt-get install -y -qq wrk >&2; }
load=target/release/report_load
[ -x "$load" ] || cargo build --release -q -p webtune-research --bin report_load
dir="$(mktemp -d /tmp/webtune-lookups.XXXXXX)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$dir"' EXIT
q="device_key=gpu-nvidia/hopper/h0/-&op=matmul&shape=64,64,64&target=wgsl"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for r in $(seq 1 "$rounds"); do
  for bin in "$@"; do
    rm -f "$dir"/db.sqlite*
    "$bin" serve --addr 127.0.0.1:18999 --database-url "sqlite://$dir/db.sqlite" --rate-per-address 1000000000 \
      --rate-per-session 1000000000 --max-connections-per-address 1000 >"$dir/serve.log" 2>&1 &
    sp=$!
    for _ in $(seq 1 100); do curl -fsS http://127.0.0.1:18999/healthz >/dev/null 2>&1 && break; sleep 0.1; done
    "$load" http://127.0.0.1:18999 4000 64 >"$dir/load.json" 2>"$dir/load.err" &
    lp=$!
    until grep -q sending "$dir/load.err" 2>/dev/null; do sleep 0.05; done
    t0=$(ticks "$sp")
    wrk -t1 -c16 -d2s --latency "http://127.0.0.1:18999/v1/kernels/best?$q" >"$dir/wrk.txt"
    t1=$(ticks "$sp")
    wait "$lp"
    kill "$sp"; wait "$sp" 2>/dev/null || true
    python3 - "$r" "$bin" "$dir/wrk.txt" "$dir/load.json" "$((t1 - t0))" <<'PY'
import json, re, sys
r, b, w, l, t = sys.argv[1:]
txt = open(w).read()
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", txt).group(1))
p99 = re.search(r"99%\s+(\S+)", txt).group(1)
load = json.load(open(l))
print(f"round {r} {b}: lookups {rps:,.0f}/s p99 {p99}; reports {load['reports_per_s']:.0f}/s p99 {load['p99_ms']:.0f} ms; server CPU {int(t) / 100:.2f} s of the 2 s window")
PY
  done
done
