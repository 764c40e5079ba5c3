#!/usr/bin/env bash
# Redundancy after every failure (issue 18), on the CPU of this machine.
#
# 8 emulated nodes of 1 rank, f = 1, STEPS steps (default 120), a node lost every 20 steps
# (5 failures, after a commit or in the gradient all-reduce), side by side in one run:
#   clean      8 nodes, no failure: the baseline
#   failures   8 nodes, the failures, no spares
#   spares     8 nodes of which 2 are spares (cluster.spare_nodes = 2), the same failures
#   idle6      6 nodes + 2 spares, no failure, against
#   plain6     the same 6 nodes without spares: what a waiting spare costs
# For each: wall seconds (mpirun to exit), steps committed, requeues (exits 75; 0 while the nodes can form
# f+1 pipelines), failures recovered, recovery milliseconds (sum of /failures phases, replay excluded),
# bytes migrated, the tolerance after the last failure, and
#   effective fraction = clean wall seconds / wall seconds
# (the same steps, the same global batches). On this 2-core machine 8 ranks are oversubscribed, so a run
# that lost nodes runs its remaining steps on fewer, less crowded ranks: fractions above 1 say that, not
# that failures are free. What does not depend on the machine: no requeue, no lost step, the tolerance.
# One JSON object per case, then a plot of tokens/s over the steps with the failures marked
# (build/perf-redundancy/redundancy.png).
#
#   ./bootstrap.sh build && perf/bench_redundancy.sh [STEPS]
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
steps=${1:-120}
bench_workdir_with_licenses perf-redundancy
common=(--set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1
        --set checkpoint.resume=false --set checkpoint.every=0 --set run.out_dir="$work/runs" --set run.steps="$steps"
        --set cluster.ranks_per_node=1 --set plan.pipelines= --set fault.f=1 --set train.log_every=1000000)
kills=()
for ((k = 1; 20 * k < steps && k <= 5; ++k)); do
  phase=(commit allreduce commit)   # phases every rank passes, idle ones too
  kills+=("$k:$((20 * k)):${phase[$((k % 3))]}")   # ranks 1-5: pipeline nodes, not the spares (the last nodes)
done
inject=$(IFS=,; echo "${kills[*]}")
now() { date +%s.%N; }
case_run() {  # name ranks settings...: prints wall seconds and exit status
  local name=$1 ranks=$2 t0 t1 status=0
  shift 2
  t0=$(now)
  mpirun -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${common[@]}" --set run.name="$name" "$@" \
    >"$work/$name.log" 2>&1 || status=$?
  t1=$(now)
  awk -v a="$t0" -v b="$t1" -v s="$status" 'BEGIN { printf "%.3f %d", b - a, s }'
}
read -r clean_s clean_rc <<<"$(case_run clean 8)"
read -r fail_s fail_rc <<<"$(case_run failures 8 --set fault.inject="$inject")"
read -r spare_s spare_rc <<<"$(case_run spares 8 --set cluster.spare_nodes=2 --set fault.inject="$inject")"
read -r idle_s idle_rc <<<"$(case_run idle6 8 --set cluster.spare_nodes=2)"
read -r plain_s plain_rc <<<"$(case_run plain6 6)"
for c in clean:8 failures:8 spares:8 idle6:8 plain6:6; do bench_victims "$work/runs/${c%:*}/diag.h5" "$work/${c%:*}.log" "${c#*:}"; done
python3 - "$work" "$kiln" "$steps" "$inject" clean:"$clean_s":"$clean_rc" failures:"$fail_s":"$fail_rc" \
  spares:"$spare_s":"$spare_rc" idle6:"$idle_s":"$idle_rc" plain6:"$plain_s":"$plain_rc" <<'PY'
import json, subprocess, sys
work, kiln, steps, inject, *cases = sys.argv[1:]
walls, medians = {}, {}
for c in cases:
    name, wall, rc = c.split(":")
    d = json.loads(subprocess.run([kiln, "diag", f"{work}/runs/{name}/diag.h5", "--json"], capture_output=True, text=True,
                                  check=True).stdout)
    walls[name] = float(wall)
    medians[name] = d.get("median_step_s")
    phases = ("revoke_s", "shrink_s", "regroup_s", "instantiate_s", "migrate_s", "rebuild_s")
    rec = [1e3 * sum(f[p] for p in phases) for f in d["failures"]]
    out = {"bench": "redundancy", "case": name, "steps_asked": int(steps), "steps": d["steps"], "wall_s": float(wall),
           "exit": int(rc), "requeues": 1 if int(rc) == 75 else 0, "failures": len(d["failures"]),
           "recovery_ms": [round(r, 2) for r in rec], "replay_s": [round(f["replay_s"], 4) for f in d["failures"]],
           "bytes_migrated": [f["bytes_migrated"] for f in d["failures"]],
           "layouts": [l["layout"] for l in d["instantiations"]],
           "tolerance": [l["tolerance"] for l in d["instantiations"]], "spares": [l["spares"] for l in d["instantiations"]],
           "median_step_s": d.get("median_step_s"), "tokens_per_s": d.get("tokens_per_s")}
    if name in ("failures", "spares"):
        out["effective_fraction"] = walls["clean"] / float(wall)
        out["injected"] = inject
    print(json.dumps(out))
# The spare's cost: median step time with 2 waiting spares over the same 6 nodes without them.
print(json.dumps({"bench": "redundancy-spare-cost", "idle6_median_step_s": medians["idle6"],
                  "plain6_median_step_s": medians["plain6"], "ratio": medians["idle6"] / medians["plain6"]}))
PY
for name in clean failures spares; do "$kiln" diag "$work/runs/$name/diag.h5" --plot "$work/plot-$name" >/dev/null; done
marks=""
i=1
for k in "${kills[@]}"; do
  s=$(echo "$k" | cut -d: -f2)
  marks+="set arrow $i from $((s + 1)),graph 0 to $((s + 1)),graph 1 nohead dt 2 lc rgb 'red'"$'\n'
  i=$((i + 1))
done
gnuplot <<GP
set terminal pngcairo size 1000,500
set output '$work/redundancy.png'
set title 'tokens/s per step, 8 emulated nodes, f = 1, a node lost every 20 steps (dashed)'
set xlabel 'step'
set ylabel 'tokens/s'
set logscale y
set grid
$marks
plot '$work/plot-clean/steps.dat' using 1:5 with lines lw 2 title 'no failure', \
     '$work/plot-failures/steps.dat' using 1:5 with lines lw 2 title 'failures, no spares', \
     '$work/plot-spares/steps.dat' using 1:5 with lines lw 2 title 'failures, 2 spares'
GP
echo "plot: $work/redundancy.png"
