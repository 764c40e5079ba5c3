#!/usr/bin/env bash
# What TensorBoard's event files cost a step (issue 67): the tiny deck on 6 ranks as 3 nodes of 2 (pipelines
# 2+1), run.tensorboard on and off alternated, ROUNDS rounds of STEPS steps: the median seconds per committed
# step (diag.h5), the event files' bytes per step, and the time `kiln diag --tensorboard` takes to write the
# same files from diag.h5. One JSON line per round, then a summary: the writer's cost per step (on over off).
#
#   ./bootstrap.sh build && perf/bench_tensorboard.sh [ROUNDS] [STEPS]     (about 2 minutes with 3 rounds of 200)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
rounds=${1:-3} steps=${2:-200}
bench_workdir_with_licenses perf-tensorboard
run=(mpirun -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set data.dir="$work/data"
     --set data.mix=licenses:1 --set data.tokenizer=bytes --set checkpoint.every=0 --set run.steps="$steps"
     --set plan.pipelines=2+1 --set cluster.ranks_per_node=2 --set fault.f=1 --set train.peak_tflops=0.05)
one() {  # on round
  local on=$1 round=$2 out=$work/$1-$2
  "${run[@]}" --set run.out_dir="$out" --set run.tensorboard="$on" >"$out.log" 2>&1
  local start end bytes=0
  [ "$on" = false ] || bytes=$(cat "$out"/tiny/tensorboard/* | wc -c)
  start=$(date +%s.%N)
  "$kiln" diag "$out/tiny/diag.h5" --tensorboard "$out/from-diag" >/dev/null
  end=$(date +%s.%N)
  "$kiln" diag "$out/tiny/diag.h5" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
on, rnd, bytes_, steps, start, end = sys.argv[1:7]
print(json.dumps({"bench": "tensorboard", "on": on == "true", "round": int(rnd), "step_s": d["median_step_s"],
                  "event_bytes_per_step": int(bytes_) / int(steps), "from_diag_s": round(float(end) - float(start), 3)}))' \
    "$on" "$round" "$bytes" "$steps" "$start" "$end"
}
for round in $(seq "$rounds"); do
  for on in true false; do one "$on" "$round" | tee -a "$work/results.jsonl"; done
done
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
on = [r["step_s"] for r in rows if r["on"]]
off = [r["step_s"] for r in rows if not r["on"]]
print(json.dumps({"bench": "tensorboard-summary", "step_s_off": round(statistics.median(off), 5),
                  "step_s_on": round(statistics.median(on), 5),
                  "writer_cost": round(statistics.median(on) / statistics.median(off) - 1, 4),
                  "rounds_off": [round(x, 5) for x in off], "rounds_on": [round(x, 5) for x in on],
                  "event_bytes_per_step": statistics.median(r["event_bytes_per_step"] for r in rows if r["on"]),
                  "from_diag_s": statistics.median(r["from_diag_s"] for r in rows)}))
PY
