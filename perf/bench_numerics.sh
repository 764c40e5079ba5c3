#!/usr/bin/env bash
# What the numbers' check and the replicas' comparison cost (issue 66, item 8). Two decks on the licence texts:
#   pipelines  6 ranks as 3 nodes of 2, pipelines 2+1 (the fault tests' layout), the tiny model
#   wide       1 rank, 6 blocks of 256, seq 128, global batch 32, micro-batch 8, 2 threads
# Per deck, numerics.check on and off alternated (ROUNDS rounds, STEPS steps each): the median seconds per
# committed step (diag.h5), and with the check on and numerics.compare_every = 10 the replicas' comparison's
# milliseconds (its 'replicas' events). Prints one JSON line per round and a summary per deck: the check's cost
# per step (on over off), and the comparison's cost as a share of a step at the default compare_every (100).
#
#   ./bootstrap.sh build && perf/bench_numerics.sh [ROUNDS] [STEPS]     (about 3 minutes with 3 rounds of 60 steps)
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
rounds=${1:-3} steps=${2:-60}
bench_workdir_with_licenses perf-numerics
data=(--set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set checkpoint.every=0
      --set run.steps="$steps" --set numerics.compare_every=10)
pipelines=(mpirun -n 6 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${data[@]}" --set plan.pipelines=2+1
           --set cluster.ranks_per_node=2 --set fault.f=1)
wide=("$kiln" run input/tiny-cpu.ini "${data[@]}" --set fault.f=0 --set cluster.ranks_per_node=0 --set plan.pipelines=
      --set model.blocks=6 --set model.d_model=256 --set model.heads=8 --set data.seq_len=128 --set train.micro_batch=8
      --set data.global_batch=32 --set train.threads=2)
one() {  # deck check round
  local deck=$1 check=$2 round=$3 out=$work/$1-$2-$3
  local -n command=$deck
  "${command[@]}" --set run.out_dir="$out" --set numerics.check="$check" >"$out.log" 2>&1
  "$kiln" diag "$out/tiny/diag.h5" --json | python3 -c '
import json, statistics, sys
d = json.load(sys.stdin)
deck, check, rnd = sys.argv[1:4]
compares = [float(e["detail"].rsplit("(", 1)[1].split(" ms")[0]) for e in d["events"] if e["kind"] == "replicas"]
print(json.dumps({"bench": "numerics", "deck": deck, "check": check == "true", "round": int(rnd),
                  "step_s": d["median_step_s"], "compare_ms": statistics.median(compares) if compares else None,
                  "compares": len(compares)}))' "$deck" "$check" "$round"
}
for round in $(seq "$rounds"); do
  for deck in pipelines wide; do
    for check in true false; do one "$deck" "$check" "$round" | tee -a "$work/results.jsonl"; done
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for deck in ("pipelines", "wide"):
    on = [r["step_s"] for r in rows if r["deck"] == deck and r["check"]]
    off = [r["step_s"] for r in rows if r["deck"] == deck and not r["check"]]
    compare = statistics.median(r["compare_ms"] for r in rows if r["deck"] == deck and r["check"] and r["compare_ms"])
    step = statistics.median(off)
    print(json.dumps({"bench": "numerics-summary", "deck": deck, "step_s_check_off": round(step, 5),
                      "step_s_check_on": round(statistics.median(on), 5),
                      "check_cost": round(statistics.median(on) / step - 1, 4),
                      "rounds_off": [round(x, 5) for x in off], "rounds_on": [round(x, 5) for x in on],
                      "compare_ms": round(compare, 2),
                      "compare_share_every_100_steps": round(compare / 1e3 / (100 * step), 5)}))
PY
