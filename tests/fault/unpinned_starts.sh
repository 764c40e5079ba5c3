#!/usr/bin/env bash
# Starts as a new user makes them: no plan.pipelines, no plan.profile, no
# plan.device_tflops, so every start measures its profile on its own ranks and
# the planner chooses the layout from it (issue 37: 1 start in 4 of this deck
# hung in step 1, the ranks having planned from their own measurements).
#   STARTS4 starts of 4 ranks as 4 nodes (f = 1) and STARTS6 of 6 ranks as 3
#   nodes of 2 (f = 1), 3 steps each, under a 60 s limit.
# Pass criteria, printed as PASS:
#  1. Every start ends with status 0 within its limit (none hangs, none stops on a disagreement) and trains
#     every step, on the planner's choice with a start-up profile.
#  2. Each start measured its own profile: the predicted throughputs of the planner's choice (printed to five
#     digits, from the measured times) are not all one value across the starts, so the starts exercise the
#     agreement on a measured profile and not one fixed or cached plan. The layouts chosen are listed.
set -uo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 starts4=${5:-25} starts6=${6:-25}
rm -rf "$work"
mkdir -p "$work"

hung=0 failed=0 total=0
start() {  # NAME RANKS RANKS_PER_NODE
  local name=$1 ranks=$2 perNode=$3 rc=0
  timeout -k 20 60 "$mpirun" -n "$ranks" --oversubscribe --with-ft ulfm "$kiln" run input/tiny-cpu.ini \
    --set run.out_dir="$work/runs" --set run.name="$name" --set data.dir="$data" --set data.mix=licenses:1 \
    --set data.tokenizer=bytes --set data.seq_len=32 --set data.global_batch=12 --set train.micro_batch=2 \
    --set model.blocks=4 --set model.d_model=32 --set model.heads=4 --set run.steps=3 --set checkpoint.every=0 \
    --set checkpoint.resume=false --set cluster.ranks_per_node="$perNode" --set fault.f=1 \
    --set plan.pipelines= --set plan.stage_width=0 --set plan.device_tflops=0 >"$work/$name.log" 2>&1 || rc=$?
  total=$((total + 1))
  if [ "$rc" = 124 ]; then
    hung=$((hung + 1)); echo "HUNG: $name (log $work/$name.log)"; tail -5 "$work/$name.log"
  elif [ "$rc" != 0 ] || ! grep -q "kiln run: steps 0 to 3" "$work/$name.log" \
       || ! grep -q "the planner's choice" "$work/$name.log" || ! grep -q "profile measured at start-up" "$work/$name.log" \
       || ! python3 "$(dirname "$0")/victims.py" "$kiln" "$work/runs/$name/diag.h5" "$work/$name.log" "$ranks" >/dev/null; then
    failed=$((failed + 1)); echo "FAILED: $name (status $rc)"; tail -8 "$work/$name.log"
  fi
  grep -m1 "^  layout " "$work/$name.log" | sed 's/^ *//' >>"$work/layouts"
  grep -m1 -o "predicted step [0-9.]* [a-z]*; [0-9.]* samples/s" "$work/$name.log" | awk '{print $(NF-1)}' >>"$work/throughputs"
  rm -rf "$work/runs/$name"
}
for i in $(seq 1 "$starts4"); do start four-$i 4 1; done
for i in $(seq 1 "$starts6"); do start six-$i 6 2; done
echo "starts $total: hung $hung, failed $failed"
[ "$hung" = 0 ] && [ "$failed" = 0 ] || { echo "FAIL: $hung of $total starts hung, $failed failed"; exit 1; }
echo "PASS 1: $total starts ($starts4 of 4 ranks, $starts6 of 6) with measured profiles and the planner's layout all trained to the end"
distinct=$(sort -u "$work/throughputs" | wc -l) measured=$(wc -l <"$work/throughputs")
[ "$measured" = "$total" ] || { echo "FAIL: $measured of $total starts printed the planner's predicted throughput"; exit 1; }
[ "$total" -lt 2 ] || [ "$distinct" -gt 1 ] || { echo "FAIL: all $total starts predicted the same throughput ($(head -1 "$work/throughputs") samples/s): the profile was not measured per start"; exit 1; }
echo "PASS 2: $distinct distinct predicted throughputs over $total starts; layouts chosen: $(sort "$work/layouts" | uniq -c | sed 's/^ *//' | paste -sd ';' -)"
