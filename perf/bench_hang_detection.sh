#!/usr/bin/env bash
# The cost of hang detection (fault.hang_timeout_s, on by default): the same
# run with it off (baseline) and on, alternated, in one invocation. On means
# Open MPI's heartbeat detector, MPI_THREAD_MULTIPLE and kiln's progress thread
# (an MPI_Iprobe every T/40). Prints one JSON line per run and the ratio of
# the medians of tokens/s (on / off).
#
#   ./bootstrap.sh build && perf/bench_hang_detection.sh [RANKS] [STEPS] [REPEATS]
set -euo pipefail
ranks=${1:-6} steps=${2:-400} repeats=${3:-3}
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-hang
declare -A rates
for rep in $(seq 1 "$repeats"); do
  for timeout in 0 60; do
    mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$build/kiln" run input/tiny-cpu.ini \
      --set run.out_dir="$work/run" --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes \
      --set checkpoint.every=0 --set checkpoint.resume=false --set run.steps="$steps" \
      --set fault.hang_timeout_s="$timeout" >"$work/run-$timeout-$rep.log" 2>&1 \
      || { tail -20 "$work/run-$timeout-$rep.log"; echo "bench_hang_detection: the run failed (the tiny deck wants 6 ranks)" >&2; exit 1; }
    rate=$(sed -nE 's/^kiln run: .*\(([0-9.]+)k tokens\/s\).*/\1/p' "$work/run-$timeout-$rep.log")
    echo "{\"bench\":\"hang_detection\",\"ranks\":$ranks,\"steps\":$steps,\"hang_timeout_s\":$timeout,\"repeat\":$rep,\"ktokens_per_s\":$rate}"
    rates[$timeout]+="$rate "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
off=$(echo "${rates[0]}" | median) on=$(echo "${rates[60]}" | median)
echo "{\"bench\":\"hang_detection\",\"median_ktokens_per_s_off\":$off,\"median_ktokens_per_s_on\":$on,\"ratio_on_off\":$(awk -v a="$on" -v b="$off" 'BEGIN{printf "%.3f", a/b}')}"
