#!/usr/bin/env bash
# Recovery benchmarks (issue 10), on the CPU of this machine.
#
# 1. Phases. 6 ranks as 3 nodes of 2, pipelines 2+1 (4 and 2 stages), f = 1,
#    a 6-block d_model 128 model; rank 2 (third stage of the longer pipeline)
#    is killed in step 5. From diag.h5's /failures: the seconds of each phase
#    and the bytes migrated, against the model state (weights and both AdamW
#    moments, 12 bytes per parameter).
# 2. In-place recovery against checkpoint-restart, the same job and the same
#    failure schedule, side by side: 4 nodes of 1 rank, 30 steps, a node lost
#    at steps 12 and 22.
#      (a) kiln: f = 2, one mpirun; the survivors regroup and go on.
#      (b) checkpoint-restart as a requeued job would do it: f = 0, a
#          checkpoint every 5 steps; the failure ends the job; it starts again
#          on the nodes left (process start, MPI start-up, restore) and redoes
#          the steps since the last checkpoint.
#    effective fraction = useful time / wall time, useful time = 30 x the
#    median step time of a failure-free run on the 4 nodes. Wall time counts
#    every mpirun from launch to exit.
#
# Prints one JSON object per measurement.
#
#   ./bootstrap.sh build && perf/bench_recovery.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-recovery
data=(--set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.threads=1
      --set checkpoint.resume=false --set run.out_dir="$work/runs")
now() { date +%s.%N; }

# Part 1: the phases of one recovery.
model=(--set model.blocks=6 --set model.d_model=128 --set model.heads=4)
mpirun -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${data[@]}" "${model[@]}" --set run.name=phases \
  --set run.steps=10 --set checkpoint.every=0 --set fault.inject=2:5:allreduce >"$work/phases.log" 2>&1
bench_victims "$work/runs/phases/diag.h5" "$work/phases.log" 6
"$kiln" diag "$work/runs/phases/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d["failures"][0]
V, C, blocks = 257, 128, 6
params = V * C + 64 * C + blocks * (12 * C * C + 13 * C) + 2 * C + V * C
state = 12 * params
phases = {k: f[k] for k in ("detect_s", "revoke_s", "shrink_s", "regroup_s", "instantiate_s", "migrate_s", "rebuild_s", "replay_s")}
print(json.dumps({"bench": "recovery-phases", "ranks": 6, "layout_before": d["instantiations"][0]["layout"],
                  "layout_after": f["layout"], **phases, "recovery_s": sum(v for k, v in phases.items() if k != "replay_s"),
                  "bytes_migrated": f["bytes_migrated"], "model_state_bytes": state,
                  "migrated_share": f["bytes_migrated"] / state, "step_s": d["median_step_s"]}))
'

# Part 2: in-place recovery against checkpoint-restart.
job=(--set run.steps=30 --set cluster.ranks_per_node=1 --set plan.pipelines=)
wall() {  # name ranks ft settings...: runs, prints the wall seconds; a non-zero exit is expected for (b)
  local name=$1 ranks=$2 ft=$3
  shift 3
  local t0 t1
  t0=$(now)
  # shellcheck disable=SC2086
  mpirun -n "$ranks" --oversubscribe $ft "$kiln" run input/tiny-cpu.ini "${data[@]}" "${job[@]}" \
    --set run.name="$name" "$@" >>"$work/$name.log" 2>&1 || true
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
clean=$(wall clean 4 "" --set fault.f=0 --set checkpoint.every=0)
inplace=$(wall inplace 4 "--with-ft ulfm" --set fault.f=2 --set checkpoint.every=0 --set fault.inject=3:12:allreduce,2:22:allreduce)
grep -q "kiln run: steps 0 to 30" "$work/inplace.log" || { cat "$work/inplace.log"; exit 1; }
bench_victims "$work/runs/inplace/diag.h5" "$work/inplace.log" 4
# (b): each attempt is a new job on the nodes left; a killed rank ends it, as
# without ULFM (so kiln's own beyond-f checkpoint does not help it either).
restart=(--set fault.f=0 --set checkpoint.every=5 --set checkpoint.resume=true)
b1=$(wall restart 4 "" "${restart[@]}" --set fault.inject=3:12:allreduce)
b2=$(wall restart 3 "" "${restart[@]}" --set fault.inject=2:22:allreduce)
b3=$(wall restart 2 "" "${restart[@]}")
grep -q "kiln run: steps 20 to 30" "$work/restart.log" || { cat "$work/restart.log"; exit 1; }
python3 - "$work" "$clean" "$inplace" "$b1" "$b2" "$b3" <<'EOF'
import json, subprocess, sys
work, clean, inplace, b1, b2, b3 = sys.argv[1], *map(float, sys.argv[2:])
def diag(name):
    return json.loads(subprocess.run([f"{work}/../kiln", "diag", f"{work}/runs/{name}/diag.h5", "--json"],
                                     capture_output=True, text=True, check=True).stdout)
step = diag("clean")["median_step_s"]
useful = 30 * step
restart = b1 + b2 + b3
print(json.dumps({"bench": "recovery-vs-restart", "steps": 30, "failures": 2, "median_step_s": step,
                  "useful_s": useful, "clean_wall_s": clean,
                  "inplace_wall_s": inplace, "inplace_fraction": useful / inplace,
                  "restart_wall_s": restart, "restart_attempts_s": [b1, b2, b3], "restart_fraction": useful / restart,
                  "inplace_over_restart": (useful / inplace) / (useful / restart),
                  "inplace_failures": diag("inplace")["failures"]}))
EOF
