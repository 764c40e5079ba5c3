#!/usr/bin/env bash
# Activation recomputation (issue 38, item 6), on the CPU of this machine: a gpt2 and a llama of 8 blocks,
# d_model 256, 4 heads, seq_len 256 (attention's scores are a large part of what a block keeps at this length,
# as at long context on a GPU), micro-batch 4, global batch 16, one thread per rank, on two stages of 2 ranks
# (2:4), profiled here in each mode, 8 steps; train.recompute = none (the baseline), selective and full.
# Per case one JSON line: the median step time and the peak resident growth of the rank furthest off the
# planner's stage memory, against the plan; then per family the cost of each mode against none
# (step time ratio) and what it saves (planned stage memory ratio).
#
#   ./bootstrap.sh build && perf/bench_recompute.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-recompute
: >"$work/results.jsonl"

for family in gpt2 llama; do
  for mode in none selective full; do
    name=$family-$mode
    model=(--set model.family=$family --set model.blocks=8 --set model.d_model=256 --set model.heads=4
           --set data.seq_len=256 --set train.micro_batch=4 --set data.global_batch=16 --set train.threads=1
           --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set train.recompute=$mode)
    [ $family = llama ] && model+=(--set model.kv_heads=2)
    "$kiln" profile input/tiny-cpu.ini "${model[@]}" --repeat 2 --out "$work/profile-$name.h5" >/dev/null
    mpirun -n 2 --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini "${model[@]}" \
      --set plan.profile="$work/profile-$name.h5" --set fault.f=0 --set cluster.ranks_per_node=1 --set plan.pipelines=2:4 \
      --set run.steps=8 --set checkpoint.every=0 --set run.out_dir="$work/$name" >"$work/$name.log" 2>&1 ||
      { tail -20 "$work/$name.log"; exit 1; }
    "$kiln" diag "$work/$name/tiny/diag.h5" --json >"$work/$name.json"
    python3 - "$family" "$mode" "$work/$name.log" "$work/$name.json" <<'PY' | tee -a "$work/results.jsonl"
import json, re, sys
family, mode, log, diag = sys.argv[1:]
m = re.search(r"resident growth ([0-9.]+) GB \(([0-9.]+)x\).*planned ([0-9.]+) GB; furthest off start-up rank (\d+): "
              r"([0-9.]+) GB resident, ([0-9.]+) GB planned \(([0-9.]+)x\)", open(log).read())
if not m: sys.exit(f"{family}-{mode}: no memory report in {log}")
d = json.load(open(diag))
print(json.dumps({"bench": "recompute", "family": family, "mode": mode, "median_step_s": d["median_step_s"],
                  "resident_gb": float(m.group(1)), "planned_gb": float(m.group(3)),
                  "furthest_off_ratio": float(m.group(7)), "last_loss": d["last_loss"]}))
PY
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for family in ("gpt2", "llama"):
    base = next(r for r in rows if r["family"] == family and r["mode"] == "none")
    for r in rows:
        if r["family"] == family and r["mode"] != "none":
            print(f"RECOMPUTE family={family} mode={r['mode']} step_time_vs_none={r['median_step_s'] / base['median_step_s']:.2f}x "
                  f"planned_memory_vs_none={r['planned_gb'] / base['planned_gb']:.2f}x "
                  f"resident_vs_plan={r['furthest_off_ratio']:.2f}x same_loss={abs(r['last_loss'] - base['last_loss']) <= 1e-5 * base['last_loss']}")
PY
