#!/usr/bin/env bash
# kiln simulate (issue 41): its speed at scale, its predictions at Llama 3's scale and failure rate, and its
# predictions of real runs. One JSON object per line, then a plot (build/perf-simulate/scale/simulation.png).
#   scale     2,048 nodes x 8 GPUs, 54 days, Llama 3's failure rate (419 interruptions of 16,384 GPUs in 54
#             days), one seed: seconds on one core (the planner's decisions at 2,048 nodes, hundreds of times).
#   llama3    the same cluster and rate with a 70 B model (llama-2-70b, kiln's largest preset; 405 B does not
#             have one), spares 0, 8 and 32, 3 seeds; and at 10x the rate. Baselines in the same run:
#             checkpoint-restart at Young's interval (and its closed form), f counted per run.
#   reality   perf/bench_redundancy.sh's "failures" and "spares" cases (8 emulated nodes, f = 1, a node lost
#             every 20 of 120 steps) run for real, then simulated from their own diag.h5 (--trace-from,
#             --costs-from): predicted against measured wall time (first layout to the end of the last step)
#             and the layouts chosen after each failure.
#
#   ./bootstrap.sh build && perf/bench_simulate.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-simulate
llama=(input/llama-3-8b-h100.ini --nodes 2048 --days 54)

t0=$(date +%s.%N)
"$kiln" simulate "${llama[@]}" --set data.global_batch=4096 --no-baselines --json --plot "$work/scale" >"$work/scale.json" 2>/dev/null
t1=$(date +%s.%N)
python3 - "$work/scale.json" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["choices"][0]["seeds"][0]
print(json.dumps({"bench": "simulate-scale", "model": "llama-3-8b", "nodes": d["nodes"], "days": d["days"],
                  "wall_s": round(float(sys.argv[3]) - float(sys.argv[2]), 2), "failures": s["failures"],
                  "layouts": len(s["layouts"]), "requeues": s["requeues"], "effective": round(s["effective"], 4)}))
PY

big=(--set model.preset=llama-2-70b --set train.recompute=auto --set data.global_batch=2048 --spares 0,8,32 --seeds 3)
for rate in 1 10; do
  mtbf=$(python3 -c "print(16384 * 54 * 24 / 419 / 8 / $rate)")
  "$kiln" simulate "${llama[@]}" "${big[@]}" --node-mtbf-hours "$mtbf" --json --plot "$work/llama3-x$rate" \
    >"$work/llama3-x$rate.json" 2>/dev/null
  python3 - "$work/llama3-x$rate.json" "$rate" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["choices"]:
    mean = lambda k: sum(s[k] for s in r["seeds"]) / len(r["seeds"])
    lost = {k: round(sum(s["lost_seconds"][k] for s in r["seeds"]) / len(r["seeds"]) / 3600, 2)
            for k in r["seeds"][0]["lost_seconds"]}
    row = {"bench": "simulate-llama3", "rate": f"{sys.argv[2]}x Llama 3", "choice": r["label"],
           "start_layout": r["start_layout"], "effective": round(r["effective"], 4),
           "effective_sd": round(r["effective_sd"], 4), "failures": mean("failures"), "requeues": mean("requeues"),
           "in_place": mean("survived_in_place"), "hours_lost": lost}
    if "closed_form" in r: row["closed_form"] = round(r["closed_form"], 4)
    print(json.dumps(row))
print(json.dumps({"bench": "simulate-llama3-recommended", "rate": f"{sys.argv[2]}x Llama 3",
                  "recommended": d["recommended"], "margin_points": round(100 * d["margin"], 3)}))
PY
done

# Issue 51: runs A (Llama 3's rate), C (ten times it) and B (16,384 nodes, a failure every 14 minutes at
# 131,072 GPUs), one choice and one seed each, the regroup that keeps whole pipelines (the default) against
# the baseline that plans anew whenever that is faster (fault.replan_margin = 0), in the same run: effective
# time, hours lost by cause, bytes moved per failed node's holdings, and the seconds each simulation took.
issue51() {  # NAME MTBF NODES DAYS MARGIN
  local t0 t1
  t0=$(date +%s.%N)
  "$kiln" simulate input/llama-3-8b-h100.ini --set model.preset=llama-2-70b --set train.recompute=auto \
    --set data.global_batch=2048 --nodes "$3" --days "$4" --node-mtbf-hours "$2" --seeds 1 --f 1 --spares 0 \
    --no-baselines --set fault.replan_margin="$5" --json >"$work/run-$1-$5.json" 2>/dev/null
  t1=$(date +%s.%N)
  python3 - "$work/run-$1-$5.json" "$1" "$5" "$t0" "$t1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); c = d["choices"][0]; s = c["seeds"][0]
held = s["failed_holding_bytes"] or 1
print(json.dumps({"bench": "simulate-issue51", "run": sys.argv[2], "replan_margin": float(sys.argv[3]),
                  "wall_s": round(float(sys.argv[5]) - float(sys.argv[4]), 1), "effective": round(c["effective"], 4),
                  "failures": s["failures"], "replans": s["replans"],
                  "bytes_per_failed_holdings": round(s["bytes_migrated"] / held, 3),
                  "failure_bytes_per_failed_holdings": round(s["failure_bytes_migrated"] / held, 3),
                  "hours_lost": {k: round(v / 3600, 2) for k, v in s["lost_seconds"].items() if v}}))
PY
}
for margin in 0.02 0; do
  issue51 A 6335.4 2048 54 "$margin"
  issue51 C 633.5 2048 54 "$margin"
done
issue51 B 3823 16384 28 0.02

# Reality: bench_redundancy's failures and spares cases, run, then simulated.
common=(--set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1
        --set checkpoint.every=0 --set cluster.ranks_per_node=1 --set plan.pipelines= --set fault.f=1)
inject=1:20:commit,2:40:allreduce,3:60:commit,4:80:commit,5:100:allreduce
for case in failures spares; do
  extra=()
  [ "$case" = spares ] && extra=(--set cluster.spare_nodes=2)
  mpirun -n 8 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${common[@]}" "${extra[@]}" \
    --set checkpoint.resume=false --set run.out_dir="$work/runs" --set run.name="$case" --set run.steps=120 \
    --set train.log_every=1000000 --set fault.inject="$inject" >"$work/$case.log" 2>&1
  diag=$work/runs/$case/diag.h5
  "$kiln" diag "$diag" --json >"$work/$case-diag.json"
  "$kiln" simulate input/tiny-cpu.ini "${common[@]}" "${extra[@]}" --nodes 8 --trace-from "$diag" --costs-from "$diag" \
    --steps 120 --no-baselines --json >"$work/$case-sim.json" 2>/dev/null
  python3 - "$work/$case-diag.json" "$work/$case-sim.json" "$case" <<'PY'
import json, sys
real, sim = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
start = real["instantiations"][0]["time"]
measured = [e for e in real["events"] if e["kind"] == "end"][0]["time"] - start
s = sim["choices"][0]["seeds"][0]
print(json.dumps({"bench": "simulate-reality", "case": sys.argv[3], "measured_wall_s": round(measured, 3),
                  "predicted_wall_s": round(s["seconds"], 3), "error": round(s["seconds"] / measured - 1, 4),
                  "failures_real": len(real["failures"]), "failures_sim": s["failures"],
                  "layouts_real": [l["layout"] for l in real["instantiations"]],
                  "layouts_sim": [l["layout"] for l in s["layouts"]],
                  "same_layouts": [l["layout"] for l in real["instantiations"]] == [l["layout"] for l in s["layouts"]]}))
PY
done
