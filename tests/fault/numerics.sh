#!/usr/bin/env bash
# Silent corruption and numeric faults (issue 66): a step's numbers are checked before they are applied, a flagged
# step runs again, and the two runs say what happened. 6 ranks as 3 nodes of 2, f = 1, clipping off. Pass
# criteria, each printed as PASS:
#  1. No false alarm: the failure-free run (pinned 2+1) and one whose layout kiln chooses (experts, stages two
#     ranks wide) print no NUMERICS line.
#  2. A NaN in one rank's loss (rank 5, pipeline 1's last stage, step 5; once): the rerun is sound and parts from
#     the first run at rank 5, so node 2 (ranks 4 and 5) is retired as a failed node is, its /failures row says
#     cause 'corruption', no other rank died, and every step's loss and norm equal the failure-free run's.
#  3. A flipped exponent bit in the first activation rank 1 (pipeline 0's second stage) sends in step 5: the runs
#     part at rank 1, node 0 (ranks 0 and 1, rank 0 with the diagnostics) is retired, the failure-free losses.
#  4. A poisoned batch (a NaN in rank 5's loss at every attempt of step 5): the rerun repeats it, so it is the batch:
#     skipped (numerics.on_repeat = skip), no rank dies, steps 1-5 have the failure-free losses, step 6 has no
#     /steps row, and the run ends with a finite loss. With numerics.on_repeat = stop: exit 3 and a checkpoint of
#     step 5 (the state before the poisoned step).
#  5. Experts on stages two ranks wide (2+1 pinned): a corrupted gradient rank 3 (pipeline 0's last stage, its
#     second slot) sends back in step 5 parts the runs at rank 3: node 1 retired, the failure-free losses.
#  6. The layout left to kiln: a corrupted first send of rank 0 in step 5 retires node 0, the failure-free losses.
#  7. Memory: a flipped exponent bit in one of rank 0's parameters as step 5 starts. The rerun repeats the NaN, so the
#     holders compare their copies: on kiln's layout (three pipelines, three holders of every layer) rank 0 is
#     outvoted, node 0 retired, the failure-free losses; on 2+1 pinned (two holders) no majority: exit 75 for a
#     requeue, nothing skipped, no rank lost.
#  8. A resumed run restores the spike history of the committed steps before its checkpoint from diag.h5.
#  9. One pipeline (fault tolerance 0): a NaN that the rerun does not repeat names rank 3, which nothing can replace:
#     the rerun's sound numbers go on, no rank ends, the failure-free losses.
# 10. A quiet flip (drift: a weight of rank 0 made nearly 0 as step 4 starts, which no step check sees) on kiln's
#     layout (three holders), checkpoints every 3 steps: the comparison before the checkpoint of step 6 outvotes
#     it, node 0 is retired, every survivor returns to the checkpoint of step 3 and trains steps 3-5 again, so the
#     final weights equal the failure-free run's (1e-5) with its losses; `kiln diag` counts the rollback and its
#     loss plot marks it. With numerics.rollback = false the steps
#     are kept and the weights differ (the outvoted copy's gradients went into every holder's sums): the
#     comparison can tell. A second failure in the rollback (rank 2, which speaks for the job by then, killed
#     before the loads): the survivors finish the rollback, recover from it in the replayed step, and end with
#     the failure-free losses; the rollback is said in the log and diag.h5 all the same.
set -euo pipefail
kiln=$1 mpirun=$2 data=$3 work=$4 checkpoint_diff=$5
rm -rf "$work"
mkdir -p "$work"
. "$(dirname "$0")/lib.sh"
pinned=(--set plan.pipelines=2+1 --set cluster.ranks_per_node=2 --set fault.f=1)
failures() {  # run: the /failures rows as "cause ranks" lines
  "$kiln" diag "$work/$1/tiny/diag.h5" --json | python3 -c '
import json, sys
for f in json.load(sys.stdin).get("failures", []):
    print(f["cause"], f["failed_ranks"])'
}

must clean 6 "${pinned[@]}"
losses clean
experts=(--set model.family=llama --set model.experts=4 --set model.experts_per_token=2 --set model.expert_hidden=64)
wide=("${experts[@]}" --set plan.pipelines=2+1 --set plan.stage_width=2 --set cluster.ranks_per_node=2 --set fault.f=1)
must wide-clean 6 "${wide[@]}"
losses wide-clean
unpinned=(--set plan.pipelines= --set cluster.ranks_per_node=2 --set fault.f=1)
must free-clean 6 "${unpinned[@]}"
losses free-clean
must free-experts 6 "${experts[@]}" "${unpinned[@]}" --set plan.stage_width=2
! grep -q NUMERICS "$work/clean.log" "$work/wide-clean.log" "$work/free-clean.log" "$work/free-experts.log" ||
  fail "a NUMERICS line in a failure-free run"
for name in clean wide-clean free-clean free-experts; do
  "$kiln" diag "$work/$name/tiny/diag.h5" | grep -q "step      10  replicas     every layer's copies agree" ||
    fail "$name: the replicas were not compared before the final checkpoint, or differ"
done
echo "PASS 1: no false alarm on pinned layouts and on kiln's own, with and without experts and wide stages"

must nan 6 "${pinned[@]}" --set fault.inject=5:5:nan
grep -q "NUMERICS step 5: loss nan (non_finite); not applied" "$work/nan.log" &&
  grep -q "NUMERICS step 5: the two runs part at rank 5 (node 2)" "$work/nan.log" ||
  { cat "$work/nan.log"; fail "the NaN loss was not found and placed"; }
grep -q "FAILURE step 5: failed ranks 4,5 (node 2 retired)" "$work/nan.log" || { cat "$work/nan.log"; fail "node 2 not retired"; }
[ "$(failures nan)" = "corruption 4,5" ] || fail "the /failures row is '$(failures nan)', expected 'corruption 4,5'"
losses nan
same_curve "$work/clean.losses" "$work/nan.losses" 10
"$kiln" diag "$work/nan/tiny/diag.h5" --plot "$work/nan-plots" >"$work/nan.diag"
grep -q "numerics: 1 step flagged and run again, 0 batches skipped, 1 node retirement for corruption; replicas compared 1 time, 0 disagreed" \
  "$work/nan.diag" || { cat "$work/nan.diag"; fail "kiln diag does not report the numbers' check"; }
[ -s "$work/nan-plots/loss.png" ] || fail "no loss plot"
echo "PASS 2: a NaN in rank 5's loss: node 2 retired for corruption, no one else lost, the failure-free losses"

must corrupt 6 "${pinned[@]}" --set fault.inject=1:5:corrupt
grep -q "NUMERICS step 5: the two runs part at rank 1 (node 0)" "$work/corrupt.log" &&
  grep -q "FAILURE step 5: failed ranks 0,1 (node 0 retired)" "$work/corrupt.log" ||
  { cat "$work/corrupt.log"; fail "the corrupted activation was not placed on rank 1's node"; }
losses corrupt
same_curve "$work/clean.losses" "$work/corrupt.losses" 10
echo "PASS 3: a flipped bit in an activation rank 1 sent: node 0 retired, the failure-free losses"

must poison 6 "${pinned[@]}" --set fault.inject=5:5:poison
grep -q "NUMERICS step 5: the rerun gives the same loss nan .*its batch is skipped" "$work/poison.log" ||
  { cat "$work/poison.log"; fail "the poisoned batch was not skipped"; }
grep -q "FAILURE" "$work/poison.log" && fail "a rank was retired for a poisoned batch"
losses poison
head -5 "$work/clean.losses" >"$work/clean-5.losses"
head -5 "$work/poison.losses" >"$work/poison-5.losses"
same_curve "$work/clean-5.losses" "$work/poison-5.losses" 5
awk '$1 == 5 { found = 1 } END { exit found }' "$work/poison.losses" || fail "the skipped step has a /steps row"
[ "$(wc -l <"$work/poison.losses")" = 9 ] || fail "expected 9 committed steps, got $(wc -l <"$work/poison.losses")"
awk 'END { exit !($2 == $2 + 0 && $2 < 100) }' "$work/poison.losses" || fail "the last loss is not finite"
set +e
run "$work/poison-stop" 6 "${pinned[@]}" --set fault.inject=5:5:poison --set numerics.on_repeat=stop >"$work/poison-stop.log" 2>&1
status=$?
set -e
[ "$status" = 3 ] || { cat "$work/poison-stop.log"; fail "on_repeat = stop exited $status, expected 3"; }
[ -e "$work/poison-stop/tiny/ckpt/step-00000005.h5" ] || fail "no checkpoint of the state before the poisoned step"
echo "PASS 4: a poisoned batch: skipped without a death (the failure-free losses before it), or a stop with exit 3 and a checkpoint of step 5"

must wide-corrupt 6 "${wide[@]}" --set fault.inject=3:5:corrupt
grep -q "NUMERICS step 5: the two runs part at rank 3 (node 1)" "$work/wide-corrupt.log" &&
  grep -q "FAILURE step 5: failed ranks 2,3 (node 1 retired)" "$work/wide-corrupt.log" ||
  { cat "$work/wide-corrupt.log"; fail "the corrupted gradient was not placed on rank 3's node"; }
losses wide-corrupt
same_curve "$work/wide-clean.losses" "$work/wide-corrupt.losses" 10
echo "PASS 5: experts on 2-wide stages: a corrupted gradient rank 3 sent retires node 1, the failure-free losses"

must free-corrupt 6 "${unpinned[@]}" --set fault.inject=0:5:corrupt
grep -q "NUMERICS step 5: the two runs part at rank 0 (node 0)" "$work/free-corrupt.log" &&
  grep -q "FAILURE step 5: failed ranks 0,1 (node 0 retired)" "$work/free-corrupt.log" ||
  { cat "$work/free-corrupt.log"; fail "on kiln's layout the corrupted send was not placed on rank 0's node"; }
losses free-corrupt
same_curve "$work/free-clean.losses" "$work/free-corrupt.losses" 10
echo "PASS 6: the layout left to kiln: a corrupted send of rank 0 retires node 0, the failure-free losses"

must free-flip 6 "${unpinned[@]}" --set fault.inject=0:5:flip
grep -q "NUMERICS before step 5: the replicas disagree: layers 0 differ between their holders; outvoted: rank 0; node 0 retired" \
  "$work/free-flip.log" && grep -q "FAILURE step 5: failed ranks 0,1 (node 0 retired)" "$work/free-flip.log" ||
  { cat "$work/free-flip.log"; fail "the flipped parameter was not found by the replicas' comparison"; }
[ "$(failures free-flip)" = "corruption 0,1" ] || fail "the /failures row is '$(failures free-flip)'"
losses free-flip
same_curve "$work/free-clean.losses" "$work/free-flip.losses" 10
set +e
run "$work/pinned-flip" 6 "${pinned[@]}" --set fault.inject=0:5:flip >"$work/pinned-flip.log" 2>&1
status=$?
set -e
[ "$status" = 75 ] || { cat "$work/pinned-flip.log"; fail "two copies that differ: exit $status, expected 75"; }
grep -q "two copies, no majority: ranks 0, 4; stopping for a requeue (exit 75)" "$work/pinned-flip.log" ||
  { cat "$work/pinned-flip.log"; fail "the stop does not say why"; }
grep -q "batch is skipped" "$work/pinned-flip.log" && fail "a flipped parameter was taken for a bad batch"
echo "PASS 7: a flipped parameter bit: outvoted by two other holders (node 0 retired, the failure-free losses), or with two holders a stop for a requeue"

# 8. A resumed run judges spikes by the history the first attempt had (diag.h5's rows before its checkpoint).
must first-half 6 "${pinned[@]}" --set checkpoint.every=4 --set run.steps=8
KILN_VERBOSE=1 must first-half 6 "${pinned[@]}" --set checkpoint.every=4 --set run.steps=10
grep -q "numerics: the spike history of 8 committed steps before step 8 restored from diag.h5" "$work/first-half.log" ||
  { cat "$work/first-half.log"; fail "the resumed run did not restore its spike history"; }
echo "PASS 8: a resumed run restores the spike history of the steps before its checkpoint"

must lone-clean 4 --set plan.pipelines=2 --set cluster.ranks_per_node=2 --set fault.f=0
losses lone-clean
must lone-nan 4 --set plan.pipelines=2 --set cluster.ranks_per_node=2 --set fault.f=0 --set fault.inject=3:5:nan
grep -q "the job cannot retire it (fault tolerance 0); the rerun's numbers (healthy) go on" "$work/lone-nan.log" ||
  { cat "$work/lone-nan.log"; fail "on one pipeline the sound rerun did not go on"; }
losses lone-nan
same_curve "$work/lone-clean.losses" "$work/lone-nan.losses" 10
echo "PASS 9: one pipeline: the node cannot be retired, the sound rerun goes on, the failure-free losses"

ckpt=(--set checkpoint.every=3 --set numerics.compare_every=0)
must drift 6 "${unpinned[@]}" "${ckpt[@]}" --set fault.inject=0:4:drift
grep -q "NUMERICS before step 6: the replicas disagree: layers 0 differ between their holders; outvoted: rank 0" "$work/drift.log" &&
  grep -q "every survivor returns to step-00000003.h5 (compared before it was written) and trains them again" "$work/drift.log" &&
  grep -q "ROLLBACK before step 6: every survivor holds step-00000003.h5 (.* s); steps 3 to 5 are trained again" \
    "$work/drift.log" || { cat "$work/drift.log"; fail "the quiet flip was not outvoted and rolled back"; }
[ "$(failures drift)" = "corruption 0,1" ] || fail "the /failures row is '$(failures drift)', expected 'corruption 0,1'"
losses drift
same_curve "$work/free-clean.losses" "$work/drift.losses" 10
"$checkpoint_diff" "$work/free-clean/tiny/ckpt/step-00000010.h5" "$work/drift/tiny/ckpt/step-00000010.h5" params 1e-5 ||
  fail "after the rollback the final weights are not the failure-free run's"
"$kiln" diag "$work/drift/tiny/diag.h5" | grep -q "1 disagreed; 1 rollback to the last checkpoint" ||
  fail "kiln diag does not report the rollback"
"$kiln" diag "$work/drift/tiny/diag.h5" --plot "$work/drift-plots" >/dev/null &&
  grep -q "rolled back to the last checkpoint' at 7," "$work/drift-plots/plots.gp" && [ -s "$work/drift-plots/loss.png" ] ||
  fail "kiln diag --plot does not mark the rollback (before step index 6, drawn at 7 as the steps are) on the loss plot"
must drift-kept 6 "${unpinned[@]}" "${ckpt[@]}" --set fault.inject=0:4:drift --set numerics.rollback=false
grep -q "NUMERICS before step 6: steps 3 to 5, which the outvoted copy may have entered, are kept (numerics.rollback = false)" \
  "$work/drift-kept.log" || { cat "$work/drift-kept.log"; fail "without the rollback the kept steps are not said"; }
! "$checkpoint_diff" "$work/free-clean/tiny/ckpt/step-00000010.h5" "$work/drift-kept/tiny/ckpt/step-00000010.h5" params 1e-5 ||
  fail "the kept steps left the failure-free weights: this check cannot tell a rollback from none"
must drift-second 6 "${unpinned[@]}" "${ckpt[@]}" --set fault.inject=0:4:drift,2:6:rollback
[ "$(failures drift-second | tr '\n' ' ')" = "corruption 0,1 process 2 " ] ||
  { cat "$work/drift-second.log"; fail "the /failures rows are '$(failures drift-second | tr '\n' ' ')', expected corruption 0,1 then process 2"; }
grep -q "every survivor returns to step-00000003.h5" "$work/drift-second.log" ||
  { cat "$work/drift-second.log"; fail "the rollback was not said when its speaker failed in it"; }
losses drift-second
same_curve "$work/free-clean.losses" "$work/drift-second.losses" 10
echo "PASS 10: a quiet flip found by the comparison: node 0 retired, the survivors back at step 3's checkpoint, the failure-free weights and losses (kept steps differ; a failure in the rollback recovered from)"
