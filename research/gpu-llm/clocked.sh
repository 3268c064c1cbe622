#!/usr/bin/env bash
# Runs a command with the GPU's SM clock sampled by nvidia-smi every ${CLOCK_MS:-50} ms, and
# prints the clock while it ran (median, min, max MHz, samples, median utilisation %) on stderr
# as one line `clocked: ...`. The samples go to CSV (timestamp, SM MHz, util %, W).
# Usage: research/gpu-llm/clocked.sh CSV CMD [ARGS...]; exits with CMD's status.
set -uo pipefail
csv=${1:?usage: clocked.sh CSV CMD [ARGS...]}; shift
nvidia-smi --query-gpu=timestamp,clocks.sm,utilization.gpu,power.draw --format=csv,noheader,nounits \
  -lms "${CLOCK_MS:-50}" > "$csv" 2>/dev/null &
smi=$!
"$@"
rc=$?
sleep 0.2; kill $smi 2>/dev/null; wait $smi 2>/dev/null
# mawk has no asort: the medians from sorted columns.
n=$(wc -l < "$csv")
if [ "$n" -gt 0 ]; then
  col() { cut -d, -f"$1" "$csv" | tr -d ' ' | sort -n; }
  mid=$(( (n + 1) / 2 ))
  echo "clocked: sm_median $(col 2 | sed -n "${mid}p") MHz, min $(col 2 | head -1), max $(col 2 | tail -1), samples $n, util_median $(col 3 | sed -n "${mid}p")%" >&2
else
  echo "clocked: no samples" >&2
fi
exit $rc
