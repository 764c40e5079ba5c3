#!/usr/bin/env bash
# What cluster.waits costs and saves: the pipeline benchmarks' model (6 blocks, d_model 128) trained STEPS steps
# on 4 ranks (2 pipelines of 2 stages) and on 8 (4 of 2), each with cluster.waits spin and sleep, alternated,
# ROUNDS rounds. On 2 cores both shapes share cores (2x and 4x); on 4 or more the first has a core per rank. Per run: the median step (diag.h5)
# and the CPU seconds of the whole launch (user + system, /usr/bin/time). One JSON line per run, then per rank
# count sleep's median step and CPU over spin's (the baseline, measured in the same rounds).
#
#   ./bootstrap.sh build && perf/bench_waits.sh [ROUNDS] [STEPS]    (about 3 minutes on 2 cores with the defaults)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
rounds=${1:-3} steps=${2:-30}
bench_workdir_with_licenses perf-waits
bench_profiled_model
cores=$(nproc)
one() {  # ranks pipelines mode round
  local ranks=$1 pipelines=$2 mode=$3 round=$4 out=$work/$1-$3-$4
  /usr/bin/time -f "%U %S" -o "$out.cpu" mpirun -n "$ranks" --oversubscribe "$kiln" run input/tiny-cpu.ini \
    "${model[@]}" "${machine[@]}" --set run.out_dir="$out" --set run.steps="$steps" --set checkpoint.every=0 \
    --set cluster.ranks_per_node=2 --set plan.pipelines="$pipelines" --set fault.f=0 --set cluster.waits="$mode" \
    >"$out.log" 2>&1
  "$kiln" diag "$out/tiny/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
ranks, mode, rnd, cores, cpu_file = sys.argv[1:6]
user, system = map(float, open(cpu_file).read().split()[-2:])
step_s = d["median_step_s"]
print(json.dumps({"bench": "waits", "ranks": int(ranks), "cores": int(cores), "mode": mode, "round": int(rnd),
                  "step_s": step_s, "cpu_s": round(user + system, 2), "system_s": system}))' \
    "$ranks" "$mode" "$round" "$cores" "$out.cpu"
}
for round in $(seq 1 "$rounds"); do
  for shape in "4 1+1" "8 1+1+1+1"; do  # a node of 2 ranks per pipeline: 2 stages
    for mode in spin sleep; do one ${shape% *} "${shape#* }" "$mode" "$round"; done
  done
done | tee "$work/results.jsonl"
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for ranks in sorted({r["ranks"] for r in rows}):
    med = lambda mode, key: statistics.median(r[key] for r in rows if r["ranks"] == ranks and r["mode"] == mode)
    print(json.dumps({"bench": "waits_summary", "ranks": ranks, "cores": rows[0]["cores"],
                      "spin_step_s": med("spin", "step_s"), "sleep_step_s": med("sleep", "step_s"),
                      "sleep_step_over_spin": round(med("sleep", "step_s") / med("spin", "step_s"), 3),
                      "spin_cpu_s": med("spin", "cpu_s"), "sleep_cpu_s": med("sleep", "cpu_s"),
                      "sleep_cpu_over_spin": round(med("sleep", "cpu_s") / med("spin", "cpu_s"), 3)}))
PY
