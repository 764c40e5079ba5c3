#!/usr/bin/env bash
# What an admission costs the running job (issue 51, item 2): the new nodes'
# processes start while the job trains, and the job waits only for their join
# at a step boundary. The workload is the admission test's runs
# (tests/fault/admission.sh: the tiny deck on emulated nodes, a node or two
# asked for). For every admission this prints one JSON line: the join the job
# waited for, the run's median step, and, as the baseline measured in the same
# run, the start-up the new processes took meanwhile, which is what the job
# waited for before (the spawn at the boundary). Goal: a join of at most 1.5
# median steps.
#
#   ./bootstrap.sh build && perf/bench_admission.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-admission
bash tests/fault/admission.sh "$kiln" "$(command -v mpirun)" "$work/data" "$work/runs" >"$work/test.log" 2>&1 ||
  { tail -30 "$work/test.log"; echo "bench_admission: the admission runs failed" >&2; exit 1; }
worst=0
for log in "$work"/runs/*.log; do
  name=$(basename "$log" .log)
  line=$(grep -a "ADMIT after step [0-9]*: [0-9]* nodes\? admitted" "$log" || true)
  [ -n "$line" ] || continue
  join_ms=$(sed -nE 's/.* in ([0-9.]+) ms, after .*/\1/p' <<<"$line")
  startup_s=$(sed -nE 's/.*after ([0-9.]+) s of start-up.*/\1/p' <<<"$line")
  median_s=$("$kiln" diag "$work/runs/$name/tiny/diag.h5" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_step_s"])')
  ratio=$(awk -v j="$join_ms" -v m="$median_s" 'BEGIN{printf "%.2f", j / (1e3 * m)}')
  echo "{\"bench\":\"admission\",\"case\":\"$name\",\"join_ms\":$join_ms,\"median_step_ms\":$(awk -v m="$median_s" 'BEGIN{printf "%.1f", 1e3 * m}'),\"join_in_median_steps\":$ratio,\"baseline_startup_ms\":$(awk -v s="$startup_s" 'BEGIN{printf "%.0f", 1e3 * s}'),\"stall_saved\":$(awk -v j="$join_ms" -v s="$startup_s" 'BEGIN{printf "%.1f", 1e3 * s / j}')}"
  worst=$(awk -v a="$worst" -v b="$ratio" 'BEGIN{print (b > a) ? b : a}')
done
echo "{\"bench\":\"admission\",\"worst_join_in_median_steps\":$worst,\"goal\":1.5,\"met\":$(awk -v w="$worst" 'BEGIN{print (w <= 1.5) ? "true" : "false"}')}"
