#!/usr/bin/env bash
# Pipeline benchmarks (issue 9), on the CPU of this machine.
#
# 1. The planner against what runs. A layer profile of the benchmark model is
#    measured here (kiln profile, 1 thread, the run's micro-batch); then every
#    template of a 2-rank job runs alone as the only pipeline, pinned with
#    plan.pipelines, and its measured step time (median over the steps after
#    the first) is compared with the planner's prediction from that profile:
#        ratio = measured_step_s / predicted_step_s      (goal: within 10 %)
#    bubble = share of rank 0's step spent waiting for its neighbouring stages
#    (pipeline_wait in diag.h5; for 1F1B of S equal stages and m microbatches
#    the ideal is (S - 1) / (m + S - 1) of the step).
# 2. Heterogeneous against all-equal templates on the same ranks: the
#    planner's instantiation for 5 nodes of 1 rank with f = 1, when memory
#    rules out 1-node pipelines (3+2), against the best layout of equal
#    templates (2+2, one node idle); both measured in this run, with the
#    planner's predicted ratio beside the measured one. 5 ranks share 2 cores
#    here, so the measured ratio shows contention as much as layouts.
#
# Prints one JSON object per measurement, then a summary line per part.
#
#   ./bootstrap.sh build && perf/bench_pipeline.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-pipeline

steps=${KILN_BENCH_STEPS:-8}
bench_profiled_model

# measure NAME RANKS RANKS_PER_NODE F PIPELINES [settings...]: one JSON line.
measure() {
  local name=$1 ranks=$2 perNode=$3 f=$4 pipelines=$5
  shift 5
  mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${model[@]}" "${machine[@]}" \
    --set fault.f="$f" --set cluster.ranks_per_node="$perNode" --set plan.pipelines="$pipelines" \
    --set run.steps="$steps" --set checkpoint.every=0 --set checkpoint.resume=false --set run.out_dir="$work/runs" \
    --set run.name="$name" "$@" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  "$kiln" diag "$work/runs/$name/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
layout = d["instantiations"][0]
steps = d["steps"]
print(json.dumps({"bench": "pipeline", "case": sys.argv[1], "ranks": int(sys.argv[2]), "ranks_per_node": int(sys.argv[3]),
                  "layout": layout["layout"], "predicted_step_s": layout["predicted_step_s"],
                  "measured_step_s": d["median_step_s"], "ratio": d["median_step_s"] / layout["predicted_step_s"],
                  "bubble": d["share_pipeline_wait"], "samples_per_s": 32 / d["median_step_s"], "steps": steps}))
' "$name" "$ranks" "$perNode" | tee -a "$work/results.jsonl"
}

# Part 1: every template of a 2-rank job (2 nodes of 1 rank; 1 node of 2 ranks), alone.
measure t1_stage1 1 1 0 1:8
measure t2_nodes1 2 1 0 2:8
measure t1_ranks2 2 2 0 1:8
measure replicas2 2 1 0 1:4+1:4
python3 - "$work/results.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
worst = max(abs(r["ratio"] - 1) for r in rows)
print(json.dumps({"bench": "pipeline-planner", "cases": len(rows), "worst_ratio_error": worst,
                  "within_10_percent": worst <= 0.10}))
EOF

# Part 2: memory that a whole model on one rank exceeds (templates start at 2 nodes).
: >"$work/results2.jsonl"
tight=(--set plan.memory_gb=0.05)
work2() { measure "$1" 5 1 1 "$2" "${tight[@]}" | tee -a "$work/results2.jsonl"; }
work2 planned ""  # the planner's choice
work2 equal 2+2
python3 - "$work/results2.jsonl" <<'EOF'
import json, sys
rows = {json.loads(l)["case"]: json.loads(l) for l in open(sys.argv[1])}
p, e = rows["planned"], rows["equal"]
print(json.dumps({"bench": "pipeline-heterogeneous", "planned": p["layout"], "equal": e["layout"],
                  "measured_speedup": e["measured_step_s"] / p["measured_step_s"],
                  "predicted_speedup": e["predicted_step_s"] / p["predicted_step_s"]}))
EOF
