#!/usr/bin/env bash
# Start-up by phase against the rank count (issue 23, item 4): the tiny deck on 6, 12, 24 and 48 ranks
# (nodes of 2 ranks, f = 1, the planner's layout), one step each, heartbeats off (48 processes on this
# machine's cores would miss theirs). kiln run reports each start-up phase's seconds on the slowest rank
# after the first step (diag.h5 event 'startup'); one JSON line per rank count, then the growth of each
# phase from the smallest to the largest count. On a 2-core machine every count beyond 2 is
# oversubscribed: the trend is what counts, not the seconds.
#
#   ./bootstrap.sh build && perf/bench_startup.sh [RANKS...]
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
bench_workdir_with_licenses perf-startup
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(6 12 24 48)
: >"$work/results.jsonl"
for n in "${counts[@]}"; do
  timeout 600 mpirun -n "$n" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini --set plan.pipelines= \
    --set data.dir="$work/data" --set data.mix=licenses:1 --set data.tokenizer=bytes --set run.steps=1 \
    --set checkpoint.every=0 --set fault.hang_timeout_s=0 --set run.out_dir="$work/r$n" >"$work/r$n.log" 2>&1 ||
    { tail -20 "$work/r$n.log"; exit 1; }
  "$kiln" diag "$work/r$n/tiny/diag.h5" --json | python3 -c '
import json, re, sys
events = [e for e in json.load(sys.stdin)["events"] if e["kind"] == "startup"]
if not events: sys.exit("no startup event")
detail = events[0]["detail"]
phases = {k: float(v) for k, v in re.findall(r"([a-z_]+) ([0-9.]+)(?=,|;)", detail.split(": ", 1)[1])}
print(json.dumps({"bench": "startup", "ranks": int(sys.argv[1]), "phases_s": phases,
                  "total_s": round(sum(phases.values()), 3)}))' "$n" | tee -a "$work/results.jsonl"
done
python3 - "$work/results.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
growth = {k: round(last["phases_s"].get(k, 0) / v, 2) for k, v in first["phases_s"].items() if v > 0}
print(json.dumps({"bench": "startup-growth", "from_ranks": first["ranks"], "to_ranks": last["ranks"],
                  "rank_ratio": last["ranks"] / first["ranks"], "phase_growth": growth,
                  "total_growth": round(last["total_s"] / first["total_s"], 2)}))
PY
