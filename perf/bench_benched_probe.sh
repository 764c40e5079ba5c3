#!/usr/bin/env bash
# What a retired straggler's probes cost the job's steps: the tiny deck on 6 ranks as 3 nodes of 2 (pipelines 2+1),
# rank 3 (node 1) made slow (SLOW seconds after each forward and backward, default 0.05) from step 2, retired
# after 4 slow steps; then the job runs 1+1 on nodes 0 and 2 while node 1's benched ranks probe one block every
# step so that it can come back. The baseline is the same run with straggler.return_at = 0 (no probes; the node
# never comes back). Alternated, ROUNDS rounds of STEPS steps: the measured step of the layout after the
# retirement (diag.h5's instantiations). One JSON line per run, then the probing runs' step over the baseline's.
#
#   ./bootstrap.sh build && perf/bench_benched_probe.sh [ROUNDS] [STEPS] [SLOW]    (about 2 minutes with the defaults)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
rounds=${1:-3} steps=${2:-60} slow=${3:-0.05}
bench_workdir_with_licenses perf-benched-probe
run=(mpirun -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set data.dir="$work/data"
     --set data.mix=licenses:1 --set data.tokenizer=bytes --set checkpoint.every=0 --set run.steps="$steps"
     --set train.grad_clip=0 --set plan.pipelines=2+1 --set cluster.ranks_per_node=2 --set fault.f=1
     --set fault.inject=3:2:slow="$slow" --set straggler.steps=3 --set straggler.retire_at=4
     --set straggler.retire_steps=4)
one() {  # probes(true|false) round
  local probes=$1 round=$2 out=$work/$1-$2 back=2.5
  [ "$probes" = true ] || back=0
  "${run[@]}" --set run.out_dir="$out" --set straggler.return_at="$back" >"$out.log" 2>&1
  "$kiln" diag "$out/tiny/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
probes, rnd = sys.argv[1:3]
after = [i for i in d["instantiations"] if i["nodes_used"] == 2]
if not after:
    sys.exit(f"round {rnd}: node 1 was not retired")
print(json.dumps({"bench": "benched_probe", "probes": probes == "true", "round": int(rnd),
                  "retired_before_step": after[0]["step"], "step_s_after": after[-1]["measured_step_s"]}))' \
    "$probes" "$round"
}
for round in $(seq 1 "$rounds"); do
  one false "$round"
  one true "$round"
done | tee "$work/results.jsonl"
python3 - "$work/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = statistics.median(r["step_s_after"] for r in rows if not r["probes"])
probing = statistics.median(r["step_s_after"] for r in rows if r["probes"])
print(json.dumps({"bench": "benched_probe_summary", "baseline_step_s": base, "probing_step_s": probing,
                  "probing_over_baseline": round(probing / base, 3)}))
EOF
