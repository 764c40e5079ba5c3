#!/usr/bin/env bash
# Tensor-parallel stages on the CPU of this machine (issue 20): one node of 4
# ranks runs the benchmark model (8 layers, d_model 128, seq 128, micro-batch
# 4, 8 microbatches) as one pipeline of stages 1, 2 and 4 ranks wide
# (plan.stage_width), and the planner's predicted step (from a profile
# measured here at one thread) is set beside the measured median step:
#     ratio = measured_step_s / predicted_step_s
# A 1-rank run of the whole model gives the cost of splitting: efficiency =
# 1-rank step / (ranks x step), 1 when 4 ranks are 4 times as fast. This
# machine has 2 cores for 4 ranks, so compute that would run side by side
# shares cores here; the figures show the sums' cost and the model's error,
# not a node's speed-up.
#
#   ./bootstrap.sh build && perf/bench_widths_cpu.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-widths

steps=${KILN_BENCH_STEPS:-8}
bench_profiled_model

: >"$work/results.jsonl"
# measure NAME RANKS WIDTH: one JSON line.
measure() {
  local name=$1 ranks=$2 width=$3
  mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${model[@]}" "${machine[@]}" \
    --set fault.f=0 --set cluster.ranks_per_node="$ranks" --set plan.stage_width="$width" --set plan.pipelines=1:8 \
    --set run.steps="$steps" --set checkpoint.every=0 --set checkpoint.resume=false --set run.out_dir="$work/runs" \
    --set run.name="$name" >"$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  "$kiln" diag "$work/runs/$name/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
layout = d["instantiations"][0]
print(json.dumps({"bench": "widths-cpu", "case": sys.argv[1], "ranks": int(sys.argv[2]), "stage_width": int(sys.argv[3]),
                  "layout": layout["layout"], "predicted_step_s": layout["predicted_step_s"],
                  "measured_step_s": d["median_step_s"], "ratio": d["median_step_s"] / layout["predicted_step_s"],
                  "bubble": d["share_pipeline_wait"]}))
' "$name" "$ranks" "$width" | tee -a "$work/results.jsonl"
}
measure whole 1 1
measure w1 4 1
measure w2 4 2
measure w4 4 4
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = {json.loads(l)["case"]: json.loads(l) for l in open(sys.argv[1])}
one = rows["whole"]["measured_step_s"]
print(json.dumps({"bench": "widths-cpu-summary",
                  "efficiency": {k: one / (r["ranks"] * r["measured_step_s"]) for k, r in rows.items() if k != "whole"},
                  "worst_ratio_error": max(abs(r["ratio"] - 1) for r in rows.values())}))
PY
