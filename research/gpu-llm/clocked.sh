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
awk -F', *' '{ n++; sm[n] = $2; u[n] = $3 } END {
  if (!n) { print "clocked: no samples" > "/dev/stderr"; exit }
  asort(sm); asort(u); printf "clocked: sm_median %s MHz, min %s, max %s, samples %d, util_median %s%%\n", sm[int((n + 1) / 2)], sm[1], sm[n], n, u[int((n + 1) / 2)] > "/dev/stderr"
}' "$csv"
exit $rc
