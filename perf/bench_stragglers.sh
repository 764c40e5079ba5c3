#!/usr/bin/env bash
# Straggler benchmark (issue 22): one node twice as slow (fault.inject RANK:STEP:slow=2x: every forward and
# backward of its rank sleeps as long again as it computed) from step 3 on, on the pipeline benchmarks'
# model with a layer profile measured here (perf/bench_env.sh), 3 nodes of 1 rank running 3 pipelines
# (f = 1) plus one spare node, a global batch of 16 microbatches. Four runs of STEPS steps in one go:
#   clean       no straggler: the failure-free step time
#   no_action   the straggler, straggler.rebalance_at = 0 and retire_at = 0: what kiln did before
#   rebalance   the straggler, rebalanced (rebalance_at 1.5 over 3 steps), no retirement
#   retire      the straggler, retired (retire_at 1.5 over 4 steps; the spare takes its place), no rebalance
#   return      as retire, but slow only in steps 3 to 12: once its probes are back within return_at (1.3),
#               the node returns as the spare (the step it came back at, and the tolerance and spares after)
# Per run one JSON line: the median step of the layout it ended with (kiln diag), against the clean one,
# the layouts in order, and for rebalance the step the plan predicted for the last rebalanced split (the
# REBALANCE line: the measured slowdowns on the plan's per-stage times, scaled by the median rank's
# measured/planned ratio) against the measured one.
#
#   ./bootstrap.sh build && perf/bench_stragglers.sh [STEPS]
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
steps=${1:-30}
bench_workdir_with_licenses perf-stragglers
bench_profiled_model
: >"$work/results.jsonl"

measure() {  # name settings...
  local name=$1
  shift
  mpirun -n 4 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${model[@]}" "${machine[@]}" \
    --set data.global_batch=64 --set cluster.ranks_per_node=1 --set cluster.spare_nodes=1 --set plan.pipelines= \
    --set plan.stage_width=1 --set fault.f=1 --set run.steps="$steps" --set checkpoint.every=0 \
    --set run.out_dir="$work/$name" "$@" >"$work/$name.log" 2>&1 || { tail -30 "$work/$name.log"; exit 1; }
  bench_victims "$work/$name/tiny/diag.h5" "$work/$name.log" 4
  "$kiln" diag "$work/$name/tiny/diag.h5" --json >"$work/$name.json"
  python3 - "$name" "$work" <<'PY' | tee -a "$work/results.jsonl"
import json, re, sys
name, work = sys.argv[1], sys.argv[2]
d = json.load(open(f"{work}/{name}.json"))
layouts = d["instantiations"]
row = {"bench": "stragglers", "run": name, "layouts": [l["layout"] for l in layouts],
       "median_step_s": layouts[-1]["measured_step_s"]}
events = [e["kind"] for e in d["events"]]
row["rebalances"] = events.count("rebalance")
row["retired"] = events.count("straggler")
row["returned_before_step"] = [e["step"] for e in d["events"] if e["kind"] == "return"]
row["spares_at_end"] = layouts[-1]["spares"]
log = open(f"{work}/{name}.log").read()
found = re.findall(r"REBALANCE .*predicted step ([0-9.e+-]+) s", log)
if found:  # the last split's prediction, against the layout it made
    row["predicted_step_s"] = float(found[-1])
    row["measured_vs_predicted"] = round(row["median_step_s"] / row["predicted_step_s"], 3)
print(json.dumps(row))
PY
}

slow=(--set fault.inject=2:3:slow=2x)
measure clean --set straggler.rebalance_at=0 --set straggler.retire_at=0
measure no_action "${slow[@]}" --set straggler.rebalance_at=0 --set straggler.retire_at=0
measure rebalance "${slow[@]}" --set straggler.rebalance_at=1.5 --set straggler.steps=3 --set straggler.retire_at=0
measure retire "${slow[@]}" --set straggler.rebalance_at=0 --set straggler.retire_at=1.5 --set straggler.retire_steps=4
measure return --set fault.inject=2:3-12:slow=2x --set straggler.rebalance_at=0 --set straggler.retire_at=1.5 \
  --set straggler.retire_steps=4 --set straggler.return_at=1.3
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = {r["run"]: r for r in map(json.loads, open(sys.argv[1]))}
clean = rows["clean"]["median_step_s"]
for name in ("no_action", "rebalance", "retire", "return"):
    r = rows[name]
    print(json.dumps({"bench": "stragglers_summary", "run": name, "median_step_s": r["median_step_s"],
                      "vs_clean": round(r["median_step_s"] / clean, 3), "layouts": r["layouts"]}))
PY
