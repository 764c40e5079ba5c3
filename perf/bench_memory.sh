#!/usr/bin/env bash
# Memory model benchmark (issue 22, item 4), on the CPU of this machine: four model sizes (6 blocks d_model
# 128, 8 x 256, 8 x 512, 8 x 768; 4 heads, seq_len 128, micro-batch 4, global batch 16) each profiled here with
# kiln profile (what each layer keeps for backward, counted), then run 4 steps on two layouts: one stage
# on 1 rank (1:4) and two stages on 2 ranks (2:4). kiln run reports, per rank with a stage, the peak since the
# model was built against the planner's stage memory (weights, gradients, moments, the activations in
# flight, one layer's temporaries, and the runtime kiln profile measured): the resident growth (what the
# model is held to), the pages libtorch's tensors took and libtorch's live bytes.
# Each case twice: with kiln's host block cache (model/cpu_allocations.hpp) and, as the baseline, without
# it (KILN_HOST_BLOCK_CACHE=off: every tensor from glibc's heap, as before it).
# One JSON line per case, then a summary per setting: the worst |resident / planned - 1| over the ranks.
#
#   ./bootstrap.sh build && perf/bench_memory.sh
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-memory
: >"$work/results.jsonl"

for size in "6 128" "8 256" "8 512" "8 768"; do
  read -r blocks width <<<"$size"
  model=(--set model.blocks="$blocks" --set model.d_model="$width" --set model.heads=4 --set data.seq_len=128
         --set train.micro_batch=4 --set data.global_batch=16 --set train.threads=1 --set data.dir="$work/data"
         --set data.mix=licenses:1 --set data.tokenizer=bytes)
  "$kiln" profile input/tiny-cpu.ini "${model[@]}" --repeat 2 --out "$work/profile-$width.h5" >/dev/null
  for layout in "1 1:4" "2 2:4"; do for cache in on off; do
    read -r ranks pipelines <<<"$layout"
    name=d$width-$ranks-cache-$cache
    KILN_HOST_BLOCK_CACHE=$cache mpirun -n "$ranks" --oversubscribe --with-ft ulfm -x KILN_HOST_BLOCK_CACHE "$kiln" run input/tiny-cpu.ini "${model[@]}" \
      --set plan.profile="$work/profile-$width.h5" --set fault.f=0 --set cluster.ranks_per_node=1 \
      --set plan.pipelines="$pipelines" --set run.steps=4 --set checkpoint.every=0 --set run.out_dir="$work/$name" \
      >"$work/$name.log" 2>&1 || { tail -20 "$work/$name.log"; exit 1; }
    python3 - "$name" "$blocks" "$width" "$pipelines" "$cache" "$work/$name.log" <<'PY' | tee -a "$work/results.jsonl"
import json, re, sys
name, blocks, width, layout, cache, log = sys.argv[1:]
m = re.search(r"resident growth ([0-9.]+) GB \(([0-9.]+)x\), libtorch's pages ([0-9.]+) GB, its live bytes ([0-9.]+) GB "
              r"\(([0-9.]+)x\), planned ([0-9.]+) GB; furthest off start-up rank (\d+): ([0-9.]+) GB resident, "
              r"([0-9.]+) GB planned \(([0-9.]+)x\)", open(log).read())
if not m: sys.exit(f"{name}: no memory report in {log}")
print(json.dumps({"bench": "memory", "case": name, "blocks": int(blocks), "d_model": int(width), "layout": layout,
                  "host_block_cache": cache,
                  "resident_gb": float(m[1]), "pages_gb": float(m[3]), "counted_gb": float(m[4]),
                  "planned_gb": float(m[6]), "resident_vs_planned": float(m[2]), "counted_vs_planned": float(m[5]),
                  "worst_rank_resident_vs_planned": float(m[10])}))
PY
  done; done
done
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for cache in ("on", "off"):
    mine = [r for r in rows if r["host_block_cache"] == cache]
    errors = {r["case"]: r["worst_rank_resident_vs_planned"] for r in mine}
    worst = max(abs(e - 1) for e in errors.values())
    print(json.dumps({"bench": "memory-model", "host_block_cache": cache, "cases": len(mine),
                      "worst_resident_error": round(worst, 3),
                      "cases_within_10_percent": sum(abs(e - 1) <= 0.10 for e in errors.values()),
                      "resident_vs_planned": errors}))
PY
